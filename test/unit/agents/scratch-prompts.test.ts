// What the plan and review stages tell the agent about their scratch files:
// by default the files go to the artifacts folder outside the repository and
// the agent is told not to git add them; with `commitScratchFiles` the files
// go in the repository and the agent is told to add them. The "agent" is a
// real local program (bash) that saves the prompt it got on stdin and writes
// the file the prompt names; the stages run through the real executor with a
// local shell in place of the sandbox's (no VM in a unit test).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StageName, Task } from '../../../common/domain.js';
import { AgentStageExecutor } from '../../../main/pipeline/agents/agent-executor.js';
import { CustomCommandAdapter } from '../../../main/pipeline/agents/custom-command.js';
import { defaultPipelineConfig, type PipelineConfig } from '../../../main/pipeline/config.js';
import type { GuestRunResult, GuestSsh, StageOutcome } from '../../../main/pipeline/stage-executor.js';

let root: string;
let repo: string;
let artifacts: string;

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'scratch-prompts-'));
  repo = path.join(root, 'repo');
  artifacts = path.join(root, 'artifacts');
  fs.mkdirSync(repo);
  fs.mkdirSync(artifacts);
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

function sh(command: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const localSsh: GuestSsh = {
  run: (command) => sh(command),
  exec: () => Promise.reject(new Error('not used')),
  putFile: () => Promise.reject(new Error('not used')),
  getFile: () => Promise.reject(new Error('not used')),
};

/** An agent that does what the prompt says: writes the file named after "to the file", with a verdict line. */
function promptFollowingAgent(promptCopy: string): CustomCommandAdapter {
  const script = [
    `cat > ${JSON.stringify(promptCopy)}.$$`,
    `f=$(grep -o 'to the file [^ ]*' ${JSON.stringify(promptCopy)}.$$ | head -n1 | cut -d' ' -f4)`,
    `mv ${JSON.stringify(promptCopy)}.$$ ${JSON.stringify(promptCopy)}`,
    'printf "Plan: do it\\n\\nVerdict: approve\\n" > "$f"',
    'echo "wrote $f"',
  ].join('\n');
  return new CustomCommandAdapter({ argv: ['bash', '-c', script] });
}

async function runStage(stage: StageName, config: PipelineConfig, promptCopy: string): Promise<StageOutcome> {
  const executor = new AgentStageExecutor(
    { adapter: promptFollowingAgent(promptCopy), guestEnv: () => ({}) },
    { repoDir: repo, artifactsDir: artifacts, taskFile: path.join(root, 'TASK.md'), promptDir: path.join(root, 'prompts'), asAgent: (s) => s },
  );
  const task: Task = {
    id: 't1', title: 'Add a flag', repoPath: repo, baseRef: 'main', baseCommit: 'not-a-commit', branch: 'factory/t1',
    createdAt: new Date().toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
  };
  return executor.runStage({
    task, stage, config, stageConfig: config.stages[stage], signal: new AbortController().signal, ssh: localSsh,
    async runInSandbox(script): Promise<GuestRunResult> {
      const r = await sh(`cd ${JSON.stringify(repo)} || exit 97\n${script}`);
      const out = r.stdout + r.stderr;
      return { code: r.code, sessionId: 's', timedOut: false, cancelled: false, lost: false, durationMs: 1, tail: (b) => out.slice(-b) };
    },
  });
}

describe('the plan and review prompts say where the scratch files go', () => {
  for (const stage of ['plan', 'review'] as const) {
    const file = stage === 'plan' ? 'PLAN.md' : 'REVIEW.md';

    it(`${stage}: by default, a file in the artifacts folder that the agent must not git add`, async () => {
      const copy = path.join(root, `${stage}.prompt`);
      const out = await runStage(stage, defaultPipelineConfig(), copy);
      const prompt = fs.readFileSync(copy, 'utf8');
      expect(out.status, out.summary).toBe('passed');
      expect(prompt).toContain(`to the file ${artifacts}/${file} (`);
      expect(prompt).toMatch(/outside the repository: do not git add it/);
      expect(prompt).not.toMatch(/keeps it in its branch/);
      expect(fs.existsSync(path.join(artifacts, file))).toBe(true);
      expect(fs.existsSync(path.join(repo, file))).toBe(false);
    });

    it(`${stage}: with commitScratchFiles, a file in the repository that the agent is told to git add`, async () => {
      const copy = path.join(root, `${stage}.prompt`);
      const config: PipelineConfig = { ...defaultPipelineConfig(), commitScratchFiles: true };
      const out = await runStage(stage, config, copy);
      const prompt = fs.readFileSync(copy, 'utf8');
      expect(out.status, out.summary).toBe('passed');
      expect(prompt).toContain(`to the file ${file} (`);
      expect(prompt).toContain('this repository keeps it in its branch: git add it');
      // The old prompt told the agent the opposite of what the repository asked for.
      expect(prompt).not.toMatch(/do not git add/);
      expect(fs.existsSync(path.join(repo, file))).toBe(true);
      expect(fs.existsSync(path.join(artifacts, file))).toBe(false);
    });
  }
});
