// What the plan and review stages tell the agent about their scratch files:
// by default the files go to the artifacts folder outside the repository and
// the agent is told not to git add them; with `commitScratchFiles` the files
// go in the repository and the agent is told to add them. The "agent" is a
// real local program (bash) that saves the prompt it got on stdin and writes
// the file the prompt names; the stages run through the real executor with a
// local shell in place of the sandbox's (no VM in a unit test).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StageName } from '../../../common/domain.js';
import { AgentStageExecutor } from '../../../main/pipeline/agents/agent-executor.js';
import { CustomCommandAdapter } from '../../../main/pipeline/agents/custom-command.js';
import { defaultPipelineConfig, type PipelineConfig } from '../../../main/pipeline/config.js';
import type { StageOutcome } from '../../../main/pipeline/stage-executor.js';
import { runLocalStage } from './support/local-stage.js';

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

function runStage(stage: StageName, config: PipelineConfig, promptCopy: string): Promise<StageOutcome> {
  const executor = new AgentStageExecutor(
    { adapter: promptFollowingAgent(promptCopy), guestEnv: () => ({}) },
    { repoDir: repo, artifactsDir: artifacts, taskFile: path.join(root, 'TASK.md'), promptDir: path.join(root, 'prompts'), asAgent: (s) => s },
  );
  return runLocalStage(executor, stage, config, repo);
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
