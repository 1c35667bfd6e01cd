// Request smuggling through the credential proxy, tried the way a program in the
// sandbox would: an allowed request whose body carries the start of a second
// request, framed so that the proxy drops the framing (Transfer-Encoding on a
// GET; a Content-Length named in Connection:) and the upstream reads the body
// as the head of a new request that swallows the proxy's next, credentialed one.
// Verdicts come from the upstreams themselves: the request log of their own
// HTTP parser and the refs of the upstream git repository, never the proxy's
// replies.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GitServer } from '../../support/git-server.js';
import type { ParsedRequest, TestCa } from '../../support/https.js';
import type { ModelStub } from '../../support/model-stub.js';
import { guestRequest, receivePackBody, startSandboxProxy, type GuestRequest, startUpstreams, stopUpstreams } from './proxy-harness.js';

/** How the guest frames the body of its first, innocent-looking request. */
const VARIANTS: Array<{ name: string; frame: (body: string) => GuestRequest['headers'] }> = [
  { name: 'Transfer-Encoding: chunked on a GET', frame: () => ({ 'transfer-encoding': 'chunked' }) },
  { name: 'Content-Length named in Connection:', frame: (body) => ({ connection: 'keep-alive, content-length', 'content-length': String(Buffer.byteLength(body)) }) },
];

const entries = (log: ParsedRequest[], from: number) => log.slice(from).map(({ method, path, auth }) => ({ method, path, auth }));

describe('request smuggling through the credential proxy', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let gitServer: GitServer;
  let repoCount = 0;

  beforeAll(async () => {
    ({ ca, stub, gitServer } = await startUpstreams());
  });
  afterAll(() => stopUpstreams({ ca, stub, gitServer }));

  describe.each(VARIANTS)('$name', ({ frame }) => {
    it('a model route: a smuggled DELETE /v1/organizations/everything never reaches the upstream with the real key', async () => {
      const sandbox = await startSandboxProxy({ modelUrl: stub.url, ca: ca.cert });
      try {
        const before = stub.requestLog.length;
        // The smuggled head ends inside a header value, so the proxy's next request
        // line becomes that value and its headers (the real x-api-key) become the DELETE's.
        const smuggled = 'DELETE /v1/organizations/everything HTTP/1.1\r\nx-swallow: ';
        const { proxy, anthropicAuth } = sandbox;
        await guestRequest(proxy.socketPath, { path: '/anthropic/v1/models', headers: { ...anthropicAuth, ...frame(smuggled) }, body: smuggled });
        await guestRequest(proxy.socketPath, { path: '/anthropic/v1/models', headers: anthropicAuth });
        const seen = entries(stub.requestLog, before);
        expect(seen.filter((r) => r.method === 'DELETE')).toEqual([]);
        // Exactly what the rules allow: the plain GET, once. The framed GET is refused.
        expect(seen).toEqual([{ method: 'GET', path: '/v1/models', auth: ['x-api-key'] }]);
      } finally {
        await sandbox.close();
      }
    });

    it.each([
      { push: false, label: 'push off' },
      { push: true, label: 'push on' },
    ])('the git route ($label): a smuggled git-receive-pack cannot move refs/heads/main', async ({ push }) => {
      const name = `smuggle${++repoCount}`;
      const bare = gitServer.createRepo(name);
      const sandbox = await startSandboxProxy({ modelUrl: stub.url, gitServerUrl: gitServer.url, repoUrl: gitServer.repoUrl(name), allowPush: push, ca: ca.cert });
      try {
        const refsBefore = gitServer.refs(name);
        const before = gitServer.requestLog.length;
        const { proxy, gitAuth } = sandbox;
        const smuggled = `POST /${name}.git/git-receive-pack HTTP/1.1\r\nx-swallow: `;
        // 1: an allowed fetch advertisement, carrying the head of a receive-pack request.
        await guestRequest(proxy.socketPath, { path: `/git/${name}.git/info/refs?service=git-upload-pack`, headers: { ...gitAuth, ...frame(smuggled) }, body: smuggled });
        // 2: an allowed upload-pack POST whose body is really a receive-pack command list and pack.
        const { body } = receivePackBody(bare, 'refs/heads/main');
        await guestRequest(proxy.socketPath, {
          method: 'POST',
          path: `/git/${name}.git/git-upload-pack`,
          headers: { ...gitAuth, 'content-type': 'application/x-git-receive-pack-request' },
          body,
        });
        expect(gitServer.refs(name)).toEqual(refsBefore);
        const seen = entries(gitServer.requestLog, before);
        expect(seen.filter((r) => r.path.includes('receive-pack'))).toEqual([]);
        expect(seen).toEqual([{ method: 'POST', path: `/${name}.git/git-upload-pack`, auth: ['authorization'] }]);
      } finally {
        await sandbox.close();
      }
    });
  });
});
