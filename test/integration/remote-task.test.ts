// A whole task on a "remote" sandbox host (libvirt behind the OpenSSH
// stand-in of test/support/remote-host.ts), as a user runs it: the host in
// Settings with its pinned key and capacity 1, a task started on it, the six
// stages, the model stub reached through the proxy socket forwarded back over
// SSH (the stub sees the real key, the guest only its placeholder, and neither
// the host's disk nor the guest's memory holds the key), a shell in the
// sandbox, a second task under "any" placed on this machine because the host
// is full, approve, destroy with no domain and no volume left on the host.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApp } from '../../main/app.js';
import { SandboxShell } from '../support/agent-app.js';
import { testImage } from '../support/image.js';
import type { ModelStub } from '../support/model-stub.js';
import { startRemoteApp, type RemoteApp } from '../support/remote-app.js';
import { startRemoteHost, type RemoteHostRig } from '../support/remote-host.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';

const KEY = `sk-ant-remote-${randomBytes(20).toString('hex')}`;
const VIRSH = 'virsh -q -c qemu:///system';

describe('a task on a remote sandbox host', () => {
  let rig: RemoteHostRig;
  let fx: RemoteApp | undefined;
  let app: FactoryApp | undefined;
  let stub: ModelStub;
  let repo: FixtureRepo;
  let output: Map<string, string>;

  beforeAll(async () => {
    await testImage();
    rig = await startRemoteHost();
    fx = await startRemoteApp({
      rig,
      key: KEY,
      capacity: 1,
      sseDelayMs: 20,
      files: {
        'README.md': '# Fixture\n',
        '.factory/pipeline.json': JSON.stringify({
          stages: {
            request:
              {
                command:
                  `curl -sS -N --fail-with-body -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" ` +
                  `-H 'content-type: application/json' -d '{"model":"claude-stub","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}' ` +
                  `| grep -c '^event: content_block_delta'; echo "placeholder=$ANTHROPIC_API_KEY"`,
              },
            build: { command: 'echo "built remotely" >> README.md && git commit -qam "remote build" && echo built' },
            test: { command: 'grep -q "built remotely" README.md && echo "tests: 1 passed"' },
          },
        }),
      },
    });
    ({ app, stub, repo, output } = fx);
  });

  afterAll(async () => {
    await fx?.dispose();
    await rig?.stop();
  });

  it('runs the pipeline on the host with keys added at home, places the next task locally, and leaves nothing there', async () => {
    const created = await app!.api['tasks.create']({ repoPath: repo.dir, title: 'Build on the remote host', host: 'rig' });
    const t = await waitForTask(app!, created.id, (x) => ['review', 'failed', 'cancelled'].includes(x.phase));
    const failedLog = t.stages.filter((s) => s.status === 'failed').map((s) => `${s.name}: ${(output.get(s.sessionId ?? '') ?? '').slice(-2000)}`).join('\n');
    expect(t.error, failedLog).toBeUndefined();
    expect(t.sandbox.host).toBe('rig');
    expect(t.stages.map((s) => `${s.name}:${s.status}`)).toEqual(['request:passed', 'plan:skipped', 'build:passed', 'test:passed', 'review:skipped', 'document:skipped']);
    const requestLog = output.get(t.stages[0]!.sessionId!) ?? '';
    expect(requestLog).toMatch(/^5\s*$/m); // five streamed deltas came back through the forwarded proxy
    expect(stub.requests.some((r) => r.headers['x-api-key'] === KEY)).toBe(true);
    expect(requestLog).toMatch(/placeholder=\S+/);
    for (const s of t.stages) expect(output.get(s.sessionId ?? '') ?? '').not.toContain(KEY);

    const domain = `fiab-${t.id}`;
    expect((await rig.exec(`${VIRSH} list --name`)).stdout).toContain(domain);

    // A person at the sandbox's shell, through the app.
    const shell = await SandboxShell.open({ app: app!, output }, t.id);
    expect(await shell.run('hostname; cat /work/repo/README.md')).toMatch(/factory-sandbox[\s\S]*built remotely/);
    await shell.close();

    // The host is at capacity (1): the next task under "any" runs on this machine.
    const second = await app!.api['tasks.create']({ repoPath: repo.dir, title: 'Anywhere', host: 'any' });
    const s2 = await waitForTask(app!, second.id, (x) => x.sandbox.status === 'running' || ['review', 'failed', 'cancelled'].includes(x.phase));
    expect(s2.sandbox.host).toBeUndefined();
    expect((await rig.exec(`${VIRSH} list --name`)).stdout).not.toContain(`fiab-${second.id}`);
    await app!.api['tasks.cancel']({ taskId: second.id }).catch(() => undefined); // it may have ended already; the checks above are the test
    await app!.api['tasks.destroy']({ taskId: second.id }).catch(() => undefined); // it may have ended already; the checks above are the test

    // Neither the host's disk (the overlay) nor the guest's memory holds the key.
    const dir = `${rig.storageDir}/sandboxes/${domain}`;
    const dump = await rig.exec(`${VIRSH} dump --memory-only ${domain} ${dir}/memory.dump && ls -s ${dir}/memory.dump && grep -c -a -F '${KEY}' ${dir}/overlay.qcow2 ${dir}/memory.dump; rm -f ${dir}/memory.dump`);
    expect(dump.stdout).toMatch(/overlay\.qcow2:0/);
    expect(dump.stdout).toMatch(/memory\.dump:0/);
    expect(Number(/^(\d+)/.exec(dump.stdout)?.[1] ?? 0)).toBeGreaterThan(100_000); // KiB: the dump is real

    const approved = await app!.api['tasks.approve']({ taskId: t.id });
    expect(approved.phase).toBe('approved');
    expect(repo.git('show', `factory/${t.id}:README.md`)).toContain('built remotely');
    const destroyed = await app!.api['tasks.destroy']({ taskId: t.id });
    expect(destroyed.sandbox.status).toBe('destroyed');
    expect((await rig.exec(`${VIRSH} list --all --name`)).stdout).not.toContain(domain);
    expect((await rig.exec(`ls -A ${rig.storageDir}/sandboxes`)).stdout).toBe('');
  });

  it('a connection killed mid-stage marks the task lost, and once the host is back nothing is left running there', async () => {
    const slow = await makeRepo({ files: { 'README.md': '# Slow\n', '.factory/pipeline.json': JSON.stringify({ stages: { request: { command: 'echo started; sleep 900' } } }) } });
    try {
      const created = await app!.api['tasks.create']({ repoPath: slow.dir, title: 'Cut off', host: 'rig' });
      const running = await waitForTask(app!, created.id, (x) => x.stages[0]?.status === 'running' || ['review', 'failed', 'cancelled'].includes(x.phase));
      expect(running.stages[0]?.status).toBe('running');
      const domain = `fiab-${created.id}`;
      expect((await rig.exec(`${VIRSH} list --name`)).stdout).toContain(domain);
      await rig.dropConnections();
      const lost = await waitForTask(app!, created.id, (x) => x.sandbox.status === 'lost');
      expect(lost.sandbox.status).toBe('lost');
      // The app connects again by itself and removes what the lost sandbox left on the host.
      await expect.poll(async () => (await rig.exec(`${VIRSH} list --all --name`)).stdout, { timeout: 120_000, interval: 2000 }).not.toContain(domain);
      expect((await rig.exec(`ls -A ${rig.storageDir}/sandboxes`)).stdout).toBe('');
    } finally {
      slow.cleanup();
    }
  });
});
