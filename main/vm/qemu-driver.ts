// Runs sandboxes under QEMU: one qcow2 overlay on the read-only base image,
// direct kernel boot, user-mode network with restrict=on, SSH forwarded on
// 127.0.0.1, per-sandbox SSH keys handed in through fw_cfg, a QMP socket for
// control. start() returns only once SSH answers with the pinned host key.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { appendFile, chmod, mkdir, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { FactoryError } from '../../common/contract.js';
import { generateSandboxKeys, type SandboxKeys } from '../ssh/sandbox-keys.js';
import { HostKeyMismatchError, SandboxSsh } from '../ssh/sandbox-ssh.js';
import { AccelProbe, type AccelChoice } from './accel-probe.js';
import type { BaseImage } from './image-store.js';
import { createOverlay } from './overlay.js';
import { runCommand } from './process-runner.js';
import { buildQemuArgs, type GuestForward } from './qemu-args.js';
import { QmpClient } from './qmp-client.js';

export type { GuestForward } from './qemu-args.js';

export interface QemuDriverOptions {
  qemuBinary?: string;
  qemuImgBinary?: string;
  /** Chooses the accelerator; the cached real probe by default. */
  accel?: () => Promise<AccelChoice>;
}

export interface StartOptions {
  sandboxDir: string;
  image: Pick<BaseImage, 'disk' | 'kernel' | 'initrd'> & { cmdline?: string; manifest?: { kernelCmdline?: string } };
  memoryMb?: number;
  cpus?: number;
  bootTimeoutMs?: number;
  /** guest address:port → a command QEMU spawns per guest connection (stdin/stdout = the connection) */
  guestForwards?: GuestForward[];
}

export interface RunningVm {
  pid: number;
  accel: string;
  sshPort: number;
  bootMs: number;
  sandboxDir: string;
  /** New connection, host key pinned, per-sandbox client key. */
  ssh(opts?: { username?: string }): Promise<SandboxSsh>;
  /** QMP quit, SIGKILL on timeout; resolves when the process has ended. */
  stop(): Promise<void>;
  /** stop() and delete overlay, keys, sockets; keeps the logs. */
  destroy(): Promise<void>;
  serialTail(lines: number): string;
  exited: Promise<void>;
}

/** Files of a sandbox folder. */
export function sandboxFiles(sandboxDir: string) {
  return {
    overlay: path.join(sandboxDir, 'overlay.qcow2'),
    keysDir: path.join(sandboxDir, 'keys'),
    clientKey: path.join(sandboxDir, 'keys', 'client_ed25519'),
    authorizedKeys: path.join(sandboxDir, 'keys', 'authorized_keys'),
    hostKey: path.join(sandboxDir, 'keys', 'ssh_host_ed25519_key'),
    hostPublicKey: path.join(sandboxDir, 'keys', 'ssh_host_ed25519_key.pub'),
    serialLog: path.join(sandboxDir, 'serial.log'),
    qemuLog: path.join(sandboxDir, 'qemu.log'),
    pidFile: path.join(sandboxDir, 'qemu.pid'),
    qmpSocket: path.join(sandboxDir, 'qmp.sock'),
  };
}

const DEFAULT_CMDLINE = 'root=/dev/vda rw rootfstype=ext4 console=ttyS0 net.ifnames=0 init=/sbin/factory-init panic=-1 quiet';
const PORT_ATTEMPTS = 4;

// QEMU children of this process, killed if the process exits without tearing them down.
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(child: ChildProcess) {
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const c of liveChildren) c.kill('SIGKILL');
    });
  }
}

export class QemuDriver {
  private readonly qemuBinary: string;
  private readonly qemuImgBinary: string;
  private readonly chooseAccel: () => Promise<AccelChoice>;

  constructor(opts: QemuDriverOptions = {}) {
    this.qemuBinary = opts.qemuBinary ?? 'qemu-system-x86_64';
    this.qemuImgBinary = opts.qemuImgBinary ?? 'qemu-img';
    this.chooseAccel = opts.accel ?? (() => AccelProbe.cached({ qemuBinary: this.qemuBinary }));
  }

  static installHint(platform: NodeJS.Platform = process.platform): string {
    if (platform === 'darwin') return 'install QEMU with: brew install qemu';
    return 'install QEMU with: sudo apt-get install qemu-system-x86 qemu-utils (Debian/Ubuntu) or sudo dnf install qemu-system-x86 qemu-img (Fedora)';
  }

  async checkInstalled(): Promise<{ ok: boolean; version?: string; installHint?: string }> {
    const hint = QemuDriver.installHint();
    for (const bin of [this.qemuBinary, this.qemuImgBinary]) {
      try {
        const r = await runCommand(bin, ['--version'], { timeoutMs: 15_000 });
        if (r.code !== 0) return { ok: false, installHint: `${bin} --version failed; ${hint}` };
      } catch {
        return { ok: false, installHint: `${bin} is not installed; ${hint}` };
      }
    }
    const r = await runCommand(this.qemuBinary, ['--version'], { timeoutMs: 15_000 });
    const version = /version\s+([0-9][^\s]*)/i.exec(r.stdout)?.[1];
    return { ok: true, ...(version ? { version } : {}) };
  }

  async start(opts: StartOptions): Promise<RunningVm> {
    const installed = await this.checkInstalled();
    if (!installed.ok) throw new FactoryError('QemuNotInstalled', `QEMU is not available: ${installed.installHint}`);
    const accel = await this.chooseAccel();
    const files = sandboxFiles(path.resolve(opts.sandboxDir));
    const sandboxDir = path.resolve(opts.sandboxDir);
    await mkdir(sandboxDir, { recursive: true, mode: 0o700 });
    await mkdir(files.keysDir, { recursive: true, mode: 0o700 });

    const overlayExisted = existsSync(files.overlay);
    if (!overlayExisted) await createOverlay(opts.image.disk, files.overlay, { qemuImg: this.qemuImgBinary });

    const keys = generateSandboxKeys(path.basename(sandboxDir));
    await writeFile(files.clientKey, keys.clientPrivateKey, { mode: 0o600 });
    await writeFile(files.authorizedKeys, keys.clientPublicKey, { mode: 0o600 });
    await writeFile(files.hostKey, keys.hostPrivateKey, { mode: 0o600 });
    await writeFile(files.hostPublicKey, keys.hostPublicKey + '\n', { mode: 0o600 });

    // Unix socket paths are limited to ~107 bytes; fall back to a short private path.
    const qmpSocket =
      Buffer.byteLength(files.qmpSocket) <= 100 ? files.qmpSocket : path.join(os.tmpdir(), `factory-qmp-${randomBytes(6).toString('hex')}.sock`);

    const cmdline = opts.image.cmdline ?? opts.image.manifest?.kernelCmdline ?? DEFAULT_CMDLINE;
    const bootTimeoutMs = opts.bootTimeoutMs ?? (accel.accel === 'tcg' ? 180_000 : 60_000);
    const started = Date.now();
    let lastError: Error | undefined;

    for (let attempt = 1; attempt <= PORT_ATTEMPTS; attempt++) {
      const sshPort = await freePort();
      await rm(qmpSocket, { force: true });
      await rm(files.pidFile, { force: true });
      const serialOffset = await appendMarker(files.serialLog, `boot ${new Date().toISOString()} accel=${accel.accel}`);
      const args = buildQemuArgs({
        accel,
        memoryMb: opts.memoryMb ?? 2048,
        cpus: opts.cpus ?? 2,
        kernel: opts.image.kernel,
        initrd: opts.image.initrd,
        cmdline,
        overlay: files.overlay,
        sshPort,
        guestForwards: opts.guestForwards ?? [],
        serialLog: files.serialLog,
        qmpSocket,
        pidFile: files.pidFile,
        fwCfg: [
          { name: 'authorized_keys', file: files.authorizedKeys },
          { name: 'ssh_host_ed25519_key', file: files.hostKey },
        ],
      });
      const vm = new QemuVm({
        sandboxDir,
        files,
        qmpSocket,
        keys,
        accel,
        sshPort,
        serialOffset,
        child: spawn(this.qemuBinary, args, { stdio: ['ignore', 'ignore', 'pipe'] }),
      });
      try {
        const remaining = bootTimeoutMs - (Date.now() - started);
        await vm.waitForSsh(Math.max(remaining, 1000), bootTimeoutMs);
        vm.bootMs = Date.now() - started;
        return vm;
      } catch (err) {
        await vm.kill();
        lastError = err as Error;
        if (vm.portWasTaken() && attempt < PORT_ATTEMPTS) continue;
        break;
      }
    }
    await this.cleanupAfterFailedStart(files, qmpSocket, overlayExisted);
    throw lastError ?? new Error('QEMU did not start');
  }

  private async cleanupAfterFailedStart(files: ReturnType<typeof sandboxFiles>, qmpSocket: string, keepOverlay: boolean) {
    await rm(files.keysDir, { recursive: true, force: true });
    await rm(qmpSocket, { force: true });
    await rm(files.pidFile, { force: true });
    if (!keepOverlay) await rm(files.overlay, { force: true });
  }
}

interface QemuVmInit {
  sandboxDir: string;
  files: ReturnType<typeof sandboxFiles>;
  qmpSocket: string;
  keys: SandboxKeys;
  accel: AccelChoice;
  sshPort: number;
  serialOffset: number;
  child: ChildProcess;
}

class QemuVm implements RunningVm {
  readonly pid: number;
  readonly accel: string;
  readonly sshPort: number;
  readonly sandboxDir: string;
  bootMs = 0;
  readonly exited: Promise<void>;
  private readonly files: QemuVmInit['files'];
  private readonly qmpSocket: string;
  private readonly keys: SandboxKeys;
  private readonly accelChoice: AccelChoice;
  private readonly serialOffset: number;
  private readonly child: ChildProcess;
  private stderr = '';
  private hasExited = false;
  private exitDescription = '';
  private spare: SandboxSsh | undefined;
  private stopping: Promise<void> | undefined;
  private destroyed = false;

  constructor(init: QemuVmInit) {
    this.child = init.child;
    this.pid = init.child.pid ?? -1;
    this.accel = init.accel.accel;
    this.accelChoice = init.accel;
    this.sshPort = init.sshPort;
    this.sandboxDir = init.sandboxDir;
    this.files = init.files;
    this.qmpSocket = init.qmpSocket;
    this.keys = init.keys;
    this.serialOffset = init.serialOffset;
    track(this.child);
    const log = init.files.qemuLog;
    this.child.stderr?.on('data', (c: Buffer) => {
      const text = c.toString('utf8');
      if (this.stderr.length < 16384) this.stderr += text;
      appendFile(log, text).catch(() => {});
    });
    this.exited = new Promise((resolve) => {
      const done = (desc: string) => {
        if (this.hasExited) return;
        this.hasExited = true;
        this.exitDescription = desc;
        resolve();
      };
      this.child.once('exit', (code, signal) => done(signal ? `killed by ${signal}` : `exited with code ${code}`));
      this.child.once('error', (err) => done(`could not start: ${err.message}`));
    });
  }

  portWasTaken(): boolean {
    return /Could not set up host forwarding rule/i.test(this.stderr);
  }

  /** Waits for the SSH banner on the forwarded port, then for a full login with the pinned key. */
  async waitForSsh(timeoutMs: number, totalTimeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const exitedEarly = () =>
      new FactoryError(
        'SandboxBootFailed',
        `QEMU ${this.exitDescription} before the sandbox answered SSH` +
          (this.stderr.trim() ? `: ${this.stderr.trim().split('\n').slice(-5).join(' / ')}` : '') +
          this.serialSection(),
      );
    while (Date.now() < deadline) {
      if (this.hasExited) throw exitedEarly();
      const banner = await Promise.race([probeSshBanner(this.sshPort, Math.min(3000, Math.max(200, deadline - Date.now()))), this.exited.then(() => false)]);
      if (this.hasExited) throw exitedEarly();
      if (banner) {
        try {
          this.spare = await this.connect({ readyTimeoutMs: Math.max(1000, Math.min(30_000, deadline - Date.now())) });
          return;
        } catch (err) {
          if (err instanceof HostKeyMismatchError) throw err;
          if (this.hasExited) throw exitedEarly();
        }
      }
      await sleep(200);
    }
    throw new FactoryError(
      'SandboxBootTimeout',
      `the sandbox did not answer SSH within ${Math.round(totalTimeoutMs / 1000)} s (accel ${this.accel}: ${this.accelChoice.reason}); the VM was stopped` +
        this.serialSection(),
    );
  }

  private serialSection(): string {
    const tail = this.serialTail(20);
    return tail ? `\n--- last serial console lines ---\n${tail}` : '\n(the serial console printed nothing)';
  }

  private connect(opts: { username?: string; readyTimeoutMs?: number } = {}): Promise<SandboxSsh> {
    return SandboxSsh.connect({
      port: this.sshPort,
      username: opts.username ?? 'root',
      privateKey: this.keys.clientPrivateKey,
      hostPublicKey: this.keys.hostPublicKey,
      readyTimeoutMs: opts.readyTimeoutMs ?? 30_000,
    });
  }

  async ssh(opts: { username?: string } = {}): Promise<SandboxSsh> {
    if (this.hasExited || this.destroyed) throw new FactoryError('SandboxStopped', `the sandbox in ${this.sandboxDir} is not running`);
    // The connection that proved the boot is handed out first (saves a handshake).
    const spare = this.spare;
    this.spare = undefined;
    if (spare && !spare.isClosed && (opts.username ?? 'root') === 'root') return spare;
    spare?.close();
    return this.connect(opts);
  }

  serialTail(lines: number): string {
    return readTail(this.files.serialLog, this.serialOffset, lines);
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    this.spare?.close();
    this.spare = undefined;
    if (this.hasExited) return;
    try {
      const qmp = await QmpClient.connect(this.qmpSocket, { timeoutMs: 2000 });
      try {
        await Promise.race([qmp.execute('quit').catch(() => {}), sleep(2000)]);
      } finally {
        qmp.close();
      }
    } catch {
      // QMP unreachable: fall through to the kill.
    }
    const quit = await Promise.race([this.exited.then(() => true), sleep(5000).then(() => false)]);
    if (!quit) await this.kill();
  }

  /** SIGKILL and wait for the process to be gone. */
  async kill(): Promise<void> {
    this.spare?.close();
    this.spare = undefined;
    if (!this.hasExited) this.child.kill('SIGKILL');
    await this.exited;
  }

  async destroy(): Promise<void> {
    await this.stop();
    this.destroyed = true;
    await rm(this.files.overlay, { force: true });
    await rm(this.files.keysDir, { recursive: true, force: true });
    await rm(this.qmpSocket, { force: true });
    await rm(this.files.pidFile, { force: true });
  }
}

/** True once the forwarded port sends an SSH identification line. */
export function probeSshBanner(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host: '127.0.0.1', port });
    let data = '';
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (c: Buffer) => {
      data += c.toString('latin1');
      if (data.startsWith('SSH-')) finish(true);
      else if (data.length >= 4) finish(false);
    });
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      server.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Appends a marker line to the serial log and returns the offset the new boot starts at. */
async function appendMarker(file: string, text: string): Promise<number> {
  await appendFile(file, `\n=== factory: ${text} ===\n`);
  await chmod(file, 0o600).catch(() => {});
  return (await stat(file)).size;
}

/** Last lines of a log written by the guest, from an offset, with control characters removed. */
export function readTail(file: string, fromOffset: number, lines: number, maxBytes = 64 * 1024): string {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return '';
  }
  try {
    const size = statSync(file).size;
    const start = Math.max(fromOffset, size - maxBytes);
    const length = Math.max(0, size - start);
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, start);
    const text = buf
      .toString('utf8')
      .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
      .replace(/\r/g, '')
      .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '');
    return text.split('\n').filter((l) => l.trim()).slice(-lines).join('\n');
  } finally {
    closeSync(fd);
  }
}

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}
