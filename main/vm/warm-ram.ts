// A cached layer's memory in the template's form (issue 32): its RAM in a file
// (`ram`) and its devices alone (`devices`, saved with x-ignore-shared), made
// once from the layer's full memory stream (`state`). Every sandbox restored from
// the layer then maps that file privately, as clones map the template's: the
// pages it only reads stay in the host's page cache once, shared by all of them,
// and only what each one writes is its own. Restored from the stream instead,
// each sandbox held a private copy of all of the layer's memory (six ways of one
// preparation cost more than six independent tasks).
//
// The conversion starts a QEMU that loads the stream into a shared RAM file and
// saves its devices; its guest never runs (the stream was saved paused, so the
// load ends paused), and it is killed at once. The stream stays: it is what the
// leak check scans, what a layer export carries, and the fallback when the
// derived files are missing or do not restore.
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { shellQuote } from '../../common/shell-quote.js';
import type { SandboxKeys } from '../ssh/sandbox-keys.js';
import type { LaunchContext, QemuVm } from './qemu-vm.js';
import { sleep } from './qemu-vm.js';
import { killLeftoverQemu } from './leftover-qemu.js';
import { identitySocketFor, qmpSocketFor, sandboxFiles } from './sandbox-files.js';
import type { QemuLauncher } from './snapshot-boot.js';
import { warmFiles } from './warm-state.js';

/** The derived files of a warm state folder. */
export function warmRamFiles(dir: string): { ram: string; devices: string } {
  return { ram: path.join(dir, 'ram'), devices: path.join(dir, 'devices') };
}

/** Whether the folder holds the shared form whole (devices is renamed in last, so its presence means ram is whole). */
export async function hasWarmRam(dir: string): Promise<boolean> {
  const f = warmRamFiles(dir);
  // A file that cannot be read is one not made (yet): the stream is used until it is.
  const [ram, devices] = await Promise.all([lstat(f.ram).catch(() => undefined), lstat(f.devices).catch(() => undefined)]);
  return Boolean(ram?.isFile() && devices?.isFile() && devices.size > 0);
}

/** Removes the derived files (after they failed to restore: the next restore makes them anew or uses the stream). */
export async function dropWarmRam(dir: string): Promise<void> {
  const f = warmRamFiles(dir);
  await rm(f.devices, { force: true });
  await rm(f.ram, { force: true });
}

/**
 * Makes `ram` and `devices` in the warm folder from its stream. ctx is the
 * machine the layer's sandboxes run (same size and devices); layerDisk the
 * layer's frozen disk, which the loader opens through an overlay of its own and
 * never writes. Rejects with the reason (nothing left behind) when it cannot.
 */
export async function makeWarmRam(
  launcher: Pick<QemuLauncher, 'launch' | 'createOverlay'>,
  ctx: LaunchContext,
  warmDir: string,
  layerDisk: string,
  savedKeys: SandboxKeys,
  timeoutMs: number,
): Promise<void> {
  const saved = warmFiles(warmDir);
  const out = warmRamFiles(warmDir);
  const tag = randomBytes(4).toString('hex');
  const work = path.join(warmDir, `ram-loader-${tag}`);
  const ramTmp = `${out.ram}.${tag}.tmp`;
  const devicesTmp = `${out.devices}.${tag}.tmp`;
  let vm: QemuVm | undefined;
  try {
    // What a conversion cut short by a crash left (one runs at a time per folder: the driver's map):
    // its loader QEMU too, paused and holding the layer's memory, if the app was killed outright.
    for (const name of await readdir(warmDir)) {
      if (!/^ram-loader-[0-9a-f]{8}$|^(ram|devices)\.[0-9a-f]{8}\.tmp$/.test(name)) continue;
      if (name.startsWith('ram-loader-')) await killLeftoverQemu(path.join(warmDir, name));
      await rm(path.join(warmDir, name), { recursive: true, force: true });
    }
    await mkdir(work, { recursive: true, mode: 0o700 });
    const files = sandboxFiles(work);
    // Guest memory may hold anything of the guest: owner-only before QEMU sizes it (sparse).
    await writeFile(ramTmp, '', { mode: 0o600 });
    await launcher.createOverlay(layerDisk, files.overlay);
    const loaderCtx: LaunchContext = {
      ...ctx,
      files,
      sandboxDir: work,
      guestForwards: [],
      qmpSocket: qmpSocketFor(files),
      identitySocket: identitySocketFor(files),
      memory: { kind: 'file', path: ramTmp, shared: true },
    };
    vm = await launcher.launch(loaderCtx, savedKeys, { fwCfgFiles: saved.fwCfg, incomingState: saved.state, bootMode: 'snapshot' });
    const deadline = Date.now() + timeoutMs;
    const qmp = await vm.qmp(deadline);
    for (;;) {
      const status = ((await qmp.execute('query-status')) as { status?: string }).status;
      // The guest must not run here: a stream saved running would start it, so it is stopped at once.
      if (status === 'running') await qmp.execute('stop');
      if (status === 'paused' || status === 'postmigrate' || status === 'prelaunch' || status === 'running') break;
      if (status !== 'inmigrate') throw new Error(`the memory loader is in state ${status}`);
      if (Date.now() > deadline) throw new Error('the memory stream did not load in time');
      await sleep(20);
    }
    // The RAM is in the file now; the devices alone go to their own state.
    await qmp.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
    await qmp.execute('migrate', { uri: `exec:cat > ${shellQuote(devicesTmp)}` });
    for (;;) {
      const info = (await qmp.execute('query-migrate')) as { status?: string; 'error-desc'?: string };
      if (info.status === 'completed') break;
      if (info.status === 'failed' || info.status === 'cancelled') throw new Error(`saving the devices failed (${info.status}): ${info['error-desc'] ?? ''}`);
      if (Date.now() > deadline) throw new Error('saving the devices did not complete in time');
      await sleep(20);
    }
    await vm.kill();
    vm = undefined;
    // ram first, devices last: hasWarmRam() trusts the pair once devices is there.
    await rename(ramTmp, out.ram);
    await rename(devicesTmp, out.devices);
  } catch (err) {
    const ended = vm?.exitSummary();
    throw new Error(`the layer's memory could not be made shareable: ${(err as Error).message}${ended ? ` (${ended})` : ''}`);
  } finally {
    await vm?.kill();
    await rm(work, { recursive: true, force: true });
    await rm(ramTmp, { force: true });
    await rm(devicesTmp, { force: true });
  }
}
