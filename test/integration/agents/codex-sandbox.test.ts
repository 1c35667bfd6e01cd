// The real Codex CLI inside a real sandbox, driven by the whole app: the
// repo's .factory/pipeline.json picks codex, the credential broker holds the
// real OpenAI key in the real keychain and gives the guest only a placeholder,
// and the model API is the scripted Responses API stub over HTTPS (test CA,
// verified by the proxy). The scripted model works in code mode, as Codex's
// default model does: its `exec` tool's JavaScript writes PLAN.md, a file of
// the change and REVIEW.md through `tools.apply_patch` (the code-mode host the
// image carries beside Codex) and commits through `tools.exec_command`. One
// task goes through every stage, the commit lands on the approved branch, the
// stub saw only the real key, and the task's egress list holds no refusal:
// Codex's update check, analytics and plugins are off in its command line.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StageResult, Task } from '../../../common/domain.js';
import type { FactoryApp } from '../../../main/app.js';
import { GUEST_ARTIFACTS_DIR } from '../../../main/pipeline/artifacts.js';
import { SandboxShell, startCodexAgentApp, waitForTask, type AgentApp } from '../../support/agent-app.js';
import { testImage } from '../../support/image.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';
import {
  addFilePatch,
  codeModeJs,
  ResponsesStub,
  stageOfResponsesRequest,
  toolResultsOf,
  type ResponsesReply,
  type ResponsesStage,
} from '../../support/responses-stub.js';

const REPO = '/work/repo';
const TEST_COMMAND = 'if [ -f greeting.txt ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi';

const scripts: Partial<Record<ResponsesStage, ResponsesReply[]>> = {
  plan: [
    { toolCalls: [{ input: codeModeJs({ patches: [addFilePatch(`${GUEST_ARTIFACTS_DIR}/PLAN.md`, '# Add greeting.txt with a hello line\n\n1. write it\n2. commit it\n')] }) }] },
    { text: 'The plan adds greeting.txt.' },
  ],
  build: [
    {
      text: 'Writing greeting.txt.',
      toolCalls: [
        {
          input: codeModeJs({
            patches: [addFilePatch('greeting.txt', 'hello from the sandbox\n')],
            commands: [`cd ${REPO} && git add greeting.txt && git commit -qm 'Add greeting.txt' && git log --format='%an|%s' -1`],
          }),
        },
      ],
    },
    { text: 'Added greeting.txt and committed it.' },
  ],
  review: [
    { toolCalls: [{ input: codeModeJs({ patches: [addFilePatch(`${GUEST_ARTIFACTS_DIR}/REVIEW.md`, 'Small and right.\n\nVerdict: approve\n')] }) }] },
    { text: 'Approved: small and right.' },
  ],
  document: [{ text: 'Nothing to document.' }],
};

let env: AgentApp<ResponsesStub> | undefined;
let app: FactoryApp;
let stub: ResponsesStub;
let apiKey: string;
let output: Map<string, string>;
let repo: FixtureRepo;

beforeAll(async () => {
  await testImage();
  env = await startCodexAgentApp({ stub: { script: (_req, { stage, toolResults }) => scripts[stage]?.[toolResults] ?? { text: 'Done.' } } });
  ({ app, stub, apiKey, output } = env);
  repo = await makeRepo({
    files: {
      'README.md': '# Fixture\n',
      '.factory/pipeline.json': JSON.stringify({ agent: 'codex', stages: { test: { command: TEST_COMMAND, timeoutSeconds: 90 } } }),
    },
  });
}, 15 * 60_000);

afterAll(async () => {
  await env?.dispose();
  repo?.cleanup();
});

describe('Codex in a real sandbox through the credential proxy', () => {
  let taskId = '';

  it('a task with agent codex runs plan, build, test, review and document, its tools working in code mode', async () => {
    const started = Date.now();
    const created = await app.api['tasks.create']({ repoPath: repo.dir, title: 'Add greeting.txt with a hello line' });
    taskId = created.id;
    expect(created.agent).toBe('codex'); // from .factory/pipeline.json
    const t = await waitForTask(app, taskId, (x) => ['review', 'failed', 'cancelled'].includes(x.phase), 12 * 60_000);
    console.log(
      `codex-sandbox: create to review ${((Date.now() - started) / 1000).toFixed(1)} s; ` + t.stages.map((s) => `${s.name} ${s.durationMs} ms`).join(', '),
    );
    const stage = (name: string) => t.stages.find((s) => s.name === name)!;
    // Where a stage's time goes under emulation: Codex's start before its first model request, and the rest.
    for (const s of t.stages) {
      const turns = stub.requests.filter((r) => stageOfResponsesRequest(r) === s.name);
      if (!turns.length || !s.startedAt) continue;
      const first = turns[0]!.at - Date.parse(s.startedAt);
      console.log(`codex-sandbox: ${s.name}: first model request ${(first / 1000).toFixed(1)} s after the stage started, ${turns.length} requests, stage ${((s.durationMs ?? 0) / 1000).toFixed(1)} s`);
    }
    const describeStages = () =>
      t.stages.map((s) => `${s.name}:${s.status} ${s.summary ?? ''}\n${(output.get(s.sessionId ?? '') ?? '').slice(-3000)}`).join('\n---\n');
    expect(t.error, `${JSON.stringify(t.error)}\n${describeStages()}`).toBeUndefined();
    expect(t.stages.map((s) => `${s.name}:${s.status}`), describeStages()).toEqual([
      'request:passed', 'plan:passed', 'build:passed', 'test:passed', 'review:passed', 'document:passed',
    ]);
    expect(stage('plan').summary).toBe('Add greeting.txt with a hello line');
    expect(stage('build').summary).toBe('Added greeting.txt and committed it.');
    expect(stage('test').summary).toBe('1 passed, 0 failed');
    expect(stage('review').summary).toBe('approved: Approved: small and right.');
    expect(stage('document').summary).toBe('Nothing to document.');
    for (const name of ['plan', 'build', 'review', 'document']) {
      const s: StageResult = stage(name);
      expect(s.tokens?.input, `${name} tokens`).toBeGreaterThan(0);
    }

    // Codex ran the model's code-mode calls: the commit's author and subject came back from exec_command.
    const seen = stub.requests;
    const buildTurns = seen.filter((r) => stageOfResponsesRequest(r) === 'build');
    expect(buildTurns).toHaveLength(2);
    expect(toolResultsOf(buildTurns[1]!).join('\n')).toContain('Factory agent|Add greeting.txt');
    expect(new Set(seen.filter((r) => r.path === '/v1/responses').map(stageOfResponsesRequest))).toEqual(new Set(['plan', 'build', 'review', 'document']));

    // Every request reached the stub with the real key, none with the placeholder; none carried the key in its body.
    expect(seen.length).toBeGreaterThanOrEqual(7);
    expect(new Set(seen.map((r) => r.headers.authorization))).toEqual(new Set([`Bearer ${apiKey}`]));
    for (const r of seen) {
      expect(JSON.stringify(r.headers)).not.toContain('fiab-placeholder-');
      expect(r.rawBody).not.toContain(apiKey);
    }
    for (const s of t.stages) expect(output.get(s.sessionId ?? '') ?? '').not.toContain(apiKey);

    // Nothing Codex does on the side (update check, analytics, plugin sync) was refused on the way out.
    const refusals = t.egress?.refusals ?? [];
    expect(refusals.map((r) => `${r.step} ${r.scheme}://${r.host}:${r.port}${r.path ?? ''} x${r.count ?? 1}: ${r.reason}`)).toEqual([]);
  });

  it('the agent held only the placeholder, and its commit lands on the approved branch', async () => {
    const shell = await SandboxShell.open({ app, output }, taskId);
    const envFile = await shell.run('cat /work/.factory/env.sh');
    expect(envFile).toContain('OPENAI_BASE_URL=');
    expect(envFile).toMatch(/OPENAI_API_KEY='fiab-placeholder-/);
    expect(envFile).not.toContain(apiKey);
    const inGuest = await shell.run(`runuser -u agent -- git -C ${REPO} log --format='%an|%s' factory/${taskId}`);
    expect(inGuest).toContain('Factory agent|Add greeting.txt');
    await shell.close();

    const review = await app.api['tasks.review']({ taskId });
    // PLAN.md and REVIEW.md are scratch files outside the repository: not in the returned branch.
    expect(review.files.map((f) => f.path)).toEqual(['greeting.txt']);
    expect(review.patch).toContain('+hello from the sandbox');
    const approved: Task = await app.api['tasks.approve']({ taskId });
    expect(approved.phase).toBe('approved');
    const branch = `factory/${taskId}`;
    expect(repo.git('show', `${branch}:greeting.txt`)).toBe('hello from the sandbox\n');
    // Approve lands one commit of the reviewed tree on the base.
    const log = repo.git('log', '--format=%s', branch).trim().split('\n');
    expect(log).toHaveLength(2);
    expect(log.at(-1)).toBe('initial');
  });
});
