// A guest hides a request's framing behind more header lines than Node's parser
// keeps: the parser still reads the body by the Transfer-Encoding that comes
// after ~1,000 other headers, but leaves it out of rawHeaders, so a proxy that
// frames from rawHeaders sees no body and would pass the body upstream raw,
// where the upstream reads it as a second request past every rule. The warm
// keep-alive pool and a body that ends late are what let those bytes leave.
// Verdicts come from the upstreams' own request logs and git refs.
import type http from 'node:http';
import net from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GitServer } from '../../support/git-server.js';
import { forwardBody } from '../../../main/credentials/proxy-framing.js';
import type { TestCa } from '../../support/https.js';
import type { ModelStub } from '../../support/model-stub.js';
import { guestRequest, startSandboxProxy, startUpstreams, stopUpstreams } from './proxy-harness.js';

/** Sends a GET with `pad` filler headers, then Transfer-Encoding: chunked and `smuggled` as one chunk; the body ends 300 ms later. */
async function hiddenChunkedGet(socketPath: string, path: string, auth: Record<string, string>, smuggled: string): Promise<string> {
  let head = `GET ${path} HTTP/1.1\r\nhost: 10.0.2.100\r\n`;
  for (const [k, v] of Object.entries(auth)) head += `${k}: ${v}\r\n`;
  for (let i = 0; i < 1100; i++) head += `p${i}: 1\r\n`;
  head += 'transfer-encoding: chunked\r\n\r\n';
  const socket = net.connect(socketPath);
  let reply = '';
  socket.on('data', (d: Buffer) => (reply += d.toString('latin1')));
  socket.on('error', () => undefined);
  socket.write(`${head}${Buffer.byteLength(smuggled).toString(16)}\r\n${smuggled}\r\n`);
  await new Promise((r) => setTimeout(r, 300));
  socket.write('0\r\n\r\n');
  // The proxy's answer itself, not a fixed wait: a loaded machine may take longer than any sleep.
  await new Promise<void>((resolve) => {
    const done = () => resolve();
    const timer = setTimeout(done, 15_000);
    const look = () => {
      if (!reply.includes('\r\n\r\n')) return;
      clearTimeout(timer);
      done();
    };
    socket.on('data', look);
    socket.once('close', () => {
      clearTimeout(timer);
      done();
    });
    look();
  });
  socket.destroy();
  return reply;
}

describe('framing hidden behind a flood of headers', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let gitServer: GitServer;

  beforeAll(async () => {
    ({ ca, stub, gitServer } = await startUpstreams());
  });
  afterAll(() => stopUpstreams({ ca, stub, gitServer }));

  it('a model route: a DELETE smuggled in a GET body never reaches the upstream', async () => {
    const sandbox = await startSandboxProxy({ modelUrl: stub.url, ca: ca.cert });
    try {
      const { proxy, anthropicAuth } = sandbox;
      // Warm the pool, so the next request's bytes go out on a ready connection.
      expect((await guestRequest(proxy.socketPath, { path: '/anthropic/v1/models', headers: anthropicAuth })).status).toBe(200);
      const before = stub.requestLog.length;
      const reply = await hiddenChunkedGet(proxy.socketPath, '/anthropic/v1/models', anthropicAuth, 'DELETE /v1/organizations/everything HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n');
      expect(stub.requestLog.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual([]);
      expect(reply).toMatch(/^HTTP\/1\.1 400 [^]*may not carry a body/);
    } finally {
      await sandbox.close();
    }
  });

  it('the git route with push off: a receive-pack smuggled in an info/refs GET never reaches git', async () => {
    gitServer.createRepo('flood');
    const sandbox = await startSandboxProxy({ modelUrl: stub.url, gitServerUrl: gitServer.url, repoUrl: gitServer.repoUrl('flood'), ca: ca.cert });
    try {
      const { proxy, gitAuth } = sandbox;
      const advert = '/git/flood.git/info/refs?service=git-upload-pack';
      expect((await guestRequest(proxy.socketPath, { path: advert, headers: gitAuth })).status).toBe(200);
      const before = gitServer.requestLog.length;
      const smuggled = 'POST /flood.git/git-receive-pack HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-git-receive-pack-request\r\ncontent-length: 4\r\n\r\n0000';
      const reply = await hiddenChunkedGet(proxy.socketPath, advert, gitAuth, smuggled);
      expect(gitServer.requestLog.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual([]);
      expect(reply).toMatch(/^HTTP\/1\.1 400 /);
    } finally {
      await sandbox.close();
    }
  });
});

describe('forwardBody when the parser found more body than the framing said', () => {
  it.each([
    { framing: { kind: 'none' } as const, body: ['GET /x HTTP/1.1\r\n\r\n'] },
    { framing: { kind: 'length', length: 4 } as const, body: ['0000', 'GET /x HTTP/1.1\r\n\r\n'] },
  ])('writes no byte past $framing.kind framing upstream and breaks the request', async ({ framing, body }) => {
    // Stands in for a parsed guest request whose body is longer than its checked framing.
    const req = Object.assign(Readable.from(body.map((b) => Buffer.from(b))), { complete: true }) as unknown as http.IncomingMessage;
    const upstream = new PassThrough();
    const written: Buffer[] = [];
    upstream.on('data', (c: Buffer) => written.push(c));
    const destroyed = new Promise<Error | undefined>((resolve) => upstream.on('close', () => resolve(upstream.errored ?? undefined)));
    upstream.on('error', () => undefined);
    forwardBody(req, upstream, framing, undefined, () => undefined);
    const error = await destroyed;
    expect(Buffer.concat(written).toString()).toBe(framing.kind === 'length' ? '0000' : '');
    expect(error?.message).toMatch(/ran past the \d+ bytes its framing said/);
  });
});
