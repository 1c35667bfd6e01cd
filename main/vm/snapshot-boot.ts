// Fast starts: a booted guest's memory and disk, saved once per machine
// configuration (the template), restored into each new sandbox; the guest
// agent then gives the clone its own keys, machine id, entropy and the time.
// The template's RAM lives in a file (`ram`, QEMU memory-backend-file, shared
// while the template runs); its saved state (`state`) holds only the devices
// (migration capability x-ignore-shared). A clone maps that file privately:
// pages load lazily from the page cache, shared by every clone, and a clone's
// writes stay its own. The template's guest is left waiting for an identity
// (main/guest/identity-channel.ts): the host writes it into the clone's identity
// port before the clone resumes, and the first SSH connection already pins the
// clone's own host key. A template that fails to restore is thrown away; the
// driver then boots cold.
import { existsSync } from 'node:fs';
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { generateSandboxKeys, type SandboxKeys } from '../ssh/sandbox-keys.js';
import type { QemuVm, LaunchContext } from './qemu-vm.js';
import { sleep } from './qemu-vm.js';
import { identitySocketFor, qmpSocketFor, readKeys, sandboxFiles, writeKeys, type SandboxFiles } from './sandbox-files.js';
import { IdentityChannel, identityWaiterCommand } from '../guest/identity-channel.js';
import type { SnapshotStore } from './snapshot-store.js';
import type { TerminalSource } from '../terminal/types.js';
import { shellQuote } from '../../common/shell-quote.js';
import { machineKey, TEMPLATE_VERSION, templateKey } from './warm-state.js';

/** What snapshot boot needs of the driver: starting QEMU processes. */
export interface QemuLauncher {
  readonly qemuBinary: string;
  /** deferIncoming: start with `-incoming defer`; resumeRestored then sets the capabilities and loads incomingState. */
  launch(ctx: LaunchContext, keys: SandboxKeys, how: { fwCfgFiles: SandboxFiles; incomingState?: string; deferIncoming?: boolean; bootMode: 'cold' | 'snapshot' }): Promise<QemuVm>;
  coldBoot(ctx: LaunchContext, keys: SandboxKeys, timeoutMs: number, totalTimeoutMs: number): Promise<QemuVm>;
  createOverlay(baseDisk: string, overlay: string): Promise<void>;
}

export class SnapshotBoot {
  constructor(
    private readonly store: SnapshotStore,
    private readonly launcher: QemuLauncher,
  ) {}

  /** Makes the template for this configuration unless it exists. */
  async prepare(ctx: LaunchContext, qemuVersion: string): Promise<void> {
    await this.template(ctx, qemuVersion);
  }

  /**
   * Starts the sandbox of ctx from the template (made first if missing), with
   * its own keys. Rejects, leaving no process, when anything goes wrong; a
   * template that was there but did not restore is discarded.
   */
  async start(ctx: LaunchContext, keys: SandboxKeys, qemuVersion: string, timeoutMs: number, firstShell?: FirstShell): Promise<QemuVm> {
    const { key, dir } = await this.template(ctx, qemuVersion);
    try {
      return await this.restoreClone(ctx, dir, keys, timeoutMs, firstShell);
    } catch (err) {
      // Best effort: if it cannot be removed, the next start fails the same way and falls back again.
      await this.store.discard(key).catch(() => {});
      throw err;
    }
  }

  private async template(ctx: LaunchContext, qemuVersion: string): Promise<{ key: string; dir: string }> {
    // Anything that changes the machine or what the template's guest runs invalidates a snapshot.
    const machine = machineKey(ctx, qemuVersion, this.launcher.qemuBinary);
    const key = templateKey(machine);
    const dir = await this.store.ensure(key, (tmp) => this.bootTemplate(ctx, tmp), { baseDisk: path.resolve(ctx.image.disk), machine, version: TEMPLATE_VERSION });
    return { key, dir };
  }

  /** Boots a template VM in dir, lets it settle, and saves its memory and disk there. */
  private async bootTemplate(ctx: LaunchContext, dir: string): Promise<void> {
    const files = sandboxFiles(dir);
    await mkdir(files.keysDir, { recursive: true, mode: 0o700 });
    const keys = generateSandboxKeys('factory-template');
    await writeKeys(files, keys);
    await this.launcher.createOverlay(ctx.image.disk, files.overlay);
    const ram = templateRam(dir);
    // Guest memory may hold anything of the guest: owner-only before QEMU sizes it (sparse).
    await writeFile(ram, '', { mode: 0o600 });
    // No guest forwards in the template: the clone's command line adds its own.
    const templateCtx: LaunchContext = {
      ...ctx,
      files,
      sandboxDir: dir,
      guestForwards: [],
      qmpSocket: qmpSocketFor(files),
      identitySocket: identitySocketFor(files),
      memory: { kind: 'file', path: ram, shared: true },
    };
    const vm = await this.launcher.coldBoot(templateCtx, keys, 180_000, 180_000);
    let port: IdentityChannel | undefined;
    try {
      const ssh = await vm.ssh();
      // Less memory in the RAM file; nothing in flight on the disk. Then what every clone runs first
      // (a login shell) is read back into the guest's page cache, so clones find it in
      // memory (shared) instead of reading it through the emulated disk.
      await ssh.run('sync; echo 3 > /proc/sys/vm/drop_caches; bash -lc true < /dev/null; sync', { timeoutMs: 60_000 });
      // Connected while the snapshot is taken, so the saved waiter sleeps in read() (woken by the clone's
      // identity) rather than seeing a closed port and polling.
      port = await IdentityChannel.connect(templateCtx.identitySocket, Date.now() + 10_000);
      // The waiter; from here on nothing listens on port 22 in this guest (sshd waits for a host key).
      const waiter = await ssh.run(identityWaiterCommand(), { timeoutMs: 60_000 });
      if (waiter.code !== 0) throw new Error(`the identity waiter did not start (exit ${waiter.code}): ${waiter.stderr.trim().slice(-300)}`);
      await ssh.run('sync', { timeoutMs: 60_000 });
      ssh.close();
      await sleep(300);
      const qmp = await vm.qmp();
      // The RAM stays in its file; the state holds the devices only.
      await qmp.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
      await qmp.execute('stop');
      await qmp.execute('migrate', { uri: `exec:cat > ${shellQuote(path.join(dir, 'state'))}` });
      const deadline = Date.now() + 120_000;
      for (;;) {
        const info = (await qmp.execute('query-migrate')) as { status?: string; 'error-desc'?: string };
        if (info.status === 'completed') break;
        if (info.status === 'failed' || info.status === 'cancelled') throw new Error(`snapshot migration ${info.status}: ${info['error-desc'] ?? ''}`);
        if (Date.now() > deadline) throw new Error('snapshot migration did not complete within 120 s');
        await sleep(200);
      }
    } finally {
      port?.close();
      await vm.stop();
    }
    await rm(templateCtx.qmpSocket, { force: true });
    await rm(templateCtx.identitySocket, { force: true });
    await rm(files.pidFile, { force: true });
  }

  /** Starts a sandbox from a template's saved state, giving it its own SSH keys, machine id, entropy and the time. */
  private async restoreClone(ctx: LaunchContext, template: string, keys: SandboxKeys, timeoutMs: number, firstShell?: FirstShell): Promise<QemuVm> {
    const templateFiles = sandboxFiles(template);
    const ram = templateRam(template);
    if (!existsSync(ram)) throw new Error('the snapshot template has no RAM file');
    const templateKeys = await readKeys(templateFiles);
    await copyFile(templateFiles.overlay, ctx.files.overlay);
    // Private: the clone's writes never reach the template's file.
    const cloneCtx: LaunchContext = { ...ctx, memory: { kind: 'file', path: ram, shared: false } };
    const vm = await this.launcher.launch(cloneCtx, templateKeys, {
      fwCfgFiles: templateFiles,
      incomingState: path.join(template, 'state'),
      deferIncoming: true,
      bootMode: 'snapshot',
    });
    await resumeRestored(vm, keys, timeoutMs, { deferredState: path.join(template, 'state'), identityPort: true, ...(firstShell ? { firstShell } : {}) });
    return vm;
  }
}

/**
 * A VM launched with -incoming: waits for the state to load and resumes it.
 * identityPort (a template's clone): the identity was written into the port
 * before the resume; waits for the guest's "ok", then for SSH with the new
 * keys. Otherwise (a warm layer's memory): waits for SSH with the keys the
 * saved guest had, then re-keys it over that connection. Any failure kills the
 * VM and rejects. firstShell (with identityPort): the guest starts that shell
 * once it has its identity, and it is handed over before the SSH login; a
 * failure after that rejects with FirstShellLostError (no other boot may
 * follow: the shell the caller holds was this VM's).
 */
export async function resumeRestored(
  vm: QemuVm,
  keys: SandboxKeys,
  timeoutMs: number,
  opts: { deferredState?: string; identityPort?: boolean; firstShell?: FirstShell } = {},
): Promise<void> {
  let port: IdentityChannel | undefined;
  let handedOut = false;
  try {
    const deadline = Date.now() + timeoutMs;
    const qmp = await vm.qmp(deadline);
    vm.mark('qmp');
    if (opts.identityPort) {
      // Written now, read by the guest as soon as it runs: the re-key overlaps the state load.
      port = await IdentityChannel.connect(vm.identitySocket, deadline, () => !vm.hasExited);
      port.send(keys, opts.firstShell);
    }
    if (opts.deferredState) {
      // QEMU 7.2 takes migration capabilities over QMP only, so the load waits for them (-incoming defer).
      await qmp.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
      await qmp.execute('migrate-incoming', { uri: `exec:cat ${shellQuote(opts.deferredState)}` });
    }
    // A stopped source restores paused: wait for the state to load, then resume.
    for (;;) {
      const status = ((await qmp.execute('query-status')) as { status?: string }).status;
      if (status === 'paused' || status === 'postmigrate' || status === 'prelaunch') break;
      if (status === 'running') break;
      if (status !== 'inmigrate') throw new Error(`restored VM is in state ${status}`);
      if (Date.now() > deadline) throw new Error('snapshot state did not load in time');
      // The device state alone loads in tens of ms; a full memory stream in about a second.
      await sleep(10);
    }
    vm.mark('state loaded');
    await qmp.execute('cont');
    vm.mark('cont');
    if (port) {
      await Promise.race([port.reply(Math.max(1000, deadline - Date.now())), vm.exited.then(() => Promise.reject(new Error('QEMU ended before the guest took its identity')))]);
      vm.mark('identity taken');
      if (opts.firstShell) {
        handedOut = true;
        const shell = port.takeConsole();
        opts.firstShell.ready(shell);
        // The guest's CPU goes to the user's shell first: the SSH login (sshd's code, translated for
        // the first time) would compete with its start on the same emulated CPUs.
        await Promise.race([shell.started, sleep(FIRST_SHELL_HEAD_START_MS), vm.exited]);
        vm.mark('first shell started');
      }
      vm.adoptKeys(keys);
      await vm.waitForSsh(Math.max(1000, deadline - Date.now()), timeoutMs);
      return;
    }
    await vm.waitForSsh(Math.max(1000, deadline - Date.now()), timeoutMs);
    await vm.rekey(keys, Math.max(1000, deadline - Date.now()));
    vm.mark('re-keyed');
  } catch (err) {
    port?.close();
    // A state QEMU cannot load makes it exit: its own words say more than the closed connection.
    await Promise.race([vm.exited, sleep(500)]);
    const ended = vm.exitSummary();
    await vm.kill();
    const message = ended ? `${(err as Error).message} (${ended})` : (err as Error).message;
    if (handedOut) throw new FirstShellLostError(`the restored sandbox failed after its first shell opened: ${message}`);
    throw ended ? new Error(message) : err;
  }
}

/** How long the SSH login waits at most for the first shell's first output. */
const FIRST_SHELL_HEAD_START_MS = 1500;

/** A first shell over the identity port (guest-console.ts): its size, and who takes it once the guest has its identity. */
export interface FirstShell {
  cols: number;
  rows: number;
  ready: (shell: TerminalSource) => void;
}

/** A restore failed after its first shell was handed out: the caller's shell is gone with it, so nothing falls back. */
export class FirstShellLostError extends Error {
  override name = 'FirstShellLostError';
}

/** The template's guest RAM file (see the top of this file). */
export function templateRam(templateDir: string): string {
  return path.join(templateDir, 'ram');
}
