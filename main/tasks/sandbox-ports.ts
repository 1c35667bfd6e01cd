// What the task service needs from the VM layer, as narrow interfaces: the real
// ImageStore / QemuDriver / RunningVm / SandboxSsh satisfy them structurally.
import type { ClientChannel } from 'ssh2';
import type { ImageStatus } from '../../common/domain.js';
import type { GuestSsh } from '../pipeline/stage-executor.js';

export interface SandboxSshPort extends GuestSsh {
  shell(opts: { cols: number; rows: number }): Promise<ClientChannel>;
  close(): void;
}

export interface RunningVmPort {
  pid: number;
  accel: string;
  sshPort: number;
  bootMs: number;
  sandboxDir: string;
  ssh(): Promise<SandboxSshPort>;
  stop(): Promise<void>;
  destroy(): Promise<void>;
  serialTail(lines: number): string;
  exited: Promise<void>;
}

export interface ImageStorePort<Image> {
  status(): ImageStatus;
  ensure(onProgress?: (s: ImageStatus) => void): Promise<Image>;
}

export interface QemuDriverPort<Image> {
  checkInstalled(): Promise<{ ok: boolean; version?: string; installHint?: string }>;
  start(opts: { sandboxDir: string; image: Image; memoryMb?: number; cpus?: number; bootTimeoutMs?: number }): Promise<RunningVmPort>;
}
