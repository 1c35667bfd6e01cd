// Fast starts: a booted guest's memory and disk, saved once per machine
// configuration (the template), restored into each new sandbox with QEMU's
// -incoming; the guest agent then gives the clone its own keys and the time.
// A template that fails to restore is thrown away; the driver then boots cold.
import { copyFile, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { generateSandboxKeys, type SandboxKeys } from '../ssh/sandbox-keys.js';
import type { QemuVm, LaunchContext } from './qemu-vm.js';
import { sleep } from './qemu-vm.js';
import { qmpSocketFor, readKeys, sandboxFiles, writeKeys, type SandboxFiles } from './sandbox-files.js';
import type { SnapshotStore } from './snapshot-store.js';
import { shellQuote } from '../../common/shell-quote.js';
import { machineKey } from './warm-state.js';

/** What snapshot boot needs of the driver: starting QEMU processes. */
export interface QemuLauncher {
  readonly qemuBinary: string;
  launch(ctx: LaunchContext, keys: SandboxKeys, how: { fwCfgFiles: SandboxFiles; incomingState?: string; bootMode: 'cold' | 'snapshot' }): Promise<QemuVm>;
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
  async start(ctx: LaunchContext, keys: SandboxKeys, qemuVersion: string, timeoutMs: number): Promise<QemuVm> {
    const { key, dir } = await this.template(ctx, qemuVersion);
    try {
      return await this.restoreClone(ctx, dir, keys, timeoutMs);
    } catch (err) {
      // Best effort: if it cannot be removed, the next start fails the same way and falls back again.
      await this.store.discard(key).catch(() => {});
      throw err;
    }
  }

  private async template(ctx: LaunchContext, qemuVersion: string): Promise<{ key: string; dir: string }> {
    const key = this.keyFor(ctx, qemuVersion);
    const dir = await this.store.ensure(key, (tmp) => this.bootTemplate(ctx, tmp), { baseDisk: path.resolve(ctx.image.disk) });
    return { key, dir };
  }

  private keyFor(ctx: LaunchContext, qemuVersion: string): string {
    // Anything that changes the machine or the guest's memory invalidates a snapshot.
    return machineKey(ctx, qemuVersion, this.launcher.qemuBinary);
  }

  /** Boots a template VM in dir, lets it settle, and saves its memory and disk there. */
  private async bootTemplate(ctx: LaunchContext, dir: string): Promise<void> {
    const files = sandboxFiles(dir);
    await mkdir(files.keysDir, { recursive: true, mode: 0o700 });
    const keys = generateSandboxKeys('factory-template');
    await writeKeys(files, keys);
    await this.launcher.createOverlay(ctx.image.disk, files.overlay);
    // No guest forwards in the template: the clone's command line adds its own.
    const templateCtx: LaunchContext = { ...ctx, files, sandboxDir: dir, guestForwards: [], qmpSocket: qmpSocketFor(files) };
    const vm = await this.launcher.coldBoot(templateCtx, keys, 180_000, 180_000);
    try {
      const ssh = await vm.ssh();
      // Less memory to save and restore; nothing in flight on the disk.
      await ssh.run('sync; echo 3 > /proc/sys/vm/drop_caches', { timeoutMs: 60_000 });
      ssh.close();
      await sleep(300);
      const qmp = await vm.qmp();
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
      await vm.stop();
    }
    await rm(templateCtx.qmpSocket, { force: true });
    await rm(files.pidFile, { force: true });
  }

  /** Starts a sandbox from a template's saved state, then gives it its own SSH keys and the current time. */
  private async restoreClone(ctx: LaunchContext, template: string, keys: SandboxKeys, timeoutMs: number): Promise<QemuVm> {
    const templateFiles = sandboxFiles(template);
    const templateKeys = await readKeys(templateFiles);
    await copyFile(templateFiles.overlay, ctx.files.overlay);
    const vm = await this.launcher.launch(ctx, templateKeys, {
      fwCfgFiles: templateFiles,
      incomingState: path.join(template, 'state'),
      bootMode: 'snapshot',
    });
    await resumeRestored(vm, keys, timeoutMs);
    return vm;
  }
}

/**
 * A VM launched with -incoming: waits for the state to load, resumes it, waits
 * for SSH with the keys the saved guest had, then gives it keys (and the
 * clock). Any failure kills the VM and rejects.
 */
export async function resumeRestored(vm: QemuVm, keys: SandboxKeys, timeoutMs: number): Promise<void> {
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
  } catch (err) {
    // A state QEMU cannot load makes it exit: its own words say more than the closed connection.
    await Promise.race([vm.exited, sleep(500)]);
    const ended = vm.exitSummary();
    await vm.kill();
    throw ended ? new Error(`${(err as Error).message} (${ended})`) : err;
  }
}
