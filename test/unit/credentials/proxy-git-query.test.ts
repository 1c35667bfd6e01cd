// The git route's rule reads `service=` from the query of an info/refs GET. git
// http-backend keeps the LAST value of a repeated parameter (and decodes %XX in
// names); a rule that reads the first one lets a push-off sandbox ask the
// upstream for a receive-pack advertisement (with the real credential). The
// verdict is what git http-backend itself parsed, from its request log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GitServer } from '../../support/git-server.js';
import type { TestCa } from '../../support/https.js';
import type { ModelStub } from '../../support/model-stub.js';
import { guestRequest, startSandboxProxy, startUpstreams, stopUpstreams } from './proxy-harness.js';

describe('the git route reads the service the way git does', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let gitServer: GitServer;

  beforeAll(async () => {
    ({ ca, stub, gitServer } = await startUpstreams());
    gitServer.createRepo('query');
  });
  afterAll(() => stopUpstreams({ ca, stub, gitServer }));

  it.each([
    'service=git-upload-pack&service=git-receive-pack',
    'service=git-upload-pack&%73ervice=git-receive-pack',
    'service=git-upload-pack&x=1&service=git-receive-pack',
  ])('push off: info/refs?%s gets no receive-pack advertisement', async (query) => {
    const sandbox = await startSandboxProxy({ modelUrl: stub.url, gitServerUrl: gitServer.url, repoUrl: gitServer.repoUrl('query'), ca: ca.cert });
    try {
      const before = gitServer.requestLog.length;
      const reply = await guestRequest(sandbox.proxy.socketPath, { path: `/git/query.git/info/refs?${query}`, headers: sandbox.gitAuth });
      expect(gitServer.requestLog.slice(before).map((r) => r.path)).toEqual([]);
      expect(reply.body).not.toContain('# service=git-receive-pack');
      expect(reply.status).toBe(403);
    } finally {
      await sandbox.close();
    }
  });

  it('push off: the plain fetch advertisement still works', async () => {
    const sandbox = await startSandboxProxy({ modelUrl: stub.url, gitServerUrl: gitServer.url, repoUrl: gitServer.repoUrl('query'), ca: ca.cert });
    try {
      const reply = await guestRequest(sandbox.proxy.socketPath, { path: '/git/query.git/info/refs?service=git-upload-pack', headers: sandbox.gitAuth });
      expect(reply.status).toBe(200);
      expect(reply.body).toContain('# service=git-upload-pack');
    } finally {
      await sandbox.close();
    }
  });
});
