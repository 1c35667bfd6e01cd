// The real Claude Code CLI inside a real sandbox, driven by the whole app: the
// repo's .factory/pipeline.json picks claude-code, the credential broker holds
// the real key in the real keychain and gives the guest only a placeholder,
// and the model API is the scripted Messages API stub over HTTPS (test CA,
// verified by the proxy). One sandbox for the whole file:
//  1. the plan stage's first model request is held; the run is cancelled
//     there: no agent process is left in the guest and the sandbox stays;
//  2. a retry from plan runs plan, build (the stub's tool calls write and
//     commit a file), test (fails, one repair round, passes), and review,
//     which blocks the change; the user overrides it and document runs;
//  3. the commit comes back for review, and its tree lands on the approved
//     branch as one new commit on the base;
//     the stub saw the real key, the guest only ever the placeholder.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StageResult, Task } from '../../../common/domain.js';
import { GUEST_ARTIFACTS_DIR } from '../../../main/pipeline/artifacts.js';
import { stageOfRequest, type StubReply } from '../../support/anthropic-stub.js';
import { SandboxShell, startAgentApp, waitForTask, type AgentApp } from '../../support/agent-app.js';
import { testImage } from '../../support/image.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';

const REPO = '/work/repo';
const NUMBERS = Array.from({ length: 100 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
// A hundred lines on the stage's pty through a pager the repository's git config
// could name (the image has `more`, not `less`): without GIT_PAGER=cat in the stage
// environment, `more` waits for a key until the stage times out.
const TEST_COMMAND =
  'git -c core.pager=more show HEAD:numbers.txt; if [ -f fixed.txt ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi';

const scripts: Record<string, StubReply[]> = {
  plan: [
    { text: 'Planning.', toolUses: [{ name: 'Write', input: { file_path: `${GUEST_ARTIFACTS_DIR}/PLAN.md`, content: '# Add greeting.txt with a hello line\n\n1. write it\n2. commit it\n' } }] },
    { text: 'The plan adds greeting.txt.' },
  ],
  build: [
    {
      toolUses: [
        {
          name: 'Bash',
          input: { command: `cd ${REPO} && echo 'hello from the sandbox' > greeting.txt && git add greeting.txt && git commit -qm 'Add greeting.txt' && git log --oneline -1`, description: 'Write and commit greeting.txt' },
        },
      ],
    },
    { text: 'Added greeting.txt and committed it.' },
  ],
  'test-repair': [
    { toolUses: [{ name: 'Write', input: { file_path: `${REPO}/fixed.txt`, content: 'ok\n' } }] },
    { text: 'Created fixed.txt so the test passes.' },
  ],
  review: [
    { toolUses: [{ name: 'Write', input: { file_path: `${GUEST_ARTIFACTS_DIR}/REVIEW.md`, content: 'greeting.txt has no test of its own.\n\nVerdict: block\n' } }] },
    { text: 'Blocked: greeting.txt has no test.' },
  ],
  document: [{ text: 'Nothing to document.' }],
};

let env: AgentApp;
let repo: FixtureRepo;
let releaseHold: () => void = () => undefined;
const hold = new Promise<void>((resolve) => (releaseHold = resolve));
let held = false;

beforeAll(async () => {
  await testImage();
  env = await startAgentApp({
    stub: {
      script: (req, { assistantTurns }) => {
        const stage = stageOfRequest(req);
        // The first attempt's plan request never gets an answer: the run is cancelled there.
        if (stage === 'plan' && !held) {
          held = true;
          return { hold, text: 'too late' };
        }
        return scripts[stage]?.[assistantTurns] ?? { text: 'Done.' };
      },
    },
  });
  repo = await makeRepo({
    files: {
      'README.md': '# Fixture\n',
      'numbers.txt': NUMBERS,
      '.factory/pipeline.json': JSON.stringify({ agent: 'claude-code', stages: { test: { command: TEST_COMMAND, timeoutSeconds: 90 } } }),
    },
  });
}, 15 * 60_000);

afterAll(async () => {
  releaseHold();
  await env?.dispose();
  repo?.cleanup();
});

describe('Claude Code in a real sandbox through the credential proxy', () => {
  let taskId = '';
  let shell: SandboxShell;

  it('cancel while the agent waits for the model leaves no agent process in the guest; the sandbox stays', async () => {
    const created = await env.app.api['tasks.create']({ repoPath: repo.dir, title: 'Add greeting.txt with a hello line' });
    taskId = created.id;
    expect(created.agent).toBe('claude-code'); // from .factory/pipeline.json
    const started = Date.now();
    const first = await env.stub.waitFor((r) => stageOfRequest(r) === 'plan', 6 * 60_000);
    console.log(`claude-code-sandbox: first plan request ${((Date.now() - started) / 1000).toFixed(1)} s after create`);
    // The proxy replaced the placeholder with the real key on the way out.
    expect(first.headers['x-api-key']).toBe(env.apiKey);

    shell = await SandboxShell.open(env, taskId);
    const running = await shell.run('pgrep -u agent -f /usr/local/bin/claude | head -1');
    const pid = Number(running.trim());
    expect(pid, `no Claude Code process in the guest:\n${running}`).toBeGreaterThan(1);
    // What the agent process holds: the proxy address and a placeholder, never the key.
    const agentEnv = await shell.run(`tr '\\0' '\\n' < /proc/${pid}/environ | grep '^ANTHROPIC_'`);
    expect(agentEnv).toContain('ANTHROPIC_BASE_URL=http://10.0.2.100/anthropic');
    expect(agentEnv).toMatch(/ANTHROPIC_API_KEY=fiab-placeholder-/);
    expect(agentEnv).not.toContain(env.apiKey);
    const envFile = await shell.run('cat /work/.factory/env.sh');
    expect(envFile).toMatch(/ANTHROPIC_API_KEY='fiab-placeholder-/);
    expect(envFile).not.toContain(env.apiKey);

    const cancelled = await env.app.api['tasks.cancel']({ taskId });
    expect(cancelled.phase).toBe('cancelled');
    expect(cancelled.stages.find((s) => s.name === 'plan')!.status).toBe('cancelled');
    expect(cancelled.sandbox.status).toBe('running');
    const left = await shell.run('pgrep -u agent -l; echo "agent processes: $(pgrep -u agent | wc -l)"');
    expect(left).toContain('agent processes: 0');
    releaseHold();
  });

  it('a retry runs plan, build, test with one repair round, and a review that blocks the change, with the real CLI', async () => {
    const requestsBefore = env.stub.requests.length;
    await env.app.api['tasks.retry']({ taskId });
    const started = Date.now();
    const blocked = await waitForTask(env.app, taskId, (x) => ['review', 'failed', 'cancelled'].includes(x.phase), 10 * 60_000);
    console.log(
      `claude-code-sandbox: retry to the blocked review ${((Date.now() - started) / 1000).toFixed(1)} s; ` +
        blocked.stages.map((s) => `${s.name} ${s.durationMs} ms`).join(', '),
    );
    expect(blocked.stages.map((s) => `${s.name}:${s.status}`)).toEqual([
      'request:passed', 'plan:passed', 'build:passed', 'test:passed', 'review:failed', 'document:skipped',
    ]);
    expect(blocked.stages.find((s) => s.name === 'review')!.summary).toBe('review blocked the change: Blocked: greeting.txt has no test.');
    expect(blocked.error?.detail).toContain('Verdict: block');

    // The user overrides the review: it counts as passed and the document stage runs.
    await env.app.api['tasks.retry']({ taskId, overrideReview: true });
    const t = await waitForTask(env.app, taskId, (x) => ['review', 'failed', 'cancelled'].includes(x.phase), 5 * 60_000);
    const stage = (name: string) => t.stages.find((s) => s.name === name)!;
    expect(t.error, JSON.stringify(t.error)).toBeUndefined();
    expect(t.stages.map((s) => `${s.name}:${s.status}`)).toEqual([
      'request:passed', 'plan:passed', 'build:passed', 'test:passed', 'review:passed', 'document:passed',
    ]);
    expect(stage('plan').summary).toBe('Add greeting.txt with a hello line');
    expect(stage('build').summary).toBe('Added greeting.txt and committed it.');
    expect(stage('test').summary).toBe('1 passed, 0 failed after 1 repair round');
    expect(stage('review').summary).toBe('overridden by the user: review blocked the change: Blocked: greeting.txt has no test.');
    expect(stage('document').summary).toBe('Nothing to document.');
    for (const name of ['plan', 'build', 'test', 'review', 'document']) {
      const s: StageResult = stage(name);
      expect(s.tokens?.input, `${name} tokens`).toBeGreaterThan(0);
      expect(s.costUsd, `${name} cost`).toBeGreaterThan(0);
    }
    // The test stage's log: the failing run, the pager-free git output, the repair, the passing run.
    const testLog = env.output.get(stage('test').sessionId!) ?? '';
    expect(testLog).toContain('line 100');
    expect(testLog).toContain('1 passed, 0 failed');
    const terminals = await env.app.api['terminal.list']({ taskId });
    expect(terminals.map((x) => x.title)).toEqual(expect.arrayContaining(['plan', 'build', 'test', 'test-repair', 'test (after repair 1)', 'review', 'document']));

    // Every request the guest sent went out with the real key and never carried it in the body.
    const seen = env.stub.requests.slice(requestsBefore);
    const agentRequests = seen.filter((r) => stageOfRequest(r) !== 'unknown');
    expect(new Set(agentRequests.map(stageOfRequest))).toEqual(new Set(['plan', 'build', 'test-repair', 'review', 'document']));
    expect(new Set(seen.map((r) => r.headers['x-api-key']))).toEqual(new Set([env.apiKey]));
    for (const r of seen) expect(r.rawBody).not.toContain(env.apiKey);
    for (const s of t.stages) expect(env.output.get(s.sessionId ?? '') ?? '').not.toContain(env.apiKey);
    const audit = await env.app.api['audit.list']({ sandboxId: taskId });
    expect(audit.filter((e) => e.rule === 'anthropic' && e.status === 200).length).toBeGreaterThanOrEqual(agentRequests.length);
  });

  it("the agent's commit comes back for review, and the approved branch holds one commit with its tree", async () => {
    const inGuest = await shell.run(`runuser -u agent -- git -C ${REPO} log --format='%an|%s' factory/${taskId}`);
    expect(inGuest).toContain('Factory agent|Add greeting.txt');
    await shell.close();

    const review = await env.app.api['tasks.review']({ taskId });
    // The plan and review are scratch files outside the repository: not in the returned branch.
    expect(review.files.map((f) => f.path).sort()).toEqual(['fixed.txt', 'greeting.txt']);
    expect(review.patch).toContain('+hello from the sandbox');
    // The review lists the agent's commit; Approve lands one commit of its own with the reviewed tree, on the base.
    expect(review.history?.commits.map((c) => `${c.author}|${c.message.split('\n')[0]}`)).toContain('Factory agent <agent@factory.invalid>|Add greeting.txt');
    const approved: Task = await env.app.api['tasks.approve']({ taskId });
    expect(approved.phase).toBe('approved');
    const branch = `factory/${taskId}`;
    expect(repo.git('show', `${branch}:greeting.txt`)).toBe('hello from the sandbox\n');
    const log = repo.git('log', '--format=%an|%s', branch).trim().split('\n');
    expect(log).toHaveLength(2);
    // The landed commit is the app's, named after the task the user typed; not the agent's "Add greeting.txt".
    expect(log[0]).toMatch(/\|Add greeting\.txt with a hello line$/);
    expect(log[0]).not.toMatch(/^Factory agent\|/);
    expect(log[1]).toBe('Fixture|initial');
  });

  it('destroying the sandbox finds no trace of the key in its disk or memory', async () => {
    const t = await env.app.api['tasks.destroy']({ taskId });
    expect(t.sandbox.status).toBe('destroyed');
    const report = await env.app.api['leakcheck.get']({ taskId });
    expect(report?.credentialIds).toEqual([env.credentialId]);
    expect(report?.hits).toEqual([]);
    expect(report?.verdict).toBe('clean');
    expect(fs.existsSync(env.paths.sandboxes)).toBe(true);
  });
});
