// The credential broker inside the whole app: credentials stored through the
// API into the real keychain, a task whose pipeline stages (run as the agent
// user in a real sandbox) call the model-API stub and fetch from the basic-auth
// git server through the proxy (the route the app derives from the host repo's
// https origin, seeded as the sandbox repo's `upstream` remote; the task allows
// push, so a new branch under factory/<id>/ goes through and main is refused),
// the audit log of that sandbox, and the leak
// check the app runs at teardown while the VM still runs: clean, with the
// overlay and guest memory (read from the VM's QEMU process) both scanned.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CredentialEvent } from '../../common/credentials.js';
import { createFactoryApp, gitRouteForTask, type FactoryApp } from '../../main/app.js';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import { appPaths } from '../../main/state/paths.js';
import { startGitServer, type GitServer } from '../support/git-server.js';
import { createTestCa, type TestCa } from '../support/https.js';
import { testImage } from '../support/image.js';
import { requireSecretService } from '../support/keyring.js';
import { startModelStub, type ModelStub } from '../support/model-stub.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';
import { collectTerminalOutput } from '../support/test-app.js';

const ANTHROPIC_KEY = `sk-ant-app-${randomBytes(20).toString('hex')}`;
const GIT_TOKEN = `ghp_app${randomBytes(20).toString('hex')}`;

describe('credential broker in the app', () => {
  let dataDir: string;
  let ca: TestCa;
  let stub: ModelStub;
  let gitServer: GitServer;
  let repo: FixtureRepo;
  let app: FactoryApp | undefined;
  let keychain: KeychainStore;
  const events: CredentialEvent[] = [];
  const stored: string[] = [];
  let output: Map<string, string>;

  beforeAll(async () => {
    requireSecretService();
    await testImage();
    dataDir = tempDir('fca-');
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: ANTHROPIC_KEY, sseDelayMs: 20 });
    gitServer = await startGitServer(ca, { user: 'x-access-token', token: GIT_TOKEN });
    gitServer.createRepo('upstream', { 'UPSTREAM.md': 'fetched through the proxy\n' });
    repo = await makeRepo({
      files: {
        'README.md': '# Fixture\n',
        '.factory/pipeline.json': JSON.stringify({
          stages: {
            request: {
              command:
                `curl -sS -N --fail-with-body -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" ` +
                `-H 'content-type: application/json' -d '{"model":"claude-stub","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}' ` +
                `| grep -c '^event: content_block_delta'`,
            },
            build: {
              command:
                'git fetch -q upstream && git show upstream/main:UPSTREAM.md >> README.md && ' +
                // Forced, so that the proxy (not git's own fast-forward check) is what refuses it.
                '{ git push --force upstream HEAD:refs/heads/main 2>&1; true; } | tee /tmp/push-main.txt && grep -q "refused" /tmp/push-main.txt && ' +
                'git push -q upstream "HEAD:refs/heads/$(git rev-parse --abbrev-ref HEAD)/wip" && echo built',
              timeoutSeconds: 180,
            },
            test: { command: 'grep -q "fetched through the proxy" README.md && echo "tests: 1 passed"' },
          },
        }),
      },
    });
    // The host repo's origin carries a token in its URL: the app drops it and uses the stored credential.
    repo.git('remote', 'add', 'origin', gitServer.repoUrl('upstream').replace('https://', 'https://someone:not-the-token@'));
    const paths = appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir });
    keychain = new KeychainStore({ service: `factory-in-a-box-app-${randomBytes(4).toString('hex')}` });
    const broker: CredentialBroker = new CredentialBroker({
      paths,
      secrets: keychain,
      emit: (e) => events.push(e),
      upstreamCa: ca.cert,
      allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
      // As the app wires it (main/app.ts): the route from the task's host repo origin and its allowPush flag.
      gitRouteFor: async (taskId) => gitRouteForTask(broker, await app!.api['tasks.get']({ taskId })),
    });
    app = await createFactoryApp({ host: 'web', paths, credentials: broker });
    output = collectTerminalOutput(app);
    const a = await app.api['credentials.set']({ kind: 'anthropic', label: 'Anthropic (stub)', value: ANTHROPIC_KEY, target: { upstream: stub.url } });
    const g = await app.api['credentials.set']({ kind: 'git', label: 'Git (stub)', value: GIT_TOKEN, target: { upstream: gitServer.url } });
    stored.push(a.id, g.id);
  });

  afterAll(async () => {
    await app?.dispose();
    for (const id of stored) await keychain?.remove(id).catch(() => undefined); // teardown: the test may have ended before storing it
    await stub?.close();
    await gitServer?.dispose();
    ca?.dispose();
    repo?.cleanup();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs a pipeline that uses both credentials through the proxy, audits it, and finds no leak at teardown', async () => {
    const listed = await app!.api['credentials.list']({});
    expect(JSON.stringify(listed)).not.toContain(ANTHROPIC_KEY);
    expect(JSON.stringify(listed)).not.toContain(GIT_TOKEN);

    const upstreamMain = gitServer.refs('upstream')['refs/heads/main'];
    const created = await app!.api['tasks.create']({ repoPath: repo.dir, title: 'Use the model API and the git host', allowPush: true });
    expect(created.allowPush).toBe(true);
    const t = await waitForTask(app!, created.id, (x) => ['review', 'failed', 'cancelled'].includes(x.phase));
    const failedLog = t.stages.filter((s) => s.status === 'failed').map((s) => `${s.name}: ${(output.get(s.sessionId ?? '') ?? '').slice(-2000)}`).join('\n');
    expect(t.error, failedLog).toBeUndefined();
    expect(t.stages.slice(0, 4).map((s) => `${s.name}:${s.status}`)).toEqual(['request:passed', 'plan:skipped', 'build:passed', 'test:passed']);
    expect(output.get(t.stages[0]!.sessionId!)).toMatch(/^5\s*$/m); // five streamed deltas arrived
    expect(stub.requests.some((r) => r.headers['x-api-key'] === ANTHROPIC_KEY)).toBe(true);
    expect(gitServer.authSeen).toContain(`Basic ${Buffer.from(`x-access-token:${GIT_TOKEN}`).toString('base64')}`);
    for (const s of t.stages) expect(output.get(s.sessionId ?? '') ?? '').not.toContain(ANTHROPIC_KEY);
    // Push: main refused by the proxy, a new branch under factory/<id>/ created upstream.
    expect(output.get(t.stages[2]!.sessionId!)).toContain('push to refs/heads/main refused');
    const upstreamRefs = gitServer.refs('upstream');
    expect(upstreamRefs['refs/heads/main']).toBe(upstreamMain);
    expect(upstreamRefs[`refs/heads/factory/${t.id}/wip`]).toBe(t.baseCommit);
    expect(gitServer.authSeen).not.toContain(`Basic ${Buffer.from('someone:not-the-token').toString('base64')}`);

    const audit = await app!.api['audit.list']({ sandboxId: t.id });
    expect(audit.some((e) => e.rule === 'anthropic' && e.status === 200 && e.bytesOut > 0)).toBe(true);
    expect(audit.some((e) => e.rule === 'git' && e.path.endsWith('/git-upload-pack') && e.status === 200)).toBe(true);
    expect(events.some((e) => e.type === 'audit.appended')).toBe(true);

    const destroyed = await app!.api['tasks.destroy']({ taskId: t.id });
    expect(destroyed.sandbox.status).toBe('destroyed');
    const report = await app!.api['leakcheck.get']({ taskId: t.id });
    expect(report).not.toBeNull();
    console.log(`leak check at teardown: ${report!.verdict}, ${JSON.stringify(report!.scanned)}, ${report!.durationMs} ms`);
    expect(report!.scanned.map((s) => s.source).sort()).toEqual(['disk overlay', 'guest memory', 'returned work', 'serial log', 'stage logs']);
    for (const s of report!.scanned) expect(s.error, s.source).toBeUndefined();
    for (const s of report!.scanned.filter((x) => ['disk overlay', 'guest memory'].includes(x.source))) expect(s.bytes).toBeGreaterThan(1_000_000);
    // Read in place from the task's QEMU process: a dump would carry a note saying why.
    expect(report!.scanned.find((s) => s.source === 'guest memory')!.note).toBeUndefined();
    // The stages' logs and the returned work (still in quarantine: the task is in review) were read too.
    expect(report!.scanned.find((s) => s.source === 'stage logs')!.bytes).toBeGreaterThan(0);
    expect(report!.scanned.find((s) => s.source === 'returned work')!.bytes).toBeGreaterThan(0);
    expect(report!.credentialIds.sort()).toEqual([...stored].sort());
    expect(report!.hits).toEqual([]);
    expect(report!.verdict).toBe('clean');
    expect(events.some((e) => e.type === 'leakcheck.finished' && e.report.sandboxId === t.id)).toBe(true);
    // The proxy socket is gone with the sandbox.
    expect(fs.existsSync(path.join(dataDir, 'sandboxes', t.id, 'proxy.sock'))).toBe(false);
  });
});
