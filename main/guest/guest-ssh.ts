// What the host needs of an SSH connection to a sandbox: the pipeline runs
// stages through it, the pull-back exports the result through it, the task
// service seeds the repository through it. SandboxSsh (main/ssh/) implements it.
import type { ClientChannel } from 'ssh2';

/** The parts of SandboxSsh the pipeline, the pull-back and the seed use. */
export interface GuestSsh {
  exec(command: string, opts?: { pty?: { cols: number; rows: number }; env?: Record<string, string> }): Promise<ClientChannel>;
  run(command: string, opts?: { maxBytes?: number; timeoutMs?: number }): Promise<{ code: number | null; stdout: string; stderr: string }>;
  putFile(localPath: string, remotePath: string): Promise<void>;
  getFile(remotePath: string, localPath: string, opts: { maxBytes: number }): Promise<number>;
}

