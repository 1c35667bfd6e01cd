// Runs sandboxes under QEMU: one qcow2 overlay on the read-only base image,
// direct kernel boot, user-mode network with restrict=on, SSH forwarded on
// 127.0.0.1, per-sandbox SSH keys handed in through fw_cfg, a QMP socket for
// control. start() returns only once SSH answers with the pinned host key.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { appendFile, chmod, copyFile, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
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
import { SnapshotStore } from './snapshot-store.js';
import { appPaths } from '../state/paths.js';
import { buildQemuArgs, type GuestForward } from './qemu-args.js';
import { QmpClient } from './qmp-client.js';

export type { GuestForward } from './qemu-args.js';

export interface QemuDriverOptions {
  qemuBinary?: string;
  qemuImgBinary?: string;
  /** Chooses the accelerator; the cached real probe by default. */
  accel?: () => Promise<AccelChoice>;
  /**
   * Where booted-VM snapshots are kept for fast starts (the cache dir's
   * snapshots/ by default); false turns fast boot off. FACTORY_FAST_BOOT=0 too.
   */
  snapshotsDir?: string | false;
}

export interface StartOptions {
  sandboxDir: string;
  image: Pick<BaseImage, 'disk' | 'kernel' | 'initrd'> & { cmdline?: string; manifest?: { kernelCmdline?: string } };
  memoryMb?: number;
  cpus?: number;
  bootTimeoutMs?: number;
  /** guest address:port → a command QEMU spawns per guest connection (stdin/stdout = the connection) */
  guestForwards?: GuestForward[];
  /** Restore a booted snapshot of the image instead of booting (default true; falls back to booting). */
  fastBoot?: boolean;
}

export interface RunningVm {
  pid: number;
  accel: string;
  sshPort: number;
  bootMs: number;
  sandboxDir: string;
  /** 'snapshot' when restored from the image's booted snapshot, else 'cold'. */
  bootMode: 'cold' | 'snapshot';
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
  private readonly snapshots: SnapshotStore | undefined;

  constructor(opts: QemuDriverOptions = {}) {
    this.qemuBinary = opts.qemuBinary ?? 'qemu-system-x86_64';
    this.qemuImgBinary = opts.qemuImgBinary ?? 'qemu-img';
    this.chooseAccel = opts.accel ?? (() => AccelProbe.cached({ qemuBinary: this.qemuBinary }));
    const dir = opts.snapshotsDir ?? path.join(appPaths().cache, 'snapshots');
    this.snapshots = dir === false || process.env.FACTORY_FAST_BOOT === '0' ? undefined : new SnapshotStore({ dir });
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

  private installed: { ok: boolean; version?: string; installHint?: string } | undefined;

  /** checkInstalled(), remembered once QEMU was found (a missing QEMU is checked again next time). */
  private async ensureInstalled() {
    if (this.installed?.ok) return this.installed;
    this.installed = await this.checkInstalled();
    return this.installed;
  }

  async start(opts: StartOptions): Promise<RunningVm> {
    const installed = await this.ensureInstalled();
    if (!installed.ok) throw new FactoryError('QemuNotInstalled', `QEMU is not available: ${installed.installHint}`);
    const accel = await this.chooseAccel();
    const sandboxDir = path.resolve(opts.sandboxDir);
    const files = sandboxFiles(sandboxDir);
    await mkdir(sandboxDir, { recursive: true, mode: 0o700 });
    await mkdir(files.keysDir, { recursive: true, mode: 0o700 });
    const overlayExisted = existsSync(files.overlay);
    const keys = generateSandboxKeys(path.basename(sandboxDir));
    await writeKeys(files, keys);
    const launch: LaunchContext = {
      accel,
      files,
      image: opts.image,
      memoryMb: opts.memoryMb ?? 2048,
      cpus: opts.cpus ?? 2,
      guestForwards: opts.guestForwards ?? [],
      qmpSocket: qmpSocketFor(files),
      cmdline: opts.image.cmdline ?? opts.image.manifest?.kernelCmdline ?? DEFAULT_CMDLINE,
    };
    const bootTimeoutMs = opts.bootTimeoutMs ?? (accel.accel === 'tcg' ? 180_000 : 60_000);
    const started = Date.now();

    // A fresh sandbox restores the image's booted snapshot when one can be had;
    // anything going wrong there falls back to a normal boot.
    const snapshots = opts.fastBoot === false || overlayExisted ? undefined : this.snapshots;
    if (snapshots) {
      const key = this.snapshotKeyFor(launch, installed.version ?? '');
      let template: string | undefined;
      try {
        template = await snapshots.ensure(key, (dir) => this.bootTemplate(launch, dir), { baseDisk: path.resolve(launch.image.disk) });
        const vm = await this.restoreClone(launch, template, keys, Math.min(bootTimeoutMs, 60_000));
        vm.bootMs = Date.now() - started;
        return vm;
      } catch (err) {
        this.lastFastBootError = err as Error;
        await rm(files.overlay, { force: true });
        // A template that does not restore is not kept around.
        if (template) await snapshots.discard(key).catch(() => {});
      }
    }

    if (!existsSync(files.overlay)) await createOverlay(opts.image.disk, files.overlay, { qemuImg: this.qemuImgBinary });
    try {
      const vm = await this.coldBoot(launch, keys, started + bootTimeoutMs - Date.now(), bootTimeoutMs);
      vm.bootMs = Date.now() - started;
      return vm;
    } catch (err) {
      await rm(files.keysDir, { recursive: true, force: true });
      await rm(launch.qmpSocket, { force: true });
      await rm(files.pidFile, { force: true });
      if (!overlayExisted) await rm(files.overlay, { force: true });
      throw err;
    }
  }

  /**
   * Makes the booted snapshot that fast starts restore, so the first sandbox
   * does not pay for it. Resolves to false when fast boot is off.
   */
  async prepareFastBoot(image: StartOptions['image'], opts: { memoryMb?: number; cpus?: number } = {}): Promise<boolean> {
    if (!this.snapshots) return false;
    const installed = await this.ensureInstalled();
    if (!installed.ok) throw new FactoryError('QemuNotInstalled', `QEMU is not available: ${installed.installHint}`);
    const launch: LaunchContext = {
      accel: await this.chooseAccel(),
      files: sandboxFiles('/nonexistent'),
      image,
      memoryMb: opts.memoryMb ?? 2048,
      cpus: opts.cpus ?? 2,
      guestForwards: [],
      qmpSocket: '',
      cmdline: image.cmdline ?? image.manifest?.kernelCmdline ?? DEFAULT_CMDLINE,
    };
    await this.snapshots.ensure(this.snapshotKeyFor(launch, installed.version ?? ''), (dir) => this.bootTemplate(launch, dir), { baseDisk: path.resolve(launch.image.disk) });
    return true;
  }

  /** Why the last start() did not restore a snapshot (for diagnostics). */
  lastFastBootError: Error | undefined;

  /** Boots from the kernel, retrying on another port if QEMU could not bind the SSH forward. */
  private async coldBoot(launch: LaunchContext, keys: SandboxKeys, timeoutMs: number, totalTimeoutMs: number): Promise<QemuVm> {
    const deadline = Date.now() + timeoutMs;
    let lastError: Error | undefined;
    for (let attempt = 1; attempt <= PORT_ATTEMPTS; attempt++) {
      const vm = await this.launch(launch, keys, { fwCfgFiles: launch.files, bootMode: 'cold' });
      try {
        await vm.waitForSsh(Math.max(deadline - Date.now(), 1000), totalTimeoutMs);
        return vm;
      } catch (err) {
        await vm.kill();
        lastError = err as Error;
        if (vm.portWasTaken() && attempt < PORT_ATTEMPTS) continue;
        break;
      }
    }
    throw lastError ?? new Error('QEMU did not start');
  }

  private async launch(
    launch: LaunchContext,
    keys: SandboxKeys,
    how: { fwCfgFiles: ReturnType<typeof sandboxFiles>; incomingState?: string; bootMode: 'cold' | 'snapshot' },
  ): Promise<QemuVm> {
    const { files } = launch;
    const sshPort = await freePort();
    await rm(launch.qmpSocket, { force: true });
    await rm(files.pidFile, { force: true });
    const serialOffset = await appendMarker(files.serialLog, `${how.bootMode} boot ${new Date().toISOString()} accel=${launch.accel.accel}`);
    const args = buildQemuArgs({
      accel: launch.accel,
      memoryMb: launch.memoryMb,
      cpus: launch.cpus,
      kernel: launch.image.kernel,
      initrd: launch.image.initrd,
      cmdline: launch.cmdline,
      overlay: files.overlay,
      sshPort,
      guestForwards: launch.guestForwards,
      serialLog: files.serialLog,
      qmpSocket: launch.qmpSocket,
      pidFile: files.pidFile,
      fwCfg: [
        { name: 'authorized_keys', file: how.fwCfgFiles.authorizedKeys },
        { name: 'ssh_host_ed25519_key', file: how.fwCfgFiles.hostKey },
      ],
    });
    if (how.incomingState) args.push('-incoming', `exec:cat ${shq(how.incomingState)}`);
    return new QemuVm({
      sandboxDir: path.dirname(files.overlay),
      files,
      qmpSocket: launch.qmpSocket,
      keys,
      accel: launch.accel,
      sshPort,
      serialOffset,
      bootMode: how.bootMode,
      child: spawn(this.qemuBinary, args, { stdio: ['ignore', 'ignore', 'pipe'] }),
    });
  }

  private snapshotKeyFor(launch: LaunchContext, qemuVersion: string): string {
    // Anything that changes the machine or the guest's memory invalidates a snapshot.
    return createHash('sha256')
      .update(
        JSON.stringify({
          v: 1,
          qemu: qemuVersion,
          binary: this.qemuBinary,
          accel: launch.accel.accel,
          cpu: launch.accel.cpu,
          memoryMb: launch.memoryMb,
          cpus: launch.cpus,
          kernel: launch.image.kernel,
          initrd: launch.image.initrd,
          disk: launch.image.disk,
          cmdline: launch.cmdline,
        }),
      )
      .digest('hex')
      .slice(0, 16);
  }

  /** Boots a template VM in dir, lets it settle, and saves its memory and disk there. */
  private async bootTemplate(launch: LaunchContext, dir: string): Promise<void> {
    const files = sandboxFiles(dir);
    await mkdir(files.keysDir, { recursive: true, mode: 0o700 });
    const keys = generateSandboxKeys('factory-template');
    await writeKeys(files, keys);
    await createOverlay(launch.image.disk, files.overlay, { qemuImg: this.qemuImgBinary });
    // No guest forwards in the template: the clone's command line adds its own.
    const templateLaunch: LaunchContext = { ...launch, files, guestForwards: [], qmpSocket: qmpSocketFor(files) };
    const vm = await this.coldBoot(templateLaunch, keys, 180_000, 180_000);
    try {
      const ssh = await vm.ssh();
      // Less memory to save and restore; nothing in flight on the disk.
      await ssh.run('sync; echo 3 > /proc/sys/vm/drop_caches', { timeoutMs: 60_000 });
      ssh.close();
      await sleep(300);
      const qmp = await vm.qmp();
      await qmp.execute('stop');
      await qmp.execute('migrate', { uri: `exec:cat > ${shq(path.join(dir, 'state'))}` });
      const deadline = Date.now() + 120_000;
      for (;;) {
        const info = (await qmp.execute('query-migrate')) as { status?: string; 'error-desc'?: string };
        if (info.status === 'completed') break;
        if (info.status === 'failed' || info.status === 'cancelled') throw new Error(`snapshot migration ${info.status}: ${info['error-desc'] ?? ''}`);
        if (Date.now() > deadline) throw new Error('snapshot migration did not complete within 120 s');
        await sleep(200);
      }
    } finally {
      await vm.stop();
    }
    await rm(templateLaunch.qmpSocket, { force: true });
    await rm(files.pidFile, { force: true });
  }

  /** Starts a sandbox from a template's saved state, then gives it its own SSH keys and the current time. */
  private async restoreClone(launch: LaunchContext, template: string, keys: SandboxKeys, timeoutMs: number): Promise<QemuVm> {
    const templateFiles = sandboxFiles(template);
    const templateKeys = await readKeys(templateFiles);
    await copyFile(templateFiles.overlay, launch.files.overlay);
    const vm = await this.launch(launch, templateKeys, {
      fwCfgFiles: templateFiles,
      incomingState: path.join(template, 'state'),
      bootMode: 'snapshot',
    });
    try {
      const deadline = Date.now() + timeoutMs;
      const qmp = await vm.qmp(deadline);
      // A stopped source restores paused: wait for the state to load, then resume.
      for (;;) {
        const status = ((await qmp.execute('query-status')) as { status?: string }).status;
        if (status === 'paused' || status === 'postmigrate' || status === 'prelaunch') break;
        if (status === 'running') break;
        if (status !== 'inmigrate') throw new Error(`restored VM is in state ${status}`);
        if (Date.now() > deadline) throw new Error('snapshot state did not load in time');
        await sleep(50);
      }
      await qmp.execute('cont');
      await vm.waitForSsh(Math.max(1000, deadline - Date.now()), timeoutMs);
      await vm.rekey(keys, Math.max(1000, deadline - Date.now()));
      return vm;
    } catch (err) {
      await vm.kill();
      throw err;
    }
  }
}

interface LaunchContext {
  accel: AccelChoice;
  files: ReturnType<typeof sandboxFiles>;
  image: StartOptions['image'];
  memoryMb: number;
  cpus: number;
  guestForwards: GuestForward[];
  qmpSocket: string;
  cmdline: string;
}

async function writeKeys(files: ReturnType<typeof sandboxFiles>, keys: SandboxKeys) {
  await writeFile(files.clientKey, keys.clientPrivateKey, { mode: 0o600 });
  await writeFile(files.authorizedKeys, keys.clientPublicKey, { mode: 0o600 });
  await writeFile(files.hostKey, keys.hostPrivateKey, { mode: 0o600 });
  await writeFile(files.hostPublicKey, keys.hostPublicKey + '\n', { mode: 0o600 });
}

async function readKeys(files: ReturnType<typeof sandboxFiles>): Promise<SandboxKeys> {
  return {
    clientPrivateKey: await readFile(files.clientKey, 'utf8'),
    clientPublicKey: await readFile(files.authorizedKeys, 'utf8'),
    hostPrivateKey: await readFile(files.hostKey, 'utf8'),
    hostPublicKey: (await readFile(files.hostPublicKey, 'utf8')).trim(),
  };
}

/** Unix socket paths are limited to ~107 bytes; fall back to a short private path. */
function qmpSocketFor(files: ReturnType<typeof sandboxFiles>): string {
  return Buffer.byteLength(files.qmpSocket) <= 100 ? files.qmpSocket : path.join(os.tmpdir(), `factory-qmp-${randomBytes(6).toString('hex')}.sock`);
}

function shq(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

interface QemuVmInit {
  sandboxDir: string;
  files: ReturnType<typeof sandboxFiles>;
  qmpSocket: string;
  keys: SandboxKeys;
  accel: AccelChoice;
  sshPort: number;
  serialOffset: number;
  bootMode: 'cold' | 'snapshot';
  child: ChildProcess;
}

class QemuVm implements RunningVm {
  readonly pid: number;
  readonly accel: string;
  readonly sshPort: number;
  readonly sandboxDir: string;
  readonly bootMode: 'cold' | 'snapshot';
  bootMs = 0;
  readonly exited: Promise<void>;
  private readonly files: QemuVmInit['files'];
  private readonly qmpSocket: string;
  private keys: SandboxKeys;
  private qmpClient: Promise<QmpClient> | undefined;
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
    this.bootMode = init.bootMode;
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
    let lastLoginError: Error | undefined;
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
          lastLoginError = err as Error;
        }
      }
      await sleep(200);
    }
    throw new FactoryError(
      'SandboxBootTimeout',
      `the sandbox did not answer SSH within ${Math.round(totalTimeoutMs / 1000)} s (accel ${this.accel}: ${this.accelChoice.reason}); the VM was stopped` +
        (lastLoginError ? `; sshd answered but the login failed: ${lastLoginError.message}` : '') +
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

  /** The VM's QMP connection, made once (retried until the socket is up or the deadline). */
  qmp(deadline = Date.now() + 10_000): Promise<QmpClient> {
    this.qmpClient ??= (async () => {
      for (;;) {
        try {
          return await QmpClient.connect(this.qmpSocket, { timeoutMs: 2000 });
        } catch (err) {
          if (this.hasExited) throw new Error(`QEMU ${this.exitDescription}: ${this.stderr.trim().split('\n').slice(-3).join(' / ')}`);
          if (Date.now() > deadline) throw err;
          await sleep(50);
        }
      }
    })();
    this.qmpClient.catch(() => {
      this.qmpClient = undefined;
    });
    return this.qmpClient;
  }

  /**
   * After a snapshot restore: installs this sandbox's own client key and host
   * key (sshd reloads on SIGHUP), sets the clock and stirs the entropy pool,
   * then reconnects pinning the new host key.
   */
  async rekey(keys: SandboxKeys, timeoutMs: number): Promise<void> {
    const ssh = this.spare ?? (await this.connect());
    this.spare = undefined;
    const script = [
      'set -e',
      'read -r epoch; read -r seed; read -r pub',
      `printf '%s\\n' "$pub" > /root/.ssh/authorized_keys`,
      `printf '%s\\n' "$pub" > /home/agent/.ssh/authorized_keys`,
      'cat > /etc/ssh/ssh_host_ed25519_key',
      `printf '%s' "$seed" > /dev/urandom`,
      'date -u -s "@$epoch" > /dev/null',
      'kill -HUP "$(cat /run/sshd.pid 2>/dev/null || pgrep -o -x sshd)"',
    ].join('\n');
    const channel = await ssh.exec(script);
    const code = await new Promise<number | null>((resolve) => {
      let exit: number | null = null;
      let stderr = '';
      channel.stderr.on('data', (c: Buffer) => {
        if (stderr.length < 2000) stderr += c.toString();
      });
      channel.on('data', () => {});
      channel.on('exit', (c: number | null) => {
        exit = c;
      });
      channel.on('close', () => resolve(exit));
      channel.end(
        `${(Date.now() / 1000).toFixed(3)}\n${randomBytes(64).toString('hex')}\n${keys.clientPublicKey.trim()}\n${keys.hostPrivateKey.trim()}\n`,
      );
    });
    ssh.close();
    if (code !== 0) throw new Error(`re-keying the restored sandbox failed (exit ${code})`);
    this.keys = keys;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        this.spare = await this.connect({ readyTimeoutMs: Math.max(1000, Math.min(20_000, deadline - Date.now())) });
        return;
      } catch (err) {
        // sshd may still be serving the old key for a moment while it reloads.
        if (this.hasExited || Date.now() > deadline) throw err;
        await sleep(100);
      }
    }
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
      const qmp = await this.qmp(Date.now() + 2000);
      try {
        await Promise.race([qmp.execute('quit').catch(() => {}), sleep(2000)]);
      } finally {
        qmp.close();
        this.qmpClient = undefined;
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
    this.qmpClient?.then((q) => q.close()).catch(() => {});
    this.qmpClient = undefined;
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
