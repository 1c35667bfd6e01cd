// One running QEMU process of a sandbox: its stderr and exit, its QMP
// connection, stop (QMP quit, SIGKILL on timeout) and destroy (stop, then
// delete the disk, keys and sockets; logs stay). What happens inside the guest
// (readiness, re-keying) is the guest agent's (main/guest/guest-agent.ts).
import type { ChildProcess } from 'node:child_process';
import { appendFile, chmod, copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { connectGuest, loginAfterRekey, rekeyGuest, waitForSsh } from '../guest/guest-agent.js';
import type { SandboxKeys } from '../ssh/sandbox-keys.js';
import type { SandboxSsh } from '../ssh/sandbox-ssh.js';
import type { AccelChoice } from './accel-probe.js';
import { QmpClient, QmpError } from './qmp-client.js';
import { DISK_DRIVE_ID, type GuestForward, type GuestMemory } from './qemu-args.js';
import { activeDisk, nextDisk, sandboxDisks, writeKeys, type SandboxFiles } from './sandbox-files.js';
import { warmFiles, type WarmMemory } from './warm-state.js';
import { shellQuote } from '../../common/shell-quote.js';
import { readTail } from './serial-log.js';

/** Everything a QEMU launch of a sandbox needs, fixed before the first attempt. */
export interface LaunchContext {
  accel: AccelChoice;
  /** Files of the sandbox folder (resolved path). */
  files: SandboxFiles;
  sandboxDir: string;
  image: { disk: string; kernel: string; initrd: string };
  memoryMb: number;
  cpus: number;
  guestForwards: GuestForward[];
  qmpSocket: string;
  /** QEMU's socket for the host's side of the identity port (qemu-args.ts). */
  identitySocket: string;
  cmdline: string;
  /** Where the guest RAM lives (anonymous when not given): a snapshot template's file, shared or private. */
  memory?: GuestMemory;
}

/** One step of a start, in ms since QEMU was spawned (for the boot bench). */
export interface StartPhase {
  name: string;
  atMs: number;
}

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

export interface QemuVmInit {
  sandboxDir: string;
  files: SandboxFiles;
  qmpSocket: string;
  identitySocket: string;
  keys: SandboxKeys;
  accel: AccelChoice;
  sshPort: number;
  serialOffset: number;
  bootMode: 'cold' | 'snapshot';
  child: ChildProcess;
  /** The files QEMU was given through fw_cfg (a restore of this VM's memory must present the same). */
  fwCfgFiles: SandboxFiles;
  /** machineKey() of this launch: the machine a memory state of this VM belongs to. */
  machineKey: string;
}

/** What freezeDisk() made: the read-only disk, and the memory state of the same instant when asked for and saved. */
export interface FrozenDisk {
  disk: string;
  memory?: WarmMemory;
  /** Why the memory was not saved, when it was asked for. */
  memoryError?: string;
}

export class QemuVm {
  readonly pid: number;
  readonly accel: string;
  readonly sshPort: number;
  readonly sandboxDir: string;
  readonly bootMode: 'cold' | 'snapshot';
  bootMs = 0;
  /** Set by the driver when the overlay was made on a layer. */
  backingDisk: string | undefined = undefined;
  /** Set by the driver: why it booted cold although saved memory was offered (coldBootNote). */
  coldBootReason: string | undefined = undefined;
  readonly exited: Promise<void>;
  private readonly files: SandboxFiles;
  private readonly qmpSocket: string;
  /** QEMU's socket for the identity port (a restored clone's identity goes in there). */
  readonly identitySocket: string;
  private keys: SandboxKeys;
  private qmpClient: Promise<QmpClient> | undefined;
  private readonly accelChoice: AccelChoice;
  private readonly serialOffset: number;
  private readonly child: ChildProcess;
  private readonly fwCfgFiles: SandboxFiles;
  private readonly machineKey: string;
  private freezing: Promise<unknown> = Promise.resolve();
  private stderr = '';
  private ended = false;
  private exitDescription = '';
  private spare: SandboxSsh | undefined;
  /** Re-keyed, and no connection has seen sshd serve the new host key yet. */
  private reloadPending = false;
  private stopping: Promise<void> | undefined;
  private destroyed = false;
  /** performance.now() when QEMU was spawned (phases count from here). */
  readonly spawnedAt = performance.now();
  /** The steps of this VM's start so far (QEMU spawned = 0). */
  readonly phases: StartPhase[] = [];

  constructor(init: QemuVmInit) {
    this.child = init.child;
    this.pid = init.child.pid ?? -1;
    this.accel = init.accel.accel;
    this.accelChoice = init.accel;
    this.sshPort = init.sshPort;
    this.sandboxDir = init.sandboxDir;
    this.files = init.files;
    this.qmpSocket = init.qmpSocket;
    this.identitySocket = init.identitySocket;
    this.keys = init.keys;
    this.serialOffset = init.serialOffset;
    this.bootMode = init.bootMode;
    this.fwCfgFiles = init.fwCfgFiles;
    this.machineKey = init.machineKey;
    track(this.child);
    const log = init.files.qemuLog;
    this.child.stderr?.on('data', (c: Buffer) => {
      const text = c.toString('utf8');
      if (this.stderr.length < 16384) this.stderr += text;
      // The text is also kept in memory for the error message; the log file is a convenience.
      appendFile(log, text).catch(() => {});
    });
    this.exited = new Promise((resolve) => {
      const done = (desc: string) => {
        if (this.ended) return;
        this.ended = true;
        this.exitDescription = desc;
        resolve();
      };
      this.child.once('exit', (code, signal) => done(signal ? `killed by ${signal}` : `exited with code ${code}`));
      this.child.once('error', (err) => done(`could not start: ${err.message}`));
    });
  }

  /** Notes that a step of the start is done now. */
  mark(name: string): void {
    this.phases.push({ name, atMs: performance.now() - this.spawnedAt });
  }

  get hasExited(): boolean {
    return this.ended;
  }

  /** How QEMU ended and its last stderr lines, once it has; undefined while it runs. */
  exitSummary(): string | undefined {
    if (!this.ended) return undefined;
    const said = this.stderr.trim().split('\n').slice(-3).join(' / ');
    return `QEMU ${this.exitDescription}${said ? `: ${said}` : ''}`;
  }

  portWasTaken(): boolean {
    return /Could not set up host forwarding rule/i.test(this.stderr);
  }

  /** Waits until the guest answers SSH with the pinned key; keeps that connection for the first ssh(). */
  async waitForSsh(timeoutMs: number, totalTimeoutMs: number): Promise<void> {
    this.spare = await waitForSsh({
      endpoint: { port: this.sshPort, keys: this.keys },
      vm: this,
      timeoutMs,
      onBanner: () => this.mark('ssh banner'),
      // A restored guest's sshd already listens: log in at once, retrying often.
      pollMs: this.bootMode === 'snapshot' ? 20 : 200,
      probeBanner: this.bootMode !== 'snapshot',
      exitedError: () =>
        new FactoryError(
          'SandboxBootFailed',
          `QEMU ${this.exitDescription} before the sandbox answered SSH` +
            (this.stderr.trim() ? `: ${this.stderr.trim().split('\n').slice(-5).join(' / ')}` : '') +
            this.serialSection(),
        ),
      timeoutError: (lastLoginError) =>
        new FactoryError(
          'SandboxBootTimeout',
          `the sandbox did not answer SSH within ${Math.round(totalTimeoutMs / 1000)} s (accel ${this.accel}: ${this.accelChoice.reason}); the VM was stopped` +
            (lastLoginError ? `; sshd answered but the login failed: ${lastLoginError.message}` : '') +
            this.serialSection(),
        ),
    });
    this.mark('ssh login');
  }

  /**
   * After a snapshot restore: this sandbox's own keys replace the template's in
   * the guest. The connection that ran the re-key stays the spare (one SSH
   * handshake less before a shell); the next new connection waits until sshd
   * serves the new host key (loginAfterRekey).
   */
  async rekey(keys: SandboxKeys, timeoutMs: number): Promise<void> {
    const ssh = this.spare ?? (await connectGuest({ port: this.sshPort, keys: this.keys }));
    this.spare = undefined;
    this.spare = await rekeyGuest(ssh, { port: this.sshPort, keys }, timeoutMs, (step) => this.mark(step));
    this.keys = keys;
    this.reloadPending = true;
  }

  /**
   * The guest took these keys through the identity port and its sshd already
   * serves the new host key: from now on only they are used (the next
   * waitForSsh() or ssh() pins the new host key).
   */
  adoptKeys(keys: SandboxKeys): void {
    this.spare?.close();
    this.spare = undefined;
    this.keys = keys;
    this.reloadPending = false;
  }

  /** A new connection; right after a re-key, the first one waits for sshd to serve the new host key. */
  private async connect(opts: { username?: string }): Promise<SandboxSsh> {
    const endpoint = { port: this.sshPort, keys: this.keys };
    if (!this.reloadPending) return connectGuest(endpoint, opts);
    const ssh = await loginAfterRekey(endpoint, this, 20_000, opts);
    this.reloadPending = false;
    return ssh;
  }

  private serialSection(): string {
    const tail = this.serialTail(20);
    return tail ? `\n--- last serial console lines ---\n${tail}` : '\n(the serial console printed nothing)';
  }

  /** The VM's QMP connection, made once (retried until the socket is up or the deadline). */
  qmp(deadline = Date.now() + 10_000): Promise<QmpClient> {
    this.qmpClient ??= (async () => {
      for (;;) {
        try {
          return await QmpClient.connect(this.qmpSocket, { timeoutMs: 2000 });
        } catch (err) {
          if (this.ended) throw new Error(`QEMU ${this.exitDescription}: ${this.stderr.trim().split('\n').slice(-3).join(' / ')}`);
          if (Date.now() > deadline) throw err;
          await sleep(10); // a unix socket connect is cheap; QEMU creates it early
        }
      }
    })();
    // A failed connect is forgotten so the next call tries again; the caller sees the failure.
    this.qmpClient.catch(() => {
      this.qmpClient = undefined;
    });
    return this.qmpClient;
  }

  async ssh(opts: { username?: string } = {}): Promise<SandboxSsh> {
    if (this.ended || this.destroyed) throw new FactoryError('SandboxStopped', `the sandbox in ${this.sandboxDir} is not running`);
    // The connection that proved the boot is handed out first (saves a handshake).
    const spare = this.spare;
    this.spare = undefined;
    if (spare && !spare.isClosed && (opts.username ?? 'root') === 'root') return spare;
    spare?.close();
    return this.connect(opts);
  }

  /**
   * Makes the disk written so far a read-only file and sends the guest's
   * further writes to a new overlay on top of it (QMP blockdev-snapshot-sync;
   * QEMU flushes the old file and reopens it read-only). The caller has run
   * `sync` in the guest first. Returns the frozen file, whose backing file is
   * unchanged (the base image, or a layer). Without `memory` the VM never
   * stops; with it the VM is paused while its memory is saved to a file
   * (warm-state.ts) so that memory and frozen disk are of one instant; a
   * failed save leaves the disk frozen and says why (memoryError).
   */
  freezeDisk(opts: { memory?: boolean } = {}): Promise<FrozenDisk> {
    const run = this.freezing.then(
      () => this.doFreeze(opts.memory === true),
      () => this.doFreeze(opts.memory === true),
    );
    this.freezing = run.catch(() => {});
    return run;
  }

  private async doFreeze(memory: boolean): Promise<FrozenDisk> {
    if (this.ended || this.destroyed) throw new FactoryError('SandboxStopped', `the sandbox in ${this.sandboxDir} is not running`);
    // The saved guest must answer with the keys written beside it: wait for sshd's reload.
    if (memory && this.reloadPending) (await this.connect({})).close();
    const frozen = activeDisk(this.files);
    const next = nextDisk(this.files);
    const qmp = await this.qmp();
    // The memory goes next to the disk it matches, one folder per freeze.
    const warmDir = path.join(this.sandboxDir, `warm-${path.basename(frozen, '.qcow2')}`);
    let prepared = false;
    let prepareError = '';
    if (memory) {
      try {
        await this.prepareWarmDir(warmDir);
        prepared = true;
      } catch (err) {
        // The disk is still frozen without the memory: the layer boots cold, and memoryError says why.
        prepareError = (err as Error).message;
        await rm(warmDir, { recursive: true, force: true });
      }
    }
    try {
      if (prepared) await qmp.execute('stop');
      try {
        await qmp.execute('blockdev-snapshot-sync', {
          device: DISK_DRIVE_ID,
          'snapshot-file': next,
          format: 'qcow2',
          // The new overlay names the frozen file by its absolute path, so a restart finds the chain.
          mode: 'absolute-paths',
        });
      } catch (err) {
        // QEMU refused: it still writes to the old file, so a file it may have left is not the disk.
        if (err instanceof QmpError) await rm(next, { force: true });
        if (prepared) await rm(warmDir, { recursive: true, force: true });
        throw new Error(`could not freeze the sandbox disk: ${(err as Error).message}`);
      }
      await chmod(frozen, 0o444);
      if (!memory) return { disk: frozen };
      if (!prepared) return { disk: frozen, memoryError: `could not prepare the memory state folder: ${prepareError}` };
      try {
        // Still paused: the guest cannot have written anything since the disk was frozen.
        await saveMemory(qmp, warmFiles(warmDir).state);
        return { disk: frozen, memory: { dir: warmDir, machineKey: this.machineKey } };
      } catch (err) {
        await rm(warmDir, { recursive: true, force: true });
        return { disk: frozen, memoryError: (err as Error).message };
      }
    } finally {
      // After a completed migration cont also takes the disks back from the (file) destination.
      if (prepared) await qmp.execute('cont');
    }
  }

  /** The fw_cfg files this VM was started with and the keys its guest answers with now. */
  private async prepareWarmDir(dir: string): Promise<void> {
    await rm(dir, { recursive: true, force: true });
    const f = warmFiles(dir);
    await mkdir(f.fwCfg.keysDir, { recursive: true, mode: 0o700 });
    await mkdir(f.guest.keysDir, { recursive: true, mode: 0o700 });
    await copyFile(this.fwCfgFiles.authorizedKeys, f.fwCfg.authorizedKeys);
    await copyFile(this.fwCfgFiles.hostKey, f.fwCfg.hostKey);
    await writeKeys(f.guest, this.keys);
    // Guest memory may hold anything of the guest: owner-only before QEMU writes into it.
    await writeFile(f.state, '', { mode: 0o600 });
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
    if (this.ended) return;
    try {
      const qmp = await this.qmp(Date.now() + 2000);
      try {
        // QEMU may close the socket before it answers quit; the exit below is what counts.
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
    // Closing a client whose connect failed has nothing to close.
    this.qmpClient?.then((q) => q.close()).catch(() => {});
    this.qmpClient = undefined;
    if (!this.ended) this.child.kill('SIGKILL');
    await this.exited;
  }

  async destroy(): Promise<void> {
    await this.stop();
    this.destroyed = true;
    // Every disk of the chain (frozen ones too: a layer keeps its own link or copy).
    for (const disk of sandboxDisks(this.files).reverse()) await rm(disk, { force: true });
    await rm(this.files.overlay, { force: true });
    await rm(this.files.keysDir, { recursive: true, force: true });
    // A sandbox folder already gone has no warm overlays left to remove.
    for (const name of await readdir(this.sandboxDir).catch(() => [] as string[])) {
      if (/^warm-overlay(-[0-9]+)?$/.test(name)) await rm(path.join(this.sandboxDir, name), { recursive: true, force: true });
    }
    await rm(this.qmpSocket, { force: true });
    await rm(this.identitySocket, { force: true });
    await rm(this.files.pidFile, { force: true });
  }
}

/** Saves the paused VM's memory and device state to file (QMP migrate to a file, as the booted snapshot is made). */
async function saveMemory(qmp: QmpClient, file: string): Promise<void> {
  // A clone of a template restored with x-ignore-shared still has it set; a layer's state holds all of its RAM.
  await qmp.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: false }] });
  await qmp.execute('migrate', { uri: `exec:cat > ${shellQuote(file)}` });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const info = (await qmp.execute('query-migrate')) as { status?: string; 'error-desc'?: string };
    if (info.status === 'completed') break;
    if (info.status === 'failed' || info.status === 'cancelled') throw new Error(`saving the memory failed (${info.status}): ${info['error-desc'] ?? ''}`);
    if (Date.now() > deadline) {
      // The timeout below is the failure to report; a cancel QEMU refuses changes nothing about it.
      await qmp.execute('migrate_cancel').catch(() => {});
      throw new Error('saving the memory did not complete within 120 s');
    }
    await sleep(200);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
