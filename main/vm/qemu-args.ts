// The QEMU command line of a sandbox, as a pure function so it can be checked
// without running anything. What it guarantees: user-mode network with
// restrict=on (the guest reaches nothing but what is forwarded), SSH forwarded
// on 127.0.0.1 only, guest->host paths only as per-connection commands, no
// host folder shared, no display, serial console to a file, QMP for control.
import os from 'node:os';
import type { AccelChoice } from './accel-probe.js';
import { IDENTITY_PORT_NAME } from '../guest/identity-channel.js';

export interface GuestForward {
  /** Address inside the guest network the guest connects to, e.g. 10.0.2.100. */
  guestAddress: string;
  guestPort: number;
  /** Shell command QEMU spawns for each guest connection; its stdin/stdout is the connection. */
  command: string;
}

/**
 * QEMU's name for the sandbox disk: the first if=virtio drive without an id is
 * "virtio0". Left implicit on the command line so saved snapshots stay valid.
 */
export const DISK_DRIVE_ID = 'virtio0';

/**
 * Where the guest's RAM lives. Always a named backend ("ram0"), so a memory
 * state saved by one kind of VM restores into another: anonymous memory, or a
 * file mapped shared (a template writes its RAM there) or private (a clone
 * reads the template's pages and keeps its own writes).
 */
export type GuestMemory = { kind: 'ram' } | { kind: 'file'; path: string; shared: boolean };

/** QEMU's id of the guest RAM backend, and so the RAM block's name in a saved state. */
export const GUEST_RAM_ID = 'ram0';

/**
 * Every -device of the command line, in order. They are all in the machine key
 * (warm-state.ts): a memory state saved with other devices does not load.
 */
export const MACHINE_DEVICES: readonly string[] = [
  'virtio-net-pci,netdev=net0',
  'virtio-rng-pci',
  // The identity port (see IDENTITY_PORT_NAME): its chardev is the host's side.
  'virtio-serial-pci,id=vser0',
  `virtserialport,bus=vser0.0,chardev=identity0,name=${IDENTITY_PORT_NAME}`,
];

/**
 * No balloon: its free page reporting would be the way to give back what a
 * guest freed, but see below; clones share the template's pages instead.
 * Why these QEMU arguments must not run, or undefined. QEMU 7.2 gives back a
 * discarded page of file-backed guest RAM by punching a hole in the file, even
 * when the file is mapped privately (share=off): free page reporting in a clone
 * that maps a snapshot's RAM file would zero that file under every other clone
 * (seen here: a 1 GiB RAM file was down to 128 MiB allocated after one boot).
 */
export function discardProblem(args: readonly string[]): string | undefined {
  if (!args.some((a) => a.startsWith('virtio-balloon') && /(^|,)free-page-reporting=on(,|$)/.test(a))) return undefined;
  for (let i = 0; i < args.length - 1; i++) {
    const value = args[i + 1]!;
    const privateFile = args[i] === '-object' && value.startsWith('memory-backend-file,') && !/(^|[^,]),share=on(,|$)/.test(value);
    if (privateFile || args[i] === '-mem-path') {
      return 'free page reporting (virtio-balloon) with guest RAM mapped privately from a file: QEMU would punch holes in that file';
    }
  }
  return undefined;
}

/**
 * Size of QEMU's translation cache under software emulation, MiB. Left to
 * QEMU it grows with every program the guest runs: 60-70 MiB idle, 316 MiB
 * after a few tools ran (over half of that sandbox's memory). Measured here:
 * the agent CLIs (claude, codex --version three times) took 5.0-5.3 s with
 * 128 MiB as without a cap (4.8-5.4 s), but 6.7-8.8 s with 64 and 9-12 s with 32.
 */
export const TCG_CACHE_MB = 128;

/**
 * How TCG runs a sandbox's vCPUs: one host thread each (multi) only when each has
 * a core of its own while two sandboxes run (the default two tasks at once). With
 * fewer cores the vCPU threads of the running sandboxes take turns, and a guest CPU
 * that waits on another (an IPI, a TLB shootdown) spins while that one is not
 * running. On 2 cores, two 2-vCPU sandboxes doing the same guest work took 0.74x
 * the time and 0.75x the CPU with one thread each; a sandbox alone the same time
 * with 0.91x the CPU (test/bench/tcg-threads.bench.ts). The guest keeps its vCPUs.
 */
export type TcgThreads = 'multi' | 'single';

export function tcgThreads(cpus: number, hostCores = os.availableParallelism()): TcgThreads {
  return cpus > 1 && hostCores >= 2 * cpus ? 'multi' : 'single';
}

/**
 * The kernel command line a guest boots with. Under emulation (TCG) it adds
 * `norandmaps`: QEMU 7.2 finds code it has already translated by the guest's
 * virtual address, so with address randomisation every process start translates
 * ld.so, libc and the program anew; at fixed addresses a second start of the
 * same program reuses them (test/bench/process-start.bench.ts: a login shell,
 * coreutils or git 3-4x faster). The guest is the untrusted side: randomisation
 * there guards its own processes, nothing of the host. KVM translates nothing.
 */
export function guestKernelCmdline(cmdline: string, emulated: boolean): string {
  return emulated && !/(^|\s)norandmaps(\s|$)/.test(cmdline) ? `${cmdline} norandmaps` : cmdline;
}

export interface QemuLaunchSpec {
  /** Guest name (QMP, ps); with pidFile it identifies the sandbox's process (see sandbox-files.ts). */
  name: string;
  accel: AccelChoice;
  /** Under TCG: one host thread per vCPU or one for all (tcgThreads). */
  tcgThreads: TcgThreads;
  memoryMb: number;
  /** Anonymous RAM when not given. */
  memory?: GuestMemory;
  cpus: number;
  kernel: string;
  initrd: string;
  cmdline: string;
  overlay: string;
  sshPort: number;
  guestForwards: GuestForward[];
  serialLog: string;
  qmpSocket: string;
  /** The unix socket QEMU listens on for the host's side of the identity port. */
  identitySocket: string;
  pidFile: string;
  /** Files handed to the guest through fw_cfg, named opt/factory/<name>. */
  fwCfg: Array<{ name: string; file: string }>;
}

/** QEMU option values are comma-separated; a literal comma is written twice. */
export function escapeOptionValue(value: string): string {
  return value.replace(/,/g, ',,');
}

const RESERVED_GUEST_ADDRESSES = new Set(['10.0.2.2', '10.0.2.3', '10.0.2.15']);

export function validateGuestForward(fwd: GuestForward): void {
  const m = /^10\.0\.2\.(\d{1,3})$/.exec(fwd.guestAddress);
  if (!m || Number(m[1]) < 1 || Number(m[1]) > 254) {
    throw new Error(`guest forward address ${JSON.stringify(fwd.guestAddress)} must be in the guest network 10.0.2.1-254`);
  }
  if (RESERVED_GUEST_ADDRESSES.has(fwd.guestAddress)) {
    throw new Error(`guest forward address ${fwd.guestAddress} is taken by QEMU's gateway, DNS or the guest itself`);
  }
  if (!Number.isInteger(fwd.guestPort) || fwd.guestPort < 1 || fwd.guestPort > 65535) {
    throw new Error(`guest forward port ${fwd.guestPort} is not a TCP port`);
  }
  if (!fwd.command.trim() || /[\0\n\r]/.test(fwd.command)) {
    throw new Error('guest forward command must be one non-empty line');
  }
}

/**
 * The sandbox's user-mode network, as a -netdev value: restrict=on (the guest
 * reaches nothing but what is forwarded), SSH forwarded on 127.0.0.1 only, and
 * each guest forward as a per-connection command. Local and remote VMs both use it.
 */
export function userNetdev(id: string, sshPort: number, guestForwards: readonly GuestForward[]): string {
  for (const fwd of guestForwards) validateGuestForward(fwd);
  if (!Number.isInteger(sshPort) || sshPort < 1 || sshPort > 65535) throw new Error(`bad SSH port ${sshPort}`);
  return [
    'user',
    `id=${id}`,
    'restrict=on',
    `hostfwd=tcp:127.0.0.1:${sshPort}-:22`,
    ...guestForwards.map((f) => `guestfwd=tcp:${f.guestAddress}:${f.guestPort}-cmd:${escapeOptionValue(f.command)}`),
  ].join(',');
}

export function buildQemuArgs(spec: QemuLaunchSpec): string[] {
  const e = escapeOptionValue;
  const netdev = userNetdev('net0', spec.sshPort, spec.guestForwards);

  if (!/^[A-Za-z0-9._-]{1,80}$/.test(spec.name)) throw new Error(`bad guest name ${JSON.stringify(spec.name)}`);
  const accel = spec.accel.accel === 'tcg' ? `tcg,thread=${spec.tcgThreads},tb-size=${TCG_CACHE_MB}` : spec.accel.accel;
  if (!Number.isInteger(spec.memoryMb) || spec.memoryMb < 64 || spec.memoryMb > 1_048_576) throw new Error(`bad guest memory size ${spec.memoryMb} MiB`);
  const memory = spec.memory ?? { kind: 'ram' };
  if (memory.kind === 'file' && !memory.path.startsWith('/')) throw new Error(`the guest memory file ${JSON.stringify(memory.path)} is not an absolute path`);
  const ramObject =
    memory.kind === 'ram'
      ? `memory-backend-ram,id=${GUEST_RAM_ID},size=${spec.memoryMb}M`
      : `memory-backend-file,id=${GUEST_RAM_ID},size=${spec.memoryMb}M,mem-path=${e(memory.path)},share=${memory.shared ? 'on' : 'off'}`;

  const args = [
    // First, so a crash cleanup finds them right after the program name.
    '-name', spec.name,
    '-pidfile', spec.pidFile,
    '-nodefaults',
    '-no-user-config',
    '-display', 'none',
    '-no-reboot',
    '-machine', `pc,memory-backend=${GUEST_RAM_ID}`,
    '-object', ramObject,
    '-accel', accel,
    '-cpu', spec.accel.cpu,
    '-smp', String(spec.cpus),
    '-m', String(spec.memoryMb),
    '-kernel', spec.kernel,
    '-initrd', spec.initrd,
    '-append', guestKernelCmdline(spec.cmdline, spec.accel.accel === 'tcg'),
    '-drive', `file=${e(spec.overlay)},if=virtio,format=qcow2,discard=unmap`,
    '-netdev', netdev,
    ...MACHINE_DEVICES.flatMap((d) => ['-device', d]),
    '-chardev', `file,id=serial0,path=${e(spec.serialLog)}`,
    '-serial', 'chardev:serial0',
    '-chardev', `socket,id=qmp0,path=${e(spec.qmpSocket)},server=on,wait=off`,
    '-mon', 'chardev=qmp0,mode=control',
    '-chardev', `socket,id=identity0,path=${e(spec.identitySocket)},server=on,wait=off`,
    ...spec.fwCfg.flatMap((f) => {
      if (!/^[a-z0-9_.-]+$/.test(f.name)) throw new Error(`bad fw_cfg name ${JSON.stringify(f.name)}`);
      return ['-fw_cfg', `name=opt/factory/${f.name},file=${e(f.file)}`];
    }),
  ];
  const problem = discardProblem(args);
  if (problem) throw new Error(problem);
  return args;
}
