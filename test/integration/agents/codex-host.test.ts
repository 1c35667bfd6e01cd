// The real Codex CLI (pinned version, fetched with `npm pack` into the test
// cache the way the image build fetches it, its code-mode host beside it)
// drives the stages of the AgentStageExecutor on this host against the
// Responses API stub, with the CodexAdapter's own command line. The scripted
// model works the way Codex's default model does, in code mode: its one tool is
// `exec`, whose JavaScript writes files through `tools.apply_patch` and runs
// commands through `tools.exec_command`. Plan writes PLAN.md, build adds and
// commits a file, the test command passes, review approves, document runs; a
// build whose tool calls Codex refuses changes nothing and fails with the
// reason. The "sandbox" is a local process as an unprivileged user; the VM
// path is codex-sandbox.test.ts.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StageName, Task } from '../../../common/domain.js';
import { defaultPipelineConfig, type StageConfig } from '../../../main/pipeline/config.js';
import { AgentStageExecutor } from '../../../main/pipeline/agents/agent-executor.js';
import { CodexAdapter } from '../../../main/pipeline/agents/codex.js';
import type { AgentEvent } from '../../../main/pipeline/agents/types.js';
import type { StageOutcome } from '../../../main/pipeline/stage-executor.js';
import { ensureHostAgentUser } from '../../support/claude-code-host.js';
import { codexBinary, codexFor } from '../../support/codex-host.js';
import {
  addFilePatch,
  codeModeJs,
  ResponsesStub,
  stageOfResponsesRequest as stageOf,
  toolResultsOf,
  type ResponsesReply,
  type ResponsesStage,
} from '../../support/responses-stub.js';
import { handToAgentUser, hostAsUser, hostRunInSandbox, hostStageFolders, localSsh } from '../../support/host-stage.js';

const offline = process.env.FACTORY_OFFLINE === '1';
const isRoot = process.getuid?.() === 0;
const TEST_COMMAND = 'if [ -f greeting.txt ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi';

describe.skipIf(!isRoot && process.platform !== 'linux')('Codex CLI on the host drives the agent executor in code mode', () => {
  let stub: ResponsesStub;
  let root: string;
  let repo: string;
  let home: string;
  let artifacts: string;
  let binary: string | undefined;
  let user: string | undefined;
  const events: Array<{ stage: string; event: AgentEvent }> = [];
  const apiKey = 'fiab-placeholder-codexhost';
  let scripts: Partial<Record<ResponsesStage, ResponsesReply[]>> = {};

  beforeAll(async () => {
    binary = await codexBinary({ allowFetch: !offline });
    ({ root, repo, home, artifacts } = hostStageFolders('codex-exec-'));
    stub = await ResponsesStub.start({ apiKey, script: (_req, { stage, toolResults }) => scripts[stage]?.[toolResults] ?? { text: 'Done.' } });
    user = ensureHostAgentUser();
    git(['init', '-q', '-b', 'factory/t1']);
    fs.writeFileSync(path.join(repo, 'README.md'), '# Fixture\n');
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

  function executorWith(codex: string): AgentStageExecutor {
    return new AgentStageExecutor(
      { adapter: new CodexAdapter({ binary: codex }), guestEnv: () => ({ OPENAI_BASE_URL: `${stub.url}/v1`, OPENAI_API_KEY: apiKey }) },
      {
        repoDir: repo,
        artifactsDir: artifacts,
        taskFile: path.join(root, 'TASK.md'),
        promptDir: path.join(home, '.factory-prompts'),
        asAgent: asUser,
        onEvent: (_t, stage, event) => events.push({ stage, event }),
      },
    );
  }

  function newTask(id: string): Task {
    const baseCommit = git(['rev-parse', 'HEAD']).trim();
    return {
      id, title: 'Add greeting.txt', repoPath: repo, baseRef: 'main', baseCommit, branch: 'factory/t1',
      createdAt: new Date().toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
    };
  }

  async function runStage(executor: AgentStageExecutor, stage: StageName, task: Task): Promise<StageOutcome> {
    const config = defaultPipelineConfig();
    const stageConfig: StageConfig =
      stage === 'test' ? { ...config.stages.test, command: TEST_COMMAND, timeoutSeconds: 60, isDefault: false } : config.stages[stage];
    return executor.runStage({
      task,
      stage,
      config,
      stageConfig,
      signal: new AbortController().signal,
      ssh: localSsh,
      runInSandbox: hostRunInSandbox({ root, repo, task, stage, asUser }),
    });
  }

  it('runs plan, build, test, review and document: the model writes files with apply_patch and runs git with exec_command', async (ctx) => {
    if (!binary) ctx.skip(); // offline and not cached: FACTORY_OFFLINE=1 without a fetched CLI
    scripts = {
      plan: [
        { toolCalls: [{ input: codeModeJs({ patches: [addFilePatch(`${artifacts}/PLAN.md`, '# Add greeting.txt with a hello line\n\n1. write it\n')] }) }] },
        { text: 'The plan adds greeting.txt.' },
      ],
      build: [
        {
          text: 'Writing greeting.txt.',
          toolCalls: [
            {
              input: codeModeJs({
                patches: [addFilePatch('greeting.txt', 'hello from code mode\n')],
                commands: ['git add greeting.txt && git commit -qm "Add greeting.txt" && git log --format=%s -1'],
              }),
            },
          ],
        },
        { text: 'Added greeting.txt and committed it.' },
      ],
      review: [
        { toolCalls: [{ input: codeModeJs({ patches: [addFilePatch(`${artifacts}/REVIEW.md`, 'Looks right.\n\nVerdict: approve\n')] }) }] },
        { text: 'Approved: small and tested.' },
      ],
      document: [{ text: 'Nothing to document.' }],
    };
    const task = newTask('t1');
    fs.writeFileSync(path.join(root, 'TASK.md'), `${task.title}\n`, { mode: 0o644 });
    const executor = executorWith(codexFor(user, binary!, path.join(root, 'bin')));
    const requestsBefore = stub.requests.length;

    const outcomes: Partial<Record<StageName, StageOutcome>> = {};
    for (const stage of ['request', 'plan', 'build', 'test', 'review', 'document'] as const) {
      const started = Date.now();
      outcomes[stage] = await runStage(executor, stage, task);
      console.log(`codex-host: ${stage} ${outcomes[stage]!.status} in ${Date.now() - started} ms`);
      expect(outcomes[stage]!.status, `${stage}: ${outcomes[stage]!.summary}\n${outcomes[stage]!.detail ?? ''}`).toBe('passed');
    }
    expect(outcomes.plan!.summary).toBe('Add greeting.txt with a hello line');
    expect(outcomes.plan!.tokens!.input).toBeGreaterThan(0);
    expect(outcomes.build!.summary).toBe('Added greeting.txt and committed it.');
    expect(outcomes.build!.tokens!.output).toBeGreaterThan(0);
    expect(outcomes.test!.summary).toBe('1 passed, 0 failed');
    expect(outcomes.review!.summary).toBe('approved: Approved: small and tested.');
    expect(outcomes.document!.summary).toBe('Nothing to document.');

    // apply_patch wrote the file, exec_command committed it on the task branch.
    expect(fs.readFileSync(path.join(repo, 'greeting.txt'), 'utf8')).toBe('hello from code mode\n');
    expect(git(['log', '--format=%s', 'factory/t1'])).toContain('Add greeting.txt');
    // The parser saw Codex's own items for both tools.
    const build = events.filter((e) => e.stage === 'build').map((e) => e.event);
    expect(build).toContainEqual(expect.objectContaining({ kind: 'tool-use', name: 'file_change', detail: expect.stringContaining('greeting.txt') }));
    expect(build).toContainEqual(expect.objectContaining({ kind: 'tool-use', name: 'command', detail: expect.stringContaining('git add greeting.txt') }));
    expect(build.filter((e) => e.kind === 'tool-result').every((e) => e.kind === 'tool-result' && !e.isError)).toBe(true);

    // Codex sent the code-mode tool results back: the commit's subject came out of exec_command.
    const seen = stub.requests.slice(requestsBefore);
    const buildTurns = seen.filter((r) => stageOf(r) === 'build');
    expect(buildTurns).toHaveLength(2);
    expect(toolResultsOf(buildTurns[1]!).join('\n')).toContain('Add greeting.txt');
    // The tools arrived the code-mode way: one `exec` custom tool in an additional_tools item of the input.
    const first = buildTurns[0]!.body as { input: Array<{ type: string; tools?: Array<{ type: string; name: string; tools?: Array<{ type: string; name: string }> }> }> };
    const namespaces = first.input.find((i) => i.type === 'additional_tools')?.tools ?? [];
    expect(namespaces.flatMap((ns) => ns.tools ?? [])).toContainEqual(expect.objectContaining({ type: 'custom', name: 'exec' }));
    // Every request carried the key it was given, as a bearer token.
    expect(new Set(seen.map((r) => r.headers.authorization))).toEqual(new Set([`Bearer ${apiKey}`]));
    expect(new Set(seen.map((r) => `${r.method} ${r.path}`))).toEqual(new Set(['POST /v1/responses']));
  });

  it('fails the build stage with the reason when Codex refuses the tool calls', async (ctx) => {
    if (!binary) ctx.skip();
    // Without its code-mode host beside it, Codex cannot run the model's exec call.
    scripts = {
      build: [
        { toolCalls: [{ input: codeModeJs({ patches: [addFilePatch('refused.txt', 'never written\n')] }) }] },
        { text: 'I could not write refused.txt.' },
      ],
    };
    const task = newTask('t2');
    const executor = executorWith(codexFor(user, binary!, path.join(root, 'bin-without-host'), { withoutCodeModeHost: true }));
    const out = await runStage(executor, 'build', task);
    console.log(`codex-host: build without the code-mode host: ${out.status}: ${out.summary}\n${out.detail ?? ''}`);
    expect(out.status).toBe('failed');
    expect(out.summary).toMatch(/^the agent changed nothing in the repository; it reported: Code Mode is unavailable because failed to spawn code-mode host/);
    expect(out.detail).toContain('codex-code-mode-host');
    expect(fs.existsSync(path.join(repo, 'refused.txt'))).toBe(false);
  });
});
