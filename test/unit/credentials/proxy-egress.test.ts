// A program in the sandbox tunnels through its proxy with CONNECT (HTTPS_PROXY)
// to a real HTTPS server on loopback with a test-CA certificate, and tries every
// way around the egress rules. Each refusal names why and shows in the audit
// and in onRefused; nothing refused reaches the upstream.
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { EgressRule } from '../../../common/egress.js';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../../support/https.js';
import { startModelStub, type ModelStub } from '../../support/model-stub.js';
import { connectVia, rawExchange, startEgressSandbox, statuses, type EgressSandbox } from './egress-harness.js';
import { REAL_ANTHROPIC } from './proxy-harness.js';

/** Speaks TLS through an open tunnel, verifying the upstream against the test CA, and GETs `path`. */
function tlsGet(socket: import('node:net').Socket, ca: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const t = tls.connect({ socket, ca, servername: 'localhost' }, () => t.write(`GET ${path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n`));
    let text = '';
    t.on('data', (c: Buffer) => (text += c.toString()));
    t.on('end', () => resolve(text));
    t.on('error', reject);
  });
}

describe('CONNECT through the proxy under egress rules', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let upstream: TestHttpsServer;
  let sandbox: EgressSandbox | undefined;
  let rule: EgressRule;

  beforeAll(async () => {
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: REAL_ANTHROPIC });
    upstream = await startHttpsServer(ca, (_req, res) => res.end('registry says hi'));
    rule = { name: 'test registry', host: 'localhost', port: upstream.port, scheme: 'https', steps: ['setup', 'build'] };
  });
  afterEach(async () => {
    await sandbox?.close();
    sandbox = undefined;
  });
  afterAll(async () => {
    await upstream?.close();
    await stub?.close();
    ca?.dispose();
  });

  it('tunnels to a listed host:port in a step of its rule, and audits step, host, port, bytes each way and the rule', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const c = await connectVia(sandbox.proxy.socketPath, `localhost:${upstream.port}`);
    expect(c.status).toBe(200);
    expect(await tlsGet(c.socket!, ca.cert, '/pkg')).toMatch(/registry says hi$/);
    const [entry] = await sandbox.entries(1);
    expect(entry).toMatchObject({ method: 'CONNECT', host: 'localhost', port: upstream.port, step: 'setup', rule: 'test registry', status: 200 });
    expect(entry!.bytesIn).toBeGreaterThan(200); // the guest's TLS handshake and request
    expect(entry!.bytesOut).toBeGreaterThan(200); // the certificate chain and the answer
    expect(sandbox.refusals).toEqual([]);
  });

  it('refuses what the rules do not list, naming why, with nothing reaching the upstream', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule, { name: 'npm', host: '*.npmjs.org', port: 443, scheme: 'https' }] });
    const before = upstream.requestLog.length;
    const cases: Array<[string, RegExp]> = [
      ['unlisted.example:443', /no egress rule for https:\/\/unlisted\.example:443/],
      [`localhost:${upstream.port + 1}`, new RegExp(`no egress rule for https://localhost:${upstream.port + 1} \\(rules for localhost allow only https port ${upstream.port}\\)`)],
      [`127.0.0.1:${upstream.port}`, /IP literal/],
      [`[::1]:${upstream.port}`, /IP literal/],
      [`2130706433:${upstream.port}`, /IP literal/],
      ['evilnpmjs.org:443', /no egress rule for https:\/\/evilnpmjs\.org:443/],
      ['registry.npmjs.org.evil.com:443', /no egress rule for https:\/\/registry\.npmjs\.org\.evil\.com:443/],
      [`localhost.:${upstream.port}`, /ends with a dot/],
      [`local%68ost:${upstream.port}`, /invalid label/],
      ['localhost:0443', /no leading zeros/],
      ['localhost:65536', /not a port/],
      ['localhost', /is not host:port/],
    ];
    for (const [target, why] of cases) {
      const c = await connectVia(sandbox.proxy.socketPath, target);
      expect(c.status, target).toBeGreaterThanOrEqual(400);
      expect(c.body, target).toMatch(why);
    }
    expect(upstream.requestLog.length).toBe(before);
    const entries = await sandbox.entries(cases.length);
    expect(entries).toHaveLength(cases.length);
    for (const e of entries) expect(e.rule).toMatch(/^refused: /);
    expect(sandbox.refusals).toHaveLength(cases.length);
    expect(sandbox.refusals[0]).toMatchObject({ sandboxId: 'sb-attack', step: 'setup', scheme: 'https', host: 'unlisted.example', port: 443, method: 'CONNECT', reason: 'no egress rule for https://unlisted.example:443' });
  });

  it('takes mixed case as the same host name', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const c = await connectVia(sandbox.proxy.socketPath, `LocalHost:${upstream.port}`);
    expect(c.status).toBe(200);
    c.socket!.destroy();
    expect((await sandbox.entries(1))[0]).toMatchObject({ host: 'localhost', rule: 'test registry' });
  });

  it('refuses a listed host outside the steps of its rule, and follows setStep both ways', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule], step: 'request' });
    const refused = await connectVia(sandbox.proxy.socketPath, `localhost:${upstream.port}`);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatch(/rule "test registry" does not apply in step request \(only in setup, build\)/);
    sandbox.proxy.setStep('build');
    const allowed = await connectVia(sandbox.proxy.socketPath, `localhost:${upstream.port}`);
    expect(allowed.status).toBe(200);
    allowed.socket!.destroy();
    sandbox.proxy.setStep('test');
    expect((await connectVia(sandbox.proxy.socketPath, `localhost:${upstream.port}`)).status).toBe(403);
    const entries = await sandbox.entries(3);
    expect(entries.map((e) => [e.step, e.status])).toEqual(expect.arrayContaining([['request', 403], ['build', 200], ['test', 403]]));
    expect(sandbox.refusals.map((r) => r.step)).toEqual(['request', 'test']);
  });

  it('keeps the credentialed routes whatever the step', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [] });
    sandbox.proxy.setStep('review');
    const reply = await rawExchange(
      sandbox.proxy.socketPath,
      `GET /anthropic/v1/models HTTP/1.1\r\nhost: 10.0.2.100\r\nx-api-key: ${sandbox.anthropicAuth['x-api-key']}\r\nconnection: close\r\n\r\n`,
    );
    expect(statuses(reply)).toEqual([200]);
  });

  it('lets allowEgress take effect for the next CONNECT', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [] });
    expect((await connectVia(sandbox.proxy.socketPath, `localhost:${upstream.port}`)).status).toBe(403);
    sandbox.proxy.allowEgress([{ name: 'added later', host: 'localhost', port: upstream.port, scheme: 'https' }]);
    const c = await connectVia(sandbox.proxy.socketPath, `localhost:${upstream.port}`);
    expect(c.status).toBe(200);
    c.socket!.destroy();
    expect(() => sandbox!.proxy.allowEgress([{ name: 'bad', host: '169.254.169.254', port: 80, scheme: 'https' }])).toThrow(/IP literal/);
  });

  it('refuses a listed name that resolves to a loopback address (the address guard runs on every destination)', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule], strict: true });
    const before = upstream.requestLog.length;
    const c = await connectVia(sandbox.proxy.socketPath, `localhost:${upstream.port}`);
    expect(c.status).toBe(403);
    expect(c.body).toMatch(/destination localhost refused: 127\.0\.0\.1 is a loopback/);
    expect(upstream.requestLog.length).toBe(before);
    expect(sandbox.refusals).toEqual([expect.objectContaining({ host: 'localhost', reason: expect.stringMatching(/loopback/) })]);
    expect((await sandbox.entries(1))[0]).toMatchObject({ rule: expect.stringMatching(/^refused: destination localhost refused/), status: 403 });
  });

  it('refuses a CONNECT that carries a body before any tunnel opens, and reports it', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const text = await rawExchange(
      sandbox.proxy.socketPath,
      `CONNECT localhost:${upstream.port} HTTP/1.1\r\nhost: localhost:${upstream.port}\r\ncontent-length: 5\r\n\r\nhello`,
    );
    expect(statuses(text)).toEqual([400]);
    expect(text).toMatch(/a CONNECT request may not carry a body/);
    expect(sandbox.refusals).toEqual([expect.objectContaining({ method: 'CONNECT', host: 'localhost', port: upstream.port })]);
  });
});
