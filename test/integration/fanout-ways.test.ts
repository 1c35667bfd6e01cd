// A task run three ways through the whole app with real parts: QEMU, the
// credential proxy over the real keychain, the npm registry for the setup, and
// the Messages API stub (the model, which cannot run here) speaking its real wire
// format over HTTPS. One preparation: way 1 seeds a Node project with a real
// `node --test` suite, sets it up (Node, npm ci) and freezes the layer; ways 2
// and 3 boot from that layer, queued past the parallel setting (2). Each way's
// build asks the model, through its own sandbox's proxy with its own placeholder,
// for a change keyed by its task id: the stub scripts a different change per way,
// way 3's with a failing test. The comparison shows two passing ways and one
// failing, with their counts; approving way 2 lands exactly its change, and the
// other ways' sandboxes are gone.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import type { FanoutComparison } from '../../common/fanout.js';
import { GUEST_ARTIFACTS_DIR } from '../../main/pipeline/artifacts.js';
import type { RecordedRequest } from '../support/anthropic-stub.js';
import { startAgentApp, waitForTask, type AgentApp } from '../support/agent-app.js';
import { egressRulesForThisNetwork } from '../support/egress-network.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { testImage } from '../support/image.js';
import { makeNodeProject } from '../support/project-fixtures.js';
import type { FixtureRepo } from '../support/repo.js';

// The build stage: ask the model for files to write (JSON: path → content), write them, commit.
// It keeps a digest of its placeholder (never the value) as an artifact, so the test can tell the ways' placeholders apart.
const ASK_MODEL = `set -eu
body=$(printf '{"model":"claude-stub","max_tokens":256,"tools":[{"name":"noop","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"task %s"}]}' "$FACTORY_TASK_ID")
curl -sSf --noproxy '*' -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d "$body" "$ANTHROPIC_BASE_URL/v1/messages" > /tmp/reply.json
node -e '
const fs = require("fs"), path = require("path");
const reply = JSON.parse(fs.readFileSync("/tmp/reply.json", "utf8"));
const files = JSON.parse(reply.content.find((c) => c.type === "text").text);
for (const [p, text] of Object.entries(files)) { fs.mkdirSync(path.dirname(p), { recursive: true }); fs.writeFileSync(p, text); }
'
printf %s "$ANTHROPIC_API_KEY" | sha256sum | cut -c1-64 > ${GUEST_ARTIFACTS_DIR}/placeholder.sha256
git add -A && git commit -qm "the model's change"
`;

const testFile = (name: string, ok: boolean) =>
  `const { test } = require('node:test');\nconst assert = require('node:assert');\ntest(${JSON.stringify(name)}, () => { assert.strictEqual(1 + 1, ${ok ? 2 : 3}); });\n`;

/** Way N's change, as the model answers it. Way 3's adds a test that fails. */
const CHANGES: Record<number, Record<string, string>> = {
  1: { 'test/way-one.test.js': testFile('way one adds', true) },
  2: { 'test/way-two.test.js': testFile('way two adds', true), 'lib/way-two.js': 'module.exports = (a, b) => a + b;\n' },
  3: { 'test/way-three.test.js': testFile('way three adds', false) },
};

let env: AgentApp;
let repo: FixtureRepo;
const wayOfTask = new Map<string, number>();
const figures: string[] = [];

function taskIdOf(req: RecordedRequest): string {
  const messages = (req.body as { messages?: Array<{ content?: unknown }> }).messages ?? [];
  const text = String(messages[0]?.content ?? '');
  return /task (\S+)/.exec(text)?.[1] ?? '';
}

beforeAll(async () => {
  await testImage();
  repo = await makeNodeProject({
    extra: {
      '.factory/ask-model.sh': ASK_MODEL,
      '.factory/pipeline.json': JSON.stringify({ agent: 'command', stages: { build: { command: 'sh .factory/ask-model.sh' }, test: { command: 'npm test' } } }, null, 2) + '\n',
    },
  });
  env = await startAgentApp({
    stub: {
      script: (req) => {
        const way = wayOfTask.get(taskIdOf(req));
        return way ? { text: JSON.stringify(CHANGES[way]) } : { errorStatus: 400, text: `no way for ${taskIdOf(req)}` };
      },
    },
  });
  await env.app.api['settings.set']({ maxParallelTasks: 2, egressRules: await egressRulesForThisNetwork() });
}, 10 * 60_000);

afterAll(async () => {
  console.log(figures.join('\n'));
  await env?.dispose(); // the app's layers go with it (startTestApp)
  repo?.cleanup();
});

const ended = (t: Task) => ['review', 'failed', 'cancelled', 'interrupted'].includes(t.phase);

describe('a task run three ways', () => {
  it('prepares once, compares 2 passing and 1 failing way, approves way 2 alone', async () => {
    const api = env.app.api;
    // When the preparation's setup is recorded passed (what lets the ways start), the layer's memory is
    // already in the form they share: none of them makes it while the others wait.
    let sharedAtRelease: boolean | undefined;
    const stopWatching = env.app.onEvent((e) => {
      if (e.type !== 'task.updated' || e.task.fanout?.way !== 1 || e.task.setup?.status !== 'passed' || sharedAtRelease !== undefined) return;
      const warm = path.join(env.paths.cache, 'layers', e.task.setup.layer?.id ?? '-', 'warm');
      sharedAtRelease = existsSync(path.join(warm, 'ram')) && existsSync(path.join(warm, 'devices'));
    });
    const created = await api['fanout.create']({ repoPath: repo.dir, title: 'Add a test', ways: 3 });
    expect(created.ways.map((w) => w.way)).toEqual([1, 2, 3]);
    for (const w of created.ways) wayOfTask.set(w.taskId, w.way);
    // Ways 2 and 3 wait for the preparation; way 1 is it.
    expect(created.ways.slice(1).map((w) => w.state)).toEqual(['queued', 'queued']);
    const [id1, id2, id3] = created.ways.map((w) => w.taskId) as [string, string, string];

    const prepared = await waitForTask(env.app, id1, (t) => t.setup?.status === 'passed' || ended(t), 15 * 60_000);
    expect(prepared.setup?.status, JSON.stringify(prepared.error)).toBe('passed');
    expect(prepared.setup?.layer?.reused).toBe(false);
    const preparedAt = Date.parse(prepared.setup!.endedAt!);
    stopWatching();
    expect(sharedAtRelease, "the layer's shared RAM file when the ways were let go").toBe(true);

    const done = await Promise.all([id1, id2, id3].map((id) => waitForTask(env.app, id, ended, 15 * 60_000)));
    const [t1, t2, t3] = done as [Task, Task, Task];
    for (const t of [t2, t3]) {
      // Booted from the preparation's layer: no setup of their own.
      expect(t.setup?.status).toBe('skipped');
      expect(t.setup?.layer).toMatchObject({ id: prepared.setup!.layer!.id, reused: true });
      figures.push(`way ${wayOfTask.get(t.id)}: sandbox ready in ${t.sandbox.bootMs} ms (${t.sandbox.coldBootReason ? `cold: ${t.sandbox.coldBootReason}` : 'from the saved memory'}); setup of the preparation ${prepared.setup!.durationMs} ms`);
    }
    figures.push(`way 2 started ${((Date.parse(t2.stages.find((s) => s.startedAt)?.startedAt ?? '') - preparedAt) / 1000).toFixed(2)} s after the preparation ended`);
    // Way 1 too runs on the layer's memory after its setup: its sandbox was replaced by one restored from
    // the layer, whose QEMU maps the layer's shared RAM file (as ways 2 and 3 do), not the setup's own.
    const layerDir = path.join(env.paths.cache, 'layers', prepared.setup!.layer!.id);
    for (const t of [t1, t2]) {
      const [qemu] = qemuProcessesUnder(`${path.join(env.paths.sandboxes, t.id)}/`);
      expect(qemu, `the QEMU of way ${wayOfTask.get(t.id)}`).toBeDefined();
      expect(await readFile(`/proc/${qemu!.pid}/maps`, 'utf8'), `way ${wayOfTask.get(t.id)} maps the layer's RAM`).toContain(path.join(layerDir, 'warm', 'ram'));
    }
    expect(t1.sandbox).toMatchObject({ status: 'running' });

    const compared: FanoutComparison = await api['fanout.compare']({ group: created.group });
    const byWay = new Map(compared.ways.map((w) => [w.way, w]));
    expect(byWay.get(1)).toMatchObject({ state: 'review', tests: { passed: 4, failed: 0 }, preparation: true });
    expect(byWay.get(2)).toMatchObject({ state: 'review', tests: { passed: 4, failed: 0 }, preparation: false, change: { files: 2 } });
    expect(byWay.get(3)).toMatchObject({ state: 'failed', tests: { passed: 3, failed: 1 } });
    expect(byWay.get(3)!.error?.message).toBeTruthy();
    expect(byWay.get(1)!.change).toMatchObject({ files: 1 });
    expect(compared.ways.filter((w) => w.state === 'review')).toHaveLength(2);

    // Each way asked the model once through its own proxy, with its own placeholder, never the real key in the guest.
    const asked = env.stub.messageRequests();
    expect(asked.map(taskIdOf).sort()).toEqual([id1, id2, id3].sort());
    for (const r of asked) {
      expect(r.headers['x-api-key']).toBe(env.apiKey);
      expect(JSON.stringify(r.headers) + r.rawBody).not.toContain('fiab-placeholder-');
    }
    const digests = await Promise.all([id1, id2, id3].map(async (taskId) => (await api['tasks.artifact']({ taskId, name: 'placeholder.sha256' })).text.trim()));
    expect(new Set(digests).size).toBe(3);
    expect(digests.every((d) => /^[0-9a-f]{64}$/.test(d))).toBe(true);
    expect(digests).not.toContain(createHash('sha256').update(env.apiKey).digest('hex'));
    for (const taskId of [id1, id2, id3]) {
      const audit = await api['audit.list']({ sandboxId: taskId });
      const modelCalls = audit.filter((e) => e.path.includes('/v1/messages'));
      expect(modelCalls).toHaveLength(1);
      expect(modelCalls[0]!.sandboxId).toBe(taskId);
      expect(modelCalls[0]!.status).toBe(200);
    }

    const decided = await api['fanout.approve']({ group: created.group, way: 2 });
    expect(decided.ways.map((w) => w.state)).toEqual(['rejected', 'approved', 'failed']);
    const approved = await api['tasks.get']({ taskId: id2 });
    const landed = execFileSync('git', ['diff', '--name-only', `${approved.baseCommit}..${approved.decision!.branch!}`], { cwd: repo.dir, encoding: 'utf8' });
    expect(landed.trim().split('\n').sort()).toEqual(Object.keys(CHANGES[2]!).sort());
    for (const taskId of [id1, id3]) {
      const t = await api['tasks.get']({ taskId });
      expect(t.sandbox.status, taskId).toBe('destroyed');
      expect(t.decision?.branch).toBeUndefined();
    }
    // The failed way stays with its failure.
    expect((await api['tasks.get']({ taskId: id3 })).error).toBeDefined();
    // The approved way's sandbox ends too once its branch landed (no keep-after-decision here); it may end just after the answer.
    await waitForTask(env.app, id2, (t) => t.sandbox.status === 'destroyed', 2 * 60_000);
  }, 40 * 60_000);

  it('a way approved on its own, as its review panel or `factory approve` does, ends the others too', async () => {
    const api = env.app.api;
    // The repository's layer is cached now: both ways boot from it.
    const created = await api['fanout.create']({ repoPath: repo.dir, title: 'Add a test again', ways: 2 });
    for (const w of created.ways) wayOfTask.set(w.taskId, w.way);
    const [id1, id2] = created.ways.map((w) => w.taskId) as [string, string];
    await Promise.all([id1, id2].map((id) => waitForTask(env.app, id, ended, 15 * 60_000)));
    expect((await api['fanout.compare']({ group: created.group })).ways.map((w) => w.state)).toEqual(['review', 'review']);

    await api['tasks.approve']({ taskId: id1 });
    const other = await waitForTask(env.app, id2, (t) => t.phase === 'rejected' && t.sandbox.status === 'destroyed', 2 * 60_000);
    expect(other.decision?.kind).toBe('rejected');
    await waitForTask(env.app, id1, (t) => t.sandbox.status === 'destroyed', 2 * 60_000);
    expect((await api['fanout.compare']({ group: created.group })).ways.map((w) => w.state)).toEqual(['approved', 'rejected']);
  }, 30 * 60_000);
});
