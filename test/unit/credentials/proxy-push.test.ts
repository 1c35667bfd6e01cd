// Git push through the credential proxy, judged by the upstream git server:
// its own request log and its refs. With push off nothing of receive-pack
// reaches it; with push on, a ref name git itself would refuse is refused by
// the proxy, per ref in git's report format, before anything is forwarded.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog } from '../../../main/credentials/audit.js';
import { proxyGuestForward } from '../../../main/credentials/routes.js';
import { emulateGuestfwd } from '../../support/guestfwd.js';
import { git, gitAsync, type GitServer } from '../../support/git-server.js';
import type { TestCa } from '../../support/https.js';
import type { ModelStub } from '../../support/model-stub.js';
import { guestRequest, receivePackBody, startSandboxProxy, TASK, startUpstreams, stopUpstreams } from './proxy-harness.js';

describe('git push through the proxy', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let gitServer: GitServer;

  beforeAll(async () => {
    ({ ca, stub, gitServer } = await startUpstreams());
  });
  afterAll(() => stopUpstreams({ ca, stub, gitServer }));

  it('push off: git push is refused and no receive-pack request reaches the upstream', async () => {
    gitServer.createRepo('nopush');
    const sandbox = await startSandboxProxy({ modelUrl: stub.url, gitServerUrl: gitServer.url, repoUrl: gitServer.repoUrl('nopush'), ca: ca.cert });
    const fwd = await emulateGuestfwd(proxyGuestForward(sandbox.proxy.socketPath).command);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-nopush-'));
    try {
      const before = gitServer.requestLog.length;
      const refsBefore = gitServer.refs('nopush');
      const url = sandbox.plan.gitRemoteUrl!.replace('10.0.2.100', `127.0.0.1:${fwd.port}`);
      await gitAsync(['clone', '-q', url, 'repo'], dir);
      const repo = path.join(dir, 'repo');
      git(['commit', '-q', '--allow-empty', '-m', 'x'], repo);
      await expect(gitAsync(['push', 'origin', `HEAD:refs/heads/factory/${TASK}/a`], repo)).rejects.toThrow(/git push is disabled for this task/);
      expect(gitServer.refs('nopush')).toEqual(refsBefore);
      const seen = gitServer.requestLog.slice(before).map((r) => `${r.method} ${r.path}`);
      expect(seen.length).toBeGreaterThan(0); // the clone went through
      expect(seen.filter((r) => r.includes('receive-pack'))).toEqual([]);
    } finally {
      await fwd.close();
      await sandbox.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('push on', () => {
    const pushRaw = async (name: string, ref: string) => {
      const sandbox = await startSandboxProxy({ modelUrl: stub.url, gitServerUrl: gitServer.url, repoUrl: gitServer.repoUrl(name), allowPush: true, ca: ca.cert });
      try {
        const { body, newId } = receivePackBody(path.join(gitServer.root, `${name}.git`), ref, { create: true });
        const reply = await guestRequest(sandbox.proxy.socketPath, {
          method: 'POST',
          path: `/git/${name}.git/git-receive-pack`,
          headers: { ...sandbox.gitAuth, 'content-type': 'application/x-git-receive-pack-request' },
          body,
        });
        return { reply, newId };
      } finally {
        await sandbox.close();
      }
    };

    it('a guest that hangs up in the middle of the command list leaves no request waiting in the proxy', async () => {
      gitServer.createRepo('hangup');
      const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-hangup-'));
      const audit = new AuditLog(dir);
      const sandbox = await startSandboxProxy({ modelUrl: stub.url, gitServerUrl: gitServer.url, repoUrl: gitServer.repoUrl('hangup'), allowPush: true, ca: ca.cert, extra: { audit } });
      try {
        const before = gitServer.requestLog.length;
        const s = net.connect(sandbox.proxy.socketPath);
        s.on('error', () => undefined);
        const auth = sandbox.gitAuth.authorization!;
        s.write(`POST /git/hangup.git/git-receive-pack HTTP/1.1\r\nhost: 10.0.2.100\r\nauthorization: ${auth}\r\ncontent-length: 1000\r\n\r\n0090${'0'.repeat(40)}`);
        await new Promise((r) => setTimeout(r, 100));
        s.destroy();
        const push = async () => (await audit.list('sb-attack')).filter((e) => e.rule === 'refused: git (push)');
        for (let i = 0; i < 100 && (await push()).length === 0; i++) await new Promise((r) => setTimeout(r, 20));
        // The request was settled (and logged), not left waiting for bytes that will never come.
        expect((await push()).map((e) => e.note)).toEqual(['the connection closed before the command list ended']);
        expect(gitServer.requestLog.length).toBe(before);
      } finally {
        await sandbox.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a new branch under refs/heads/factory/<task>/ reaches the upstream and is created', async () => {
      gitServer.createRepo('okref');
      const before = gitServer.requestLog.length;
      const { reply, newId } = await pushRaw('okref', `refs/heads/factory/${TASK}/ok`);
      expect(reply.body).toContain(`ok refs/heads/factory/${TASK}/ok`);
      expect(gitServer.refs('okref')[`refs/heads/factory/${TASK}/ok`]).toBe(newId);
      expect(gitServer.requestLog.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual(['POST /okref.git/git-receive-pack']);
    });

    // (A space cannot even be sent: it splits the command line, which is refused whole.)
    it.each(['a//b', '.hidden', 'x.', 'x.lock', 'x.lock/y', 'a..b', 'a@{1}', 'x/', 'a\x01b', 'a~1', 'a:b'])(
      'a branch named %j, which git refuses, is refused by the proxy in git\'s report format and never forwarded',
      async (bad) => {
        const name = `badref${Buffer.from(bad).toString('hex')}`;
        gitServer.createRepo(name);
        const ref = `refs/heads/factory/${TASK}/${bad}`;
        const before = gitServer.requestLog.length;
        const refsBefore = gitServer.refs(name);
        const { reply } = await pushRaw(name, ref);
        expect(reply.status).toBe(200);
        expect(reply.headers['content-type']).toBe('application/x-git-receive-pack-result');
        expect(reply.body).toContain(`ng ${ref} push to `);
        expect(reply.body).toMatch(/refused: not a valid ref name \(.+\)/);
        expect(gitServer.requestLog.length).toBe(before);
        expect(gitServer.refs(name)).toEqual(refsBefore);
      },
    );
  });
});
