// The sandboxes of this app run, by task id. The provisioner writes here; the
// parts that serve a running sandbox (agent executors for its environment, the
// credential broker for its QMP and git route, shells) read here. It is built
// first in the composition root, so none of them needs the task service.
import type { Task } from '../../common/domain.js';
import type { QmpPort, RunningVmPort, SandboxExtension, SandboxSshPort } from './sandbox-ports.js';

export interface LiveSandbox {
  readonly taskId: string;
  /** What extensions may need of the task the sandbox serves (its repository, push permission). */
  readonly task: Pick<Task, 'id' | 'repoPath' | 'allowPush' | 'host'>;
  /** Its folder; a VM taken from the warm pool brings its own (main/pool). */
  sandboxDir: string;
  /** Guest memory of its VM, from boot until it is closed (the warm pool's budget counts it). */
  memoryMb?: number;
  /** Removes what the warm pool made for it outside its folder; run once its VM has ended. */
  poolCleanup?: () => Promise<void>;
  /** A pooled VM's SSH connection (and what the pool did in its guest), until the first connect takes it. */
  pooledGuest?: PooledGuest;
  /** Environment from the sandbox extensions for every guest command (placeholders only). */
  readonly guestEnv: Record<string, string>;
  /** Extensions prepared for this sandbox, released when its VM is gone. */
  readonly extensions: SandboxExtension[];
  vm?: RunningVmPort;
  ssh?: SandboxSshPort;
  /** The repository is cloned in the guest (a retry in place needs it). */
  seeded: boolean;
  /** Set when we end the VM ourselves, so its exit is not taken for a crash. */
  tearingDown: boolean;
}

/** What the warm pool did in a waiting guest: its open SSH connection, and the host certificates' env once written. */
export interface PooledGuest {
  ssh: SandboxSshPort;
  /** Set when the host's certificates were written in the guest ({} on a host without a bundle). */
  certificates?: Record<string, string>;
}

export class LiveSandboxes {
  private readonly byTask = new Map<string, LiveSandbox>();

  open(task: LiveSandbox['task'], sandboxDir: string): LiveSandbox {
    const sandbox: LiveSandbox = { taskId: task.id, task: { ...task }, sandboxDir, guestEnv: {}, extensions: [], seeded: false, tearingDown: false };
    this.byTask.set(task.id, sandbox);
    return sandbox;
  }

  /** Forgets a sandbox, unless a newer one already took its task's place. */
  close(sandbox: LiveSandbox): void {
    if (this.byTask.get(sandbox.taskId) === sandbox) this.byTask.delete(sandbox.taskId);
  }

  get(taskId: string): LiveSandbox | undefined {
    return this.byTask.get(taskId);
  }

  task(taskId: string): LiveSandbox['task'] | undefined {
    return this.byTask.get(taskId)?.task;
  }

  guestEnv(taskId: string): Record<string, string> {
    return { ...(this.byTask.get(taskId)?.guestEnv ?? {}) };
  }

  /** The QMP client of a task's running VM (e.g. for a leak check's memory dump), if the driver offers one. */
  qmpFor(taskId: string): (() => Promise<QmpPort>) | undefined {
    const vm = this.qemuVm(taskId);
    return vm ? () => vm.qmp!() : undefined;
  }

  /** The process id of a task's QEMU on this machine (a VM with a QMP client), for reading its memory. */
  qemuPidFor(taskId: string): number | undefined {
    const vm = this.qemuVm(taskId);
    return vm && vm.pid > 0 ? vm.pid : undefined;
  }

  /** A task's VM if it is a QEMU this app drives over QMP (not a remote one). */
  private qemuVm(taskId: string): LiveSandbox['vm'] | undefined {
    const vm = this.byTask.get(taskId)?.vm;
    return vm && typeof vm.qmp === 'function' ? vm : undefined;
  }

  /** Guest memory of the sandboxes booting or running now. */
  memoryMb(): number {
    let sum = 0;
    for (const sb of this.byTask.values()) sum += sb.memoryMb ?? 0;
    return sum;
  }

  ssh(taskId: string): SandboxSshPort | undefined {
    return this.byTask.get(taskId)?.ssh;
  }
}
