// The proxy keeps upstream connections alive and reuses them. These tests show
// what makes that safe: whatever one request does — refused, aborted by the
// guest mid-body, cut off or over-answered by the upstream — the next request
// on the pool reaches the upstream intact and exactly once, and its answer is
// its own. The upstream is a real HTTPS server (test CA) whose misbehaving
// routes are written here, since no well-behaved server does these things.
import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../../support/https.js';
import { guestRequest, REAL_ANTHROPIC, startSandboxProxy, type SandboxProxy } from './proxy-harness.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe('upstream connection reuse', () => {
  let ca: TestCa;
  let upstream: TestHttpsServer;
  let sandbox: SandboxProxy;
  let auth: Record<string, string>;
  let seq = 0;

  beforeAll(async () => {
    ca = createTestCa();
    upstream = await startHttpsServer(ca, (req, res) => {
      const url = req.url ?? '';
      if (url.startsWith('/v1/early')) {
        // Answers before reading the body; Node's server then reads and drops the rest.
        res.writeHead(413, { 'content-type': 'text/plain', 'content-length': 9 });
        res.end('too long\n');
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (url.startsWith('/v1/truncate')) {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100 });
          res.write('only ten!\n', () => res.socket?.destroy());
          return;
        }
        if (url.startsWith('/v1/ambiguous')) {
          // A response framed two ways at once, written raw: the proxy must not pick one.
          req.socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nextra');
          return;
        }
        if (url.startsWith('/v1/double')) {
          // A second, unasked-for response right behind the first on the same connection.
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 3 });
          res.end('ok\n', () => res.socket?.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 17\r\n\r\n{"forged":"yes"}\n'));
          return;
        }
        const text = JSON.stringify({ path: url, method: req.method, bytes: body.length, sha: sha(body), key: req.headers['x-api-key'] === REAL_ANTHROPIC });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    });
    sandbox = await startSandboxProxy({ modelUrl: upstream.url, ca: ca.cert });
    auth = sandbox.anthropicAuth;
  });
  afterAll(async () => {
    await sandbox?.close();
    await upstream?.close();
    ca?.dispose();
  });

  /** Two echo requests after the disturbance: each arrives once, intact, answered with its own reply, and the pool is in use. */
  async function nextRequestsAreIntact(): Promise<void> {
    const from = upstream.requestLog.length;
    const connections: number[] = [];
    for (let i = 0; i < 2; i++) {
      const body = `{"n":${++seq},"pad":"${'x'.repeat(5000)}"}`;
      const reply = await guestRequest(sandbox.proxy.socketPath, { method: 'POST', path: `/anthropic/v1/echo?n=${seq}`, headers: { ...auth, 'content-type': 'application/json' }, body });
      expect(reply.status).toBe(200);
      expect(JSON.parse(reply.body)).toEqual({ path: `/v1/echo?n=${seq}`, method: 'POST', bytes: body.length, sha: sha(body), key: true });
      const mine = upstream.requestLog.filter((r) => r.path === `/v1/echo?n=${seq}`);
      expect(mine).toHaveLength(1);
      connections.push(mine[0]!.connection);
    }
    expect(upstream.requestLog.slice(from).map((r) => r.path)).toEqual([`/v1/echo?n=${seq - 1}`, `/v1/echo?n=${seq}`]);
    // The second follow-up rode on the first one's connection: the pool was really used.
    expect(connections[1]).toBe(connections[0]);
  }

  it('is in use: sequential requests share one upstream connection', async () => {
    await nextRequestsAreIntact();
  });

  it('a request the proxy refuses for its framing poisons nothing', async () => {
    const smuggled = 'POST /v1/echo?n=smuggled HTTP/1.1\r\ncontent-length: 40\r\n\r\n';
    const refused = await guestRequest(sandbox.proxy.socketPath, { path: '/anthropic/v1/echo?n=get', headers: { ...auth, 'transfer-encoding': 'chunked' }, body: smuggled });
    expect(refused.status).toBe(400);
    expect(upstream.requestLog.some((r) => r.path.includes('smuggled') || r.path.includes('n=get'))).toBe(false);
    await nextRequestsAreIntact();
  });

  it('a guest that stops mid-body (Content-Length) poisons nothing: the half-sent upstream request is dropped', async () => {
    const before = upstream.requestLog.length;
    const s = net.connect(sandbox.proxy.socketPath);
    s.on('error', () => undefined);
    s.write(`POST /anthropic/v1/echo?n=aborted HTTP/1.1\r\nhost: 10.0.2.100\r\nx-api-key: ${auth['x-api-key']}\r\ncontent-length: 100000\r\n\r\n${'y'.repeat(2000)}`);
    // Wait until the upstream has the request's head, so a half-written request really exists there.
    for (let i = 0; i < 200 && upstream.requestLog.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(upstream.requestLog.slice(before).map((r) => r.path)).toEqual(['/v1/echo?n=aborted']);
    s.destroy();
    await new Promise((r) => setTimeout(r, 50));
    await nextRequestsAreIntact();
  });

  it('a chunked body that turns malformed mid-way poisons nothing', async () => {
    const before = upstream.requestLog.length;
    const reply = await new Promise<string>((resolve) => {
      const s = net.connect(sandbox.proxy.socketPath);
      let text = '';
      s.on('data', (c: Buffer) => (text += c.toString()));
      s.on('error', () => undefined);
      s.on('close', () => resolve(text));
      s.write(`POST /anthropic/v1/echo?n=badchunk HTTP/1.1\r\nhost: 10.0.2.100\r\nx-api-key: ${auth['x-api-key']}\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n`);
      setTimeout(() => s.write('zz\r\nPOST /v1/echo?n=smuggled HTTP/1.1\r\n\r\n'), 100);
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400 Bad Request[\s\S]*Invalid character in chunk size/);
    expect(upstream.requestLog.slice(before).map((r) => r.path)).toEqual(['/v1/echo?n=badchunk']);
    await nextRequestsAreIntact();
  });

  it('an upstream that answers before reading the body poisons nothing', async () => {
    const reply = await guestRequest(sandbox.proxy.socketPath, { method: 'POST', path: '/anthropic/v1/early', headers: auth, body: 'z'.repeat(200_000) });
    expect(reply.status).toBe(413);
    await nextRequestsAreIntact();
  });

  it('an upstream response cut short reaches the guest as a failure, never as a complete body, and poisons nothing', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const req = http.request({ socketPath: sandbox.proxy.socketPath, method: 'POST', path: '/anthropic/v1/truncate', headers: { ...auth, 'content-length': 0 } }, (res) => {
        let got = '';
        res.on('data', (c: Buffer) => (got += c.toString()));
        res.on('end', () => resolve(`complete: ${got}`));
        res.on('error', (err) => resolve(`failed: ${err.message} after ${JSON.stringify(got)}`));
      });
      req.on('error', (err) => resolve(`failed: ${err.message}`));
      req.end();
    });
    expect(outcome).toMatch(/^failed: /);
    await nextRequestsAreIntact();
  });

  it('an upstream response framed two ways at once is refused with a 502, and poisons nothing', async () => {
    const reply = await guestRequest(sandbox.proxy.socketPath, { method: 'POST', path: '/anthropic/v1/ambiguous', headers: { ...auth, 'content-length': '0' } });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatch(/upstream localhost:\d+ failed: .*Transfer-Encoding/i);
    await nextRequestsAreIntact();
  });

  it('an upstream that sends an unasked-for second response cannot answer the next request', async () => {
    const reply = await guestRequest(sandbox.proxy.socketPath, { method: 'POST', path: '/anthropic/v1/double', headers: { ...auth, 'content-length': '0' } });
    expect(reply.body).toBe('ok\n');
    await new Promise((r) => setTimeout(r, 50));
    await nextRequestsAreIntact();
  });
});
