// One stage of the real agent executor with a local bash standing in for the
// sandbox (no VM in a unit test): the guest's SSH runs commands here, and the
// stage's scripts run in the given repository with their output fed to the
// agent's parser, as the stage runner does.
import { spawn } from 'node:child_process';
import type { StageName, Task } from '../../../../common/domain.js';
import type { AgentStageExecutor } from '../../../../main/pipeline/agents/agent-executor.js';
import type { PipelineConfig } from '../../../../main/pipeline/config.js';
import type { GuestRunResult, GuestSsh, StageOutcome } from '../../../../main/pipeline/stage-executor.js';

export function sh(command: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export const localSsh: GuestSsh = {
  run: (command) => sh(command),
  exec: () => Promise.reject(new Error('not used')),
  putFile: () => Promise.reject(new Error('not used')),
  getFile: () => Promise.reject(new Error('not used')),
};

/** Runs `stage` of `executor` on the repository at `repo`. */
export function runLocalStage(executor: AgentStageExecutor, stage: StageName, config: PipelineConfig, repo: string): Promise<StageOutcome> {
  const task: Task = {
    id: 't1', title: 'Add a flag', repoPath: repo, baseRef: 'main', baseCommit: 'not-a-commit', branch: 'factory/t1',
    createdAt: new Date().toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
  };
  return executor.runStage({
    task, stage, config, stageConfig: config.stages[stage], signal: new AbortController().signal, ssh: localSsh,
    async runInSandbox(script, opts = {}): Promise<GuestRunResult> {
      const r = await sh(`cd ${JSON.stringify(repo)} || exit 97\n${script}`);
      const out = r.stdout + r.stderr;
      opts.onOutput?.(Buffer.from(out));
      return { code: r.code, sessionId: 's', timedOut: false, cancelled: false, lost: false, durationMs: 1, tail: (b) => out.slice(-b) };
    },
  });
}
