// A build stage whose agent did nothing cannot pass. An agent CLI whose tools were
// all refused exits 0 and says it finished; the stage must fail with the agent's
// own words instead of showing green with an empty diff. The "agents" are real
// local programs run through the real executor on a real git repository, with a
// local shell in place of the sandbox's (no VM in a unit test); the agents' own
// reports are their real output formats fed to the real parsers.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentStageExecutor } from '../../../main/pipeline/agents/agent-executor.js';
import { ClaudeStreamJsonParser } from '../../../main/pipeline/agents/claude-code.js';
import { CodexJsonParser } from '../../../main/pipeline/agents/codex.js';
import { CustomCommandAdapter } from '../../../main/pipeline/agents/custom-command.js';
import type { AgentAdapter } from '../../../main/pipeline/agents/types.js';
import { MAX_AGENT_PROBLEMS } from '../../../main/pipeline/agents/types.js';
import { defaultPipelineConfig } from '../../../main/pipeline/config.js';
import type { StageOutcome } from '../../../main/pipeline/stage-executor.js';
import { runLocalStage } from './support/local-stage.js';

let root: string;
let repo: string;

function git(...args: string[]): string {
  const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'build-did-nothing-'));
  repo = path.join(root, 'repo');
  fs.mkdirSync(repo);
  git('init', '-q', '-b', 'main');
  git('config', 'user.name', 'T');
  git('config', 'user.email', 't@example.invalid');
  fs.writeFileSync(path.join(repo, 'README.md'), 'hello\n');
  fs.writeFileSync(path.join(repo, '.gitignore'), 'node_modules/\n');
  git('add', '-A');
  git('commit', '-q', '-m', 'base');
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

/** An agent that runs this bash script in the repository, its prompt on stdin. */
function scriptAgent(script: string): CustomCommandAdapter {
  return new CustomCommandAdapter({ argv: ['bash', '-c', `cat >/dev/null\n${script}`] });
}

function build(adapter: AgentAdapter): Promise<StageOutcome> {
  const executor = new AgentStageExecutor(
    { adapter, guestEnv: () => ({}) },
    { repoDir: repo, artifactsDir: path.join(root, 'artifacts'), taskFile: path.join(root, 'TASK.md'), promptDir: path.join(root, 'prompts'), asAgent: (s) => s },
  );
  return runLocalStage(executor, 'build', defaultPipelineConfig(), repo);
}

describe('a build stage whose agent did nothing', () => {
  it('fails, quoting what the agent said, when the agent exits 0 having changed nothing', async () => {
    const out = await build(scriptAgent('echo "All done, the feature is implemented."'));
    expect(out.status).toBe('failed');
    expect(out.summary).toBe('the agent changed nothing in the repository; it said: All done, the feature is implemented.');
  });

  it('says the agent gave no reason when it printed nothing', async () => {
    const out = await build(scriptAgent('true'));
    expect(out.status).toBe('failed');
    expect(out.summary).toBe('the agent changed nothing in the repository and said nothing about why');
  });

  it('does not count an ignored folder (an install) as a change', async () => {
    const out = await build(scriptAgent('mkdir -p node_modules/x && echo 1 > node_modules/x/i.js && echo installed'));
    expect(out.status).toBe('failed');
  });

  it('passes when the agent left a new file, edited a file already changed before, or committed', async () => {
    expect((await build(scriptAgent('echo new > feature.js && echo wrote it'))).status).toBe('passed');
    // A file setup had changed already (an install rewriting a lockfile): a further edit still counts.
    fs.writeFileSync(path.join(repo, 'README.md'), 'changed by setup\n');
    expect((await build(scriptAgent('echo "and by the agent" >> README.md'))).status).toBe('passed');
    expect((await build(scriptAgent('git commit -q -am "agent commit" && echo committed'))).status).toBe('passed');
    expect(git('log', '--format=%s', '-1')).toBe('agent commit');
  });

  it("leaves the repository's own index alone while looking", async () => {
    fs.writeFileSync(path.join(repo, 'untracked.txt'), 'x\n');
    await build(scriptAgent('echo nothing'));
    expect(git('status', '--porcelain')).toBe('?? untracked.txt');
  });
});

describe("the agent's own reports of what went wrong", () => {
  it("keeps Codex's error items (its warnings, which it goes on after) without failing the run", () => {
    const p = new CodexJsonParser();
    const lines = [
      { type: 'thread.started', thread_id: 't' },
      { type: 'turn.started' },
      { type: 'item.completed', item: { id: 'item_0', type: 'error', message: 'exec is unavailable: codex-code-mode-host was not found next to codex' } },
      { type: 'item.completed', item: { id: 'item_1', type: 'agent_message', text: 'I finished the task.' } },
      { type: 'turn.completed', usage: { input_tokens: 10, output_tokens: 5 } },
    ];
    p.push(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const { outcome } = p.end();
    expect(outcome.result.ok).toBe(true);
    expect(outcome.result.problems).toEqual(['exec is unavailable: codex-code-mode-host was not found next to codex']);
  });

  it('caps the problems a chatty agent reports, keeping the latest', () => {
    const p = new CodexJsonParser();
    const items = Array.from({ length: 50 }, (_, i) => ({ type: 'item.completed', item: { type: 'error', message: `warning ${i}\n${'x'.repeat(1000)}` } }));
    p.push([{ type: 'thread.started' }, ...items, { type: 'turn.completed' }].map((l) => JSON.stringify(l)).join('\n') + '\n');
    const problems = p.end().outcome.result.problems ?? [];
    expect(problems).toHaveLength(MAX_AGENT_PROBLEMS);
    expect(problems.at(-1)).toMatch(/^warning 49 x+…$/);
    expect(problems.every((t) => t.length <= 300 && !t.includes('\n'))).toBe(true);
  });

  it("names Claude Code's refused tool calls", () => {
    const p = new ClaudeStreamJsonParser();
    const result = {
      type: 'result', subtype: 'success', is_error: false, result: 'Done.', num_turns: 2,
      permission_denials: [{ tool_name: 'Bash', tool_use_id: 'x', tool_input: { command: 'npm test' } }],
    };
    p.push(JSON.stringify(result) + '\n');
    expect(p.end().outcome.result.problems).toEqual(['the Bash tool call was refused']);
  });

  it('a build that changed nothing quotes the last problem the agent reported', async () => {
    const codexLike: AgentAdapter = {
      id: 'codex-like',
      displayName: 'Codex-like',
      brokerEnv: [],
      command: (inv) => ({
        cwd: inv.cwd,
        env: {},
        argv: ['bash', '-c', `cat >/dev/null; printf '%s\\n' '{"type":"thread.started"}' '{"type":"item.completed","item":{"type":"error","message":"tool call refused: exec"}}' '{"type":"item.completed","item":{"type":"agent_message","text":"Finished."}}' '{"type":"turn.completed"}'`],
        stdinFile: inv.promptFile,
      }),
      createParser: () => new CodexJsonParser(),
    };
    const out = await build(codexLike);
    expect(out.status).toBe('failed');
    expect(out.summary).toBe('the agent changed nothing in the repository; it reported: tool call refused: exec');
  });
});
