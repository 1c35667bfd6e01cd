// A user runs tasks on an ordinary Node repository with the command agent,
// through the whole app with real parts: the real base image under QEMU, the
// real credential proxy with its egress policy, the real npm registry (the only
// network this machine has), real `npm ci` and `node --test`. Setup installs
// through the proxy (npm warning of no config key it does not know, its
// node-gyp set to build against the installed headers); the test stage runs
// the real tests and reports their counts; the second task on the same commit
// boots on the cached layer and skips setup; another commit (its files, not
// only its lockfile) makes a new layer. Debian packages through the proxy (gcc
// and make, only Debian's hosts reached) are proven by uthash's shape in
// real-corpus.test.ts, and that any changed file, the lockfile included,
// changes the layer's key by environment-plan.test.ts on real git.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import type { FactoryApp } from '../../main/app.js';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import { SandboxShell } from '../support/agent-app.js';
import { egressRulesForThisNetwork } from '../support/egress-network.js';
import { testImage } from '../support/image.js';
import { requireSecretService } from '../support/keyring.js';
import { NODE_TESTS, makeFailingCommit, makeNodeProject } from '../support/project-fixtures.js';
import type { FixtureRepo } from '../support/repo.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { waitForTask } from '../support/wait-for-task.js';

const ended = (t: Task) => ['review', 'failed', 'cancelled', 'interrupted'].includes(t.phase);
// A plan or review stage that tries the npm registry: refused by the default rules (setup and build only).
const TRY_REGISTRY = 'code=$(curl -sS -o /dev/null -w "%{http_code}" https://registry.npmjs.org/is-number 2>&1); echo "registry: $code"; true';

let env: TestApp | undefined;
let app: FactoryApp;
let output: Map<string, string>;
let local: http.Server;
let localPort = 0;
const repos: FixtureRepo[] = [];

async function runTask(repo: FixtureRepo, title: string, baseRef?: string): Promise<Task> {
  const created = await app.api['tasks.create']({ repoPath: repo.dir, title, agent: 'command', ...(baseRef ? { baseRef } : {}) });
  return waitForTask(app, created.id, ended, 15 * 60_000);
}

function stage(t: Task, name: string) {
  return t.stages.find((s) => s.name === name)!;
}

beforeAll(async () => {
  requireSecretService();
  await testImage();
  // A web server on this machine's loopback that no rule lists: the destination a user allows from a refusal.
  local = http.createServer((_req, res) => res.end('hello from an allowed host\n'));
  await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
  localPort = (local.address() as AddressInfo).port;
  const egressRules = await egressRulesForThisNetwork();
  env = await startTestApp('fenv-', (paths) => ({
    credentials: new CredentialBroker({
      paths,
      secrets: new KeychainStore({ service: `factory-in-a-box-env-${randomBytes(4).toString('hex')}` }),
      // TEST ONLY: the loopback server above is reachable by the name "localhost" once a rule allows it.
      allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
    }),
    settings: { maxParallelTasks: 1, egressRules },
  }));
  ({ app, output } = env);
}, 10 * 60_000);

afterAll(async () => {
  await env?.dispose();
  await new Promise((r) => local?.close(r));
  for (const r of repos) r.cleanup();
});

describe('a Node project with a real dependency and a node --test suite', () => {
  let repo: FixtureRepo;
  let first: Task;

  it('sets up through the proxy, runs the real tests and reports their counts', async () => {
    repo = await makeNodeProject({
      extra: { '.factory/pipeline.json': JSON.stringify({ stages: { plan: { command: TRY_REGISTRY }, review: { command: TRY_REGISTRY } } }) },
    });
    repos.push(repo);
    first = await runTask(repo, 'Run the tests');
    expect(first.phase, JSON.stringify(first.error)).toBe('review');
    expect(first.setup).toMatchObject({ status: 'passed', source: 'detected', layer: { reused: false } });
    expect(first.setup!.lines.join('\n')).toMatch(/Node 22\./);
    const setupLog = output.get(first.setup!.sessionId!) ?? '';
    expect(setupLog).toMatch(/npm ci/);
    expect(setupLog).toMatch(/added \d+ package/);
    // npm 11.2 and later warn about keys of npmrc they do not know (nodedir was one).
    expect(setupLog).not.toMatch(/Unknown \w+ config/);
    const test = stage(first, 'test');
    expect(test.status).toBe('passed');
    expect(test.summary).toMatch(/3 passed/);
    expect(output.get(test.sessionId!) ?? '').toContain(NODE_TESTS[0]);
  });

  it('reached only allow-listed destinations; plan and review were refused the registry', async () => {
    const audit = await app.api['audit.list']({ sandboxId: first.id });
    const egress = audit.filter((e) => e.method === 'CONNECT' || /^https?:/.test(e.path) || e.host.includes('npmjs'));
    const allowed = egress.filter((e) => !e.rule.startsWith('refused'));
    expect(allowed.length).toBeGreaterThan(0);
    for (const e of allowed) expect(e.host).toMatch(/^registry\.npmjs\.org(:443)?$/);
    const refused = egress.filter((e) => e.rule.startsWith('refused'));
    const steps = new Set(refused.map((e) => (e as { step?: string }).step));
    expect(steps.has('plan')).toBe(true);
    expect(steps.has('review')).toBe(true);
    expect(output.get(stage(first, 'plan').sessionId!) ?? '').toMatch(/registry: 000|CONNECT tunnel failed/);
    const task = await app.api['tasks.get']({ taskId: first.id });
    expect(task.egress?.refusals.some((r) => r.host === 'registry.npmjs.org' && r.step === 'plan')).toBe(true);
  });

  it('refuses an unlisted host, shows it on the task, and lets it through once allowed for the task', async () => {
    const shell = await SandboxShell.open({ app, output }, first.id);
    // The node-gyp of the installed npm would build a native addon against the installed headers, never download them:
    // in a shell (an SSH session) and in an agent command (as setup and stages run, from an empty environment).
    const gypOptions = 'const g = require("/usr/local/lib/node_modules/npm/node_modules/node-gyp")(); g.parseArgv(["node", "node-gyp", "rebuild"]); console.log("nodedir=" + g.opts.nodedir)';
    expect(await shell.run(`node -e '${gypOptions}'; ls /usr/local/include/node/common.gypi`)).toMatch(/^nodedir=\/usr\/local\r?\n\/usr\/local\/include\/node\/common\.gypi\s*$/);
    const asAgent = await app.api['tasks.exec']({ taskId: first.id, argv: ['node', '-e', gypOptions] });
    expect(Buffer.from(asAgent.stdout, 'base64').toString('utf8')).toBe('nodedir=/usr/local\n');
    const curl = `curl -sS -x http://10.0.2.100:80 http://localhost:${localPort}/ 2>&1`;
    expect(await shell.run(curl)).toMatch(/refused|403/);
    const refused = await waitForTask(app, first.id, (t) => !!t.egress?.refusals.some((r) => r.host === 'localhost' && r.port === localPort), 30_000);
    const refusal = refused.egress!.refusals.find((r) => r.host === 'localhost')!;
    expect(refusal.scheme).toBe('http');
    await app.api['egress.allow']({ taskId: first.id, scope: 'task', rule: { name: 'local test server', host: 'localhost', port: localPort, scheme: 'http' } });
    expect(await shell.run(curl)).toContain('hello from an allowed host');
    await shell.close();
    const after = await app.api['tasks.get']({ taskId: first.id });
    expect(after.egress?.allowed.some((r) => r.host === 'localhost')).toBe(true);
    await app.api['tasks.destroy']({ taskId: first.id });
  });

  it('the second task on the unchanged commit boots on the cached layer and skips setup', async () => {
    const second = await runTask(repo, 'Run the tests again');
    expect(second.phase, JSON.stringify(second.error)).toBe('review');
    expect(second.setup).toMatchObject({ status: 'skipped', layer: { id: first.setup!.layer!.id, reused: true } });
    expect(stage(second, 'test').summary).toMatch(/3 passed/);
    await app.api['tasks.destroy']({ taskId: second.id });
  });

  it('a failing test fails the test stage and names the test; its commit sets up its own layer', async () => {
    makeFailingCommit(repo);
    const failing = await runTask(repo, 'Run the failing tests');
    expect(failing.phase).toBe('failed');
    // Setup may run any file of the repository: other files, another layer.
    expect(failing.setup).toMatchObject({ status: 'passed', layer: { reused: false } });
    expect(failing.setup!.layer!.id).not.toBe(first.setup!.layer!.id);
    const test = stage(failing, 'test');
    expect(test.status).toBe('failed');
    expect(test.summary).toMatch(/2 passed, 1 failed/);
    expect(test.summary).toContain(NODE_TESTS[2]);
    const layers = await app.api['layers.list']({});
    expect(layers.filter((l) => l.repo === first.repoPath).length).toBe(2);
    await app.api['tasks.destroy']({ taskId: failing.id });
  });
});
