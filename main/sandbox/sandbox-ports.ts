// What the task service needs from the VM layer, as narrow interfaces: the real
// ImageStore / QemuDriver / RunningVm / SandboxSsh satisfy them structurally.
import type { ClientChannel } from 'ssh2';
import type { ImageStatus } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import type { GuestSsh } from '../guest/guest-ssh.js';
import type { TerminalSource } from '../terminal/types.js';

export interface SandboxSshPort extends GuestSsh {
  shell(opts: { cols: number; rows: number }): Promise<ClientChannel>;
  close(): void;
}

/** A QMP connection of a running VM (one client per socket: use the VM's own). */
export interface QmpPort {
  execute(command: string, args?: Record<string, unknown>): Promise<unknown>;
}

export interface RunningVmPort {
  pid: number;
  accel: string;
  sshPort: number;
  bootMs: number;
  /** Why it booted cold although a saved memory was there to restore. */
  coldBootReason?: string | undefined;
  sandboxDir: string;
  /** The sandbox host it runs on (issue 14); absent for this machine. */
  host?: string;
  ssh(): Promise<SandboxSshPort>;
  stop(): Promise<void>;
  destroy(): Promise<void>;
  serialTail(lines: number): string;
  exited: Promise<void>;
  /** The VM's own QMP client, where the driver offers it. */
  qmp?(): Promise<QmpPort>;
  /**
   * The disk written so far becomes a read-only file; further writes go to a new overlay. Run `sync` in the guest
   * first. With memory (drop the guest's caches first), its memory of the same instant too, when it can be saved.
   */
  freezeDisk?(opts?: { memory?: boolean }): Promise<{ disk: string; memory?: WarmMemoryPort; memoryError?: string }>;
}

/** A guest memory state saved with a frozen disk: its folder and the machine it belongs to. */
export interface WarmMemoryPort {
  dir: string;
  machineKey: string;
}

export interface ImageStorePort<Image> {
  status(): ImageStatus;
  ensure(onProgress?: (s: ImageStatus) => void): Promise<Image>;
}

export interface GuestForwardSpec {
  guestAddress: string;
  guestPort: number;
  /** Command QEMU spawns per guest connection (stdin/stdout = the connection). */
  command: string;
}

export interface QemuDriverPort<Image> {
  checkInstalled(): Promise<{ ok: boolean; version?: string; installHint?: string }>;
  start(opts: {
    sandboxDir: string;
    image: Image;
    memoryMb?: number;
    cpus?: number;
    bootTimeoutMs?: number;
    guestForwards?: GuestForwardSpec[];
    /** A layer's disk to boot on instead of the bare base image. */
    backingDisk?: string;
    /** The layer's memory state: restored when it fits this machine, else the boot on the layer is cold. */
    warm?: WarmMemoryPort;
    /** A restore of the image's snapshot hands this root login shell to ready() before its SSH login (qemu-driver.ts). */
    firstShell?: FirstShellRequest;
  }): Promise<RunningVmPort>;
  /** Puts a layer's saved memory in the form its starts share (made by the first start otherwise). */
  shareLayerMemory?(opts: { image: Image; memoryMb?: number; cpus?: number; backingDisk: string; warm: WarmMemoryPort }): Promise<void>;
}

export interface FirstShellRequest {
  cols: number;
  rows: number;
  ready: (shell: TerminalSource) => void;
}

/**
 * Something that lives as long as a sandbox, e.g. the per-sandbox credential
 * proxy (issue 3): it may add QEMU guest forwards and environment for every
 * guest command before the VM starts, and is released when the VM is gone.
 */
export interface SandboxExtension {
  readonly name: string;
  /**
   * `egress`: the destinations this sandbox starts with (the credential proxy's egress rules). `socketPath`: for a
   * VM from the warm pool, started before its task: the proxy socket its guest forward already points at.
   */
  prepare(ctx: { taskId: string; sandboxDir: string; egress?: EgressRule[]; socketPath?: string }): Promise<{ guestForwards?: GuestForwardSpec[]; guestEnv?: Record<string, string> }>;
  /** Called while the VM still runs, just before it is destroyed (e.g. a leak check of disk and memory); must not throw. */
  beforeDestroy?(ctx: { taskId: string; sandboxDir: string; qmp?: () => Promise<QmpPort>; qemuPid?: number }): Promise<unknown>;
  /** Called once after the VM ended (destroy, crash, app shutdown); must not throw. */
  release(ctx: { taskId: string }): Promise<void>;
}
