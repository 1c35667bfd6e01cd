// What the host agent tests (Claude Code and Codex run on this machine, not in a
// VM) need in place of a sandbox: the agent user's command line, a GuestSsh that
// runs locally, and runInSandbox running a stage's script as that user in the
// repository, with output streamed as the guest's would be.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { StageName, Task } from '../../common/domain.js';
import { shellWord } from '../../common/shell-quote.js';
import type { GuestRunResult, GuestSsh, StageRunContext } from '../../main/pipeline/stage-executor.js';

/** The agent user's command line, as asAgent is in the guest: a clean environment with its own HOME (as is, without a user). */
export function hostAsUser(user: string | undefined, home: string): (script: string) => string {
  return (script) => (user ? `runuser -u ${user} -- env -i HOME=${home} PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 bash -c ${shellWord(script)}` : script);
}

/** Runs a command locally, like SandboxSsh.run would in the guest. */
export const localSsh: GuestSsh = {
  async run(command, opts) {
    return new Promise((resolve) => {
      const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout = (stdout + d.toString()).slice(-(opts?.maxBytes ?? 1 << 20))));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  },
  exec: () => Promise.reject(new Error('not used')),
  putFile: () => Promise.reject(new Error('not used')),
  getFile: () => Promise.reject(new Error('not used')),
};

/** A stage's runInSandbox on this machine: each script in its own file under `root`, run as the agent user in `repo`. */
export function hostRunInSandbox(opts: { root: string; repo: string; task: Task; stage: StageName; asUser: (script: string) => string }): StageRunContext['runInSandbox'] {
  const { root, repo, task, stage, asUser } = opts;
  let n = 0;
  return async (script, runOpts = {}): Promise<GuestRunResult> => {
    const file = path.join(root, `${task.id}-${stage}-${++n}.sh`);
    fs.writeFileSync(file, `export FACTORY_BASE_REF=main FACTORY_BASE_COMMIT=${task.baseCommit} FACTORY_BRANCH=${task.branch}\ncd ${repo} || exit 97\n${script}\n`, { mode: 0o644 });
    const started = Date.now();
    const child = spawn('bash', ['-c', asUser(`bash ${file}`)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString('utf8');
      runOpts.onOutput?.(d);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    return { code, sessionId: `s-${stage}-${n}`, timedOut: false, cancelled: false, lost: false, durationMs: Date.now() - started, tail: (b) => out.slice(-b) };
  };
}

export interface HostStageFolders {
  root: string;
  repo: string;
  home: string;
  artifacts: string;
}

/**
 * A new temp folder holding the repository, the agent user's home, and the
 * scratch files' folder outside the repository, writable by the agent user (as
 * the runner makes it in the guest).
 */
export function hostStageFolders(prefix: string): HostStageFolders {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(root, 0o755);
  const folders = { root, repo: path.join(root, 'repo'), home: path.join(root, 'home'), artifacts: path.join(root, 'artifacts') };
  fs.mkdirSync(folders.repo);
  fs.mkdirSync(folders.home);
  fs.mkdirSync(folders.artifacts);
  fs.chmodSync(folders.artifacts, 0o777);
  return folders;
}

/** Gives the agent user a git identity in its home and, when there is such a user, the repository and home. */
export function handToAgentUser(folders: HostStageFolders, user: string | undefined): void {
  fs.writeFileSync(path.join(folders.home, '.gitconfig'), '[user]\n\tname = agent\n\temail = agent@sandbox\n[safe]\n\tdirectory = *\n');
  if (user) execFileSync('chown', ['-R', user, folders.repo, folders.home]);
}
