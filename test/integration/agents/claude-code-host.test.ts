// The real Claude Code CLI (pinned version, fetched with `npm pack` into the
// test cache the way the image build fetches it) drives every stage of the
// AgentStageExecutor on this host against the Anthropic stub: plan writes
// PLAN.md, build commits a file, the test stage fails once and one repair
// round fixes it, review approves, document runs. The "sandbox" here is a
// local process as an unprivileged user; the VM path is covered elsewhere.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StageName, Task } from '../../../common/domain.js';
import { defaultPipelineConfig } from '../../../main/pipeline/config.js';
import { AgentStageExecutor } from '../../../main/pipeline/agents/agent-executor.js';
import { ClaudeCodeAdapter } from '../../../main/pipeline/agents/claude-code.js';
import type { AgentEvent } from '../../../main/pipeline/agents/types.js';
import type { StageOutcome } from '../../../main/pipeline/stage-executor.js';
import { AnthropicStub, stageOfRequest as stageOf, type StubReply } from '../../support/anthropic-stub.js';
import { claudeCodeBinary, ensureHostAgentUser } from '../../support/claude-code-host.js';
import { handToAgentUser, hostAsUser, hostRunInSandbox, hostStageFolders, localSsh } from '../../support/host-stage.js';

const offline = process.env.FACTORY_OFFLINE === '1';
const isRoot = process.getuid?.() === 0;

describe.skipIf(!isRoot && process.platform !== 'linux')('Claude Code CLI on the host drives the agent executor', () => {
  let stub: AnthropicStub;
  let root: string;
  let repo: string;
  let home: string;
  let artifacts: string;
  let binary: string | undefined;
  let user: string | undefined;
  const events: Array<{ stage: string; event: AgentEvent }> = [];
  const apiKey = 'fiab-placeholder-hosttest';

  beforeAll(async () => {
    binary = await claudeCodeBinary({ allowFetch: !offline });
    ({ root, repo, home, artifacts } = hostStageFolders('agent-exec-'));
    const scripts: Record<string, StubReply[]> = {
      plan: [
        { text: 'Planning.', toolUses: [{ name: 'Write', input: { file_path: `${artifacts}/PLAN.md`, content: '# Add greeting.txt with a hello line\n\n1. write it\n' } }] },
        { text: 'The plan adds greeting.txt.' },
      ],
      build: [
        { toolUses: [{ name: 'Bash', input: { command: `cd ${repo} && echo hello > greeting.txt && git add greeting.txt && git commit -qm "Add greeting"`, description: 'Write and commit' } }] },
        { text: 'Added greeting.txt and committed it.' },
      ],
      'test-repair': [
        { toolUses: [{ name: 'Write', input: { file_path: `${repo}/fixed.txt`, content: 'ok\n' } }] },
        { text: 'Created fixed.txt so the test passes.' },
      ],
      review: [
        { toolUses: [{ name: 'Write', input: { file_path: `${artifacts}/REVIEW.md`, content: 'Looks right.\n\nVerdict: approve\n' } }] },
        { text: 'Approved: small and tested.' },
      ],
      document: [{ text: 'Nothing to document.' }],
    };
    stub = await AnthropicStub.start({
      script: (req, { assistantTurns }) => scripts[stageOf(req)]?.[assistantTurns] ?? { text: 'Done.' },
    });
    user = ensureHostAgentUser();
    git(['init', '-q', '-b', 'factory/t1']);
    fs.writeFileSync(path.join(repo, 'Makefile'), 'test:\n\t@if [ -f fixed.txt ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi\n');
    // A repository's own prompt for one stage, read at the base commit.
    fs.mkdirSync(path.join(repo, '.factory', 'prompts'), { recursive: true });
    fs.writeFileSync(path.join(repo, '.factory', 'prompts', 'document.md'), 'Document task {{taskId}} the house way (OVERRIDE-MARKER).\n');
    git(['add', '.']);
    git(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'base']);
    handToAgentUser({ root, repo, home, artifacts }, user);
  }, 600_000);

  afterAll(async () => {
    await stub?.close();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  function git(args: string[]): string {
    return execFileSync('git', ['-c', 'safe.directory=*', ...args], { cwd: repo, encoding: 'utf8' });
  }

  const asUser = (script: string) => hostAsUser(user, home)(script); // user and home are set in beforeAll

  async function runStage(executor: AgentStageExecutor, stage: StageName, task: Task): Promise<StageOutcome> {
    return executor.runStage({
      task,
      stage,
      config: defaultPipelineConfig(),
      stageConfig: defaultPipelineConfig().stages[stage],
      signal: new AbortController().signal,
      ssh: localSsh,
      runInSandbox: hostRunInSandbox({ root, repo, task, stage, asUser }),
    });
  }

  it('runs plan, build, test with one repair round, review and document', async (ctx) => {
    if (!binary) ctx.skip(); // offline and not cached: FACTORY_OFFLINE=1 without a fetched CLI
    const baseCommit = git(['rev-parse', 'HEAD']).trim();
    const task: Task = {
      id: 't1', title: 'Add greeting.txt', repoPath: repo, baseRef: 'main', baseCommit, branch: 'factory/t1',
      createdAt: new Date().toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
    };
    const taskFile = path.join(root, 'TASK.md');
    fs.writeFileSync(taskFile, `${task.title}\n`, { mode: 0o644 });
    const executor = new AgentStageExecutor(
      { adapter: new ClaudeCodeAdapter({ binary: binary! }), guestEnv: () => ({ ANTHROPIC_BASE_URL: stub.url, ANTHROPIC_API_KEY: apiKey }) },
      { repoDir: repo, artifactsDir: artifacts, taskFile, promptDir: path.join(home, '.factory-prompts'), asAgent: asUser, onEvent: (_t, stage, event) => events.push({ stage, event }) },
    );
    if (user && !canRun(user, binary!)) {
      const copy = path.join(root, 'claude');
      fs.copyFileSync(binary!, copy);
      fs.chmodSync(copy, 0o755);
      (executor as unknown as { deps: { adapter: ClaudeCodeAdapter } }).deps.adapter = new ClaudeCodeAdapter({ binary: copy });
    }

    const outcomes: Partial<Record<StageName, StageOutcome>> = {};
    for (const stage of ['request', 'plan', 'build', 'test', 'review', 'document'] as const) {
      outcomes[stage] = await runStage(executor, stage, task);
      expect(outcomes[stage]!.status, `${stage}: ${outcomes[stage]!.summary}\n${outcomes[stage]!.detail ?? ''}`).toBe('passed');
    }
    expect(outcomes.request!.summary).toBe('Add greeting.txt');
    expect(outcomes.plan!.summary).toBe('Add greeting.txt with a hello line');
    expect(outcomes.plan!.tokens!.input).toBeGreaterThan(0);
    expect(outcomes.plan!.costUsd).toBeGreaterThan(0);
    expect(outcomes.build!.summary).toBe('Added greeting.txt and committed it.');
    expect(outcomes.test!.summary).toBe('1 passed, 0 failed after 1 repair round');
    expect(outcomes.test!.tokens).toBeDefined();
    expect(outcomes.review!.summary).toMatch(/^approved: Approved: small and tested\./);

    // The files the stub's tool calls asked for exist, and the build commit is on the branch.
    expect(fs.readFileSync(path.join(repo, 'greeting.txt'), 'utf8')).toBe('hello\n');
    expect(fs.existsSync(path.join(repo, 'fixed.txt'))).toBe(true);
    expect(git(['log', '--format=%s', 'factory/t1'])).toContain('Add greeting');
    // Every model request carried the placeholder the broker handed out.
    const agentRequests = stub.agentRequests();
    expect(agentRequests.length).toBeGreaterThanOrEqual(9);
    expect(new Set(agentRequests.map((r) => r.headers['x-api-key']))).toEqual(new Set([apiKey]));
    expect(events.some((e) => e.stage === 'build' && e.event.kind === 'tool-use' && e.event.name === 'Bash')).toBe(true);
    // The document stage ran the repository's prompt, rendered, instead of the default.
    expect(agentRequests.some((r) => r.rawBody.includes('Document task t1 the house way (OVERRIDE-MARKER).'))).toBe(true);
    expect(agentRequests.some((r) => stageOf(r) === 'document')).toBe(false);
  });

  it('fails the review stage on a blocking verdict', async (ctx) => {
    if (!binary) ctx.skip();
    const blocking = await AnthropicStub.start({
      script: [
        { toolUses: [{ name: 'Write', input: { file_path: `${artifacts}/REVIEW.md`, content: 'Missing tests.\n**Verdict:** block\n' } }] },
        { text: 'Blocked: no tests.' },
      ],
    });
    try {
      const baseCommit = git(['rev-parse', 'HEAD']).trim();
      const task = { id: 't2', title: 'x', repoPath: repo, baseRef: 'main', baseCommit, branch: 'factory/t1', createdAt: '', phase: 'running', sandbox: { status: 'running' }, stages: [] } as Task;
      const bin = user && !canRun(user, binary!) ? path.join(root, 'claude') : binary!;
      const executor = new AgentStageExecutor(
        { adapter: new ClaudeCodeAdapter({ binary: bin }), guestEnv: () => ({ ANTHROPIC_BASE_URL: blocking.url, ANTHROPIC_API_KEY: apiKey }) },
        { repoDir: repo, artifactsDir: artifacts, taskFile: path.join(root, 'TASK.md'), promptDir: path.join(home, '.factory-prompts'), asAgent: asUser },
      );
      const out = await runStage(executor, 'review', task);
      expect(out.status).toBe('failed');
      expect(out.summary).toBe('review blocked the change: Blocked: no tests.');
    } finally {
      await blocking.close();
    }
  });
});

function canRun(user: string, file: string): boolean {
  try {
    execFileSync('runuser', ['-u', user, '--', 'test', '-x', file], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
