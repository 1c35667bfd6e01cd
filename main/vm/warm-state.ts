// A guest's memory saved with its disk at one instant (a warm layer): the
// migration stream, the fw_cfg files the VM was started with (a restore must
// present the same ones) and the SSH keys the guest answered with at that
// instant (to reach it before it is re-keyed). Also the machine key: the
// fields that make a saved memory state usable only by the same machine.
import { createHash } from 'node:crypto';
import { lstat } from 'node:fs/promises';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { MACHINE_DEVICES } from './qemu-args.js';
import { sandboxFiles, type SandboxFiles } from './sandbox-files.js';

/** The machine a memory state belongs to (anything that changes it invalidates the state). */
export interface MachineFields {
  accel: { accel: string; cpu: string };
  memoryMb: number;
  cpus: number;
  image: { kernel: string; initrd: string; disk: string };
  cmdline: string;
}

/**
 * Short hash of QEMU (version, binary) and the machine: a memory state saved
 * with one key loads only where the key is the same (warm layers and the
 * image's snapshot template alike). Bump `v` only for a change of the machine
 * its fields do not show; a change of what the template's guest runs is
 * TEMPLATE_VERSION's, so it never sends a user's warm layers back to cold boots.
 */
export function machineKey(m: MachineFields, qemuVersion: string, qemuBinary: string): string {
  return createHash('sha256')
    .update(
      JSON.stringify({
        // 2: the guest RAM is the named backend ram0, and a template keeps it in a file (device-only state).
        // 5: a TCG guest boots with norandmaps.
        // (3, 4 and 6 were template changes, from before TEMPLATE_VERSION; the number stays so layers saved with 6 still load.)
        v: 6,
        qemu: qemuVersion,
        binary: qemuBinary,
        accel: m.accel.accel,
        cpu: m.accel.cpu,
        memoryMb: m.memoryMb,
        cpus: m.cpus,
        kernel: m.image.kernel,
        initrd: m.image.initrd,
        disk: m.image.disk,
        cmdline: m.cmdline,
        devices: MACHINE_DEVICES,
      }),
    )
    .digest('hex')
    .slice(0, 16);
}

/**
 * What the image's snapshot template runs in its guest before it is saved:
 * 1: perl and a login shell in the page cache, the identity waiter on the
 * identity port, sshd waiting for a host key, the login shell warmed once a
 * clone has its identity (machine key versions 3, 4 and 6 before).
 * 2: the waiter relays a first shell over the identity port when asked
 * (guest-console.ts).
 * 3: the first shell's login environment has node-gyp's header folder, as an SSH login's.
 */
export const TEMPLATE_VERSION = 3;

/** The snapshot template's folder name: its machine (machineKey) and what its guest was made to run. */
export function templateKey(machine: string, version = TEMPLATE_VERSION): string {
  return createHash('sha256').update(JSON.stringify({ machine, template: version })).digest('hex').slice(0, 16);
}

/** A saved memory state: its folder (layout below) and the machine it belongs to. */
export interface WarmMemory {
  dir: string;
  machineKey: string;
  /** A cached layer's, restored by many sandboxes: they map its RAM from one file, made once (warm-ram.ts). */
  shared?: boolean;
}

/** The files of a warm state folder. */
export function warmFiles(dir: string): { state: string; fwCfg: SandboxFiles; guest: SandboxFiles } {
  return { state: path.join(dir, 'state'), fwCfg: sandboxFiles(path.join(dir, 'fwcfg')), guest: sandboxFiles(path.join(dir, 'guest')) };
}

/** Every file of a warm state folder, relative to it. */
export function warmFileList(dir: string): string[] {
  const f = warmFiles(dir);
  return [f.state, f.fwCfg.authorizedKeys, f.fwCfg.hostKey, f.guest.clientKey, f.guest.authorizedKeys, f.guest.hostKey, f.guest.hostPublicKey].map((p) => path.relative(dir, p));
}

/** Why the folder is not a whole warm state (a file missing, not regular, or an empty state), or undefined. */
export async function warmProblem(dir: string): Promise<string | undefined> {
  for (const rel of warmFileList(dir)) {
    const st = await lstat(path.join(dir, rel)).catch(() => undefined);
    if (!st?.isFile()) return `${rel} of the memory state is missing or not a regular file`;
    if (rel === 'state' && st.size === 0) return 'the memory state is empty';
  }
  return undefined;
}

/** The saved guest memories in a sandbox folder (warm-<disk>/state), for the leak check. */
export function sandboxWarmStates(sandboxDir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(sandboxDir);
  } catch {
    // No folder: no saved memory to scan.
    return [];
  }
  return names.filter((n) => /^warm-[A-Za-z0-9._-]+$/.test(n)).map((n) => warmFiles(path.join(sandboxDir, n)).state).filter((f) => existsSync(f));
}
