// The shells a user opens on a task: root's login shell in its sandbox (the
// restored snapshot's first shell when one waits for a taker, first-shells.ts),
// or a shell on this computer in the folder the task came from.
import path from 'node:path';
import type { TerminalInfo } from '../../common/domain.js';
import { GUEST_REPO_DIR } from '../guest/guest-shell.js';
import type { SandboxSshPort } from '../sandbox/sandbox-ports.js';
import { spawnHostShell } from '../terminal/host-shell.js';
import { sshChannelSource } from '../terminal/ssh-channel-source.js';
import type { RegisterSessionOptions } from '../terminal/types.js';
import type { FirstShells } from './first-shells.js';
import { checkHostRepo } from './host-repo.js';

export interface TaskShellsDeps {
  terminals: { register(opts: RegisterSessionOptions): TerminalInfo };
  firstShells: Pick<FirstShells, 'take'>;
  /** The live SSH connection of a task's sandbox; throws NoSandbox without one (TaskService.sandboxSsh). */
  sandboxSsh(taskId: string): SandboxSshPort;
  /** The folder a task came from; throws for an unknown task. */
  repoPath(taskId: string): string;
}

export class TaskShells {
  constructor(private readonly deps: TaskShellsDeps) {}

  /** A login shell (root, for inspection) in the sandbox, starting in the task's repository. */
  async openSandboxShell(taskId: string, size: { cols: number; rows: number }): Promise<TerminalInfo> {
    const first = this.deps.firstShells.take(taskId, size);
    if (first) return first;
    const ssh = this.deps.sandboxSsh(taskId);
    const channel = await ssh.exec(`cd ${GUEST_REPO_DIR} 2>/dev/null; exec bash -l`, { pty: size });
    return this.deps.terminals.register({ taskId, kind: 'shell', title: 'shell', ...size, source: sshChannelSource(channel) });
  }

  /**
   * A shell on this computer as the user, so only on the user's own request and only in the
   * folder the task came from, while that is still its repository.
   */
  async openHostShell(taskId: string, size: { cols: number; rows: number }): Promise<TerminalInfo> {
    const repoPath = this.deps.repoPath(taskId);
    await checkHostRepo(repoPath);
    const { source } = spawnHostShell({ cwd: repoPath, ...size });
    return this.deps.terminals.register({ taskId, kind: 'host', title: `host: ${path.basename(repoPath)}`, ...size, source });
  }
}
