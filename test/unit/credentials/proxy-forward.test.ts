// Plain-HTTP forward requests (absolute-form, as apt sends them to its
// http_proxy) from a program in the sandbox, written byte for byte on the
// proxy's socket, against a real HTTP server on loopback that records what
// really arrived. Every refusal names why and shows in the audit and in
// onRefused; no credential or cookie ever reaches the upstream.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { EgressRule } from '../../../common/egress.js';
import { createTestCa, type TestCa } from '../../support/https.js';
import { startModelStub, type ModelStub } from '../../support/model-stub.js';
import { rawExchange, servedPaths, startEgressSandbox, startHttpUpstream, statuses, type EgressSandbox, type HttpUpstream } from './egress-harness.js';
import { REAL_ANTHROPIC } from './proxy-harness.js';

describe('forward requests through the proxy under egress rules', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let mirror: HttpUpstream;
  let sandbox: EgressSandbox | undefined;
  let rule: EgressRule;
  let at: string;
  const get = (path: string, extra = '', host = at) => `GET http://${host}${path} HTTP/1.1\r\nhost: ${host}\r\n${extra}\r\n`;

  beforeAll(async () => {
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: REAL_ANTHROPIC });
    mirror = await startHttpUpstream();
    at = `localhost:${mirror.port}`;
    rule = { name: 'test mirror', host: 'localhost', port: mirror.port, scheme: 'http', pathPrefixes: ['/debian/'], steps: ['setup'] };
  });
  afterEach(async () => {
    await sandbox?.close();
    sandbox = undefined;
  });
  afterAll(async () => {
    await mirror?.close();
    await stub?.close();
    ca?.dispose();
  });

  it('serves a pipelined sequence in order on one guest connection (as apt sends it), streaming each response back', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const before = mirror.seen.length;
    const text = await rawExchange(
      sandbox.proxy.socketPath,
      get('/debian/dists/InRelease') + get('/debian/pool/a.deb') + `HEAD http://${at}/debian/pool/b.deb HTTP/1.1\r\nhost: ${at}\r\n\r\n` + get('/debian/pool/c.deb', 'connection: close\r\n'),
    );
    expect(statuses(text)).toEqual([200, 200, 200, 200]);
    expect(servedPaths(text)).toEqual(['/debian/dists/InRelease', '/debian/pool/a.deb', '/debian/pool/c.deb']);
    const seen = mirror.seen.slice(before);
    // The proxy may send pipelined requests upstream side by side (the answers to the guest stay in order).
    expect(seen.map((s) => `${s.method} ${s.url}`).sort()).toEqual(['GET /debian/dists/InRelease', 'GET /debian/pool/a.deb', 'GET /debian/pool/c.deb', 'HEAD /debian/pool/b.deb']);
    // Host comes from the URL; the upstream's cookie never reaches the guest.
    for (const s of seen) expect(s.headers.host).toBe(at);
    expect(text).not.toMatch(/set-cookie/i);
    const entries = await sandbox.entries(4);
    expect(entries.map((e) => [e.method, e.host, e.port, e.path, e.step, e.rule, e.status])).toContainEqual(['GET', 'localhost', mirror.port, '/debian/pool/a.deb', 'setup', 'test mirror', 200]);
    expect(entries.find((e) => e.path === '/debian/pool/a.deb')!.bytesOut).toBe(Buffer.byteLength('served /debian/pool/a.deb'));
    expect(sandbox.refusals).toEqual([]);
  });

  it('reuses upstream connections across requests (a keep-alive pool)', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const before = mirror.seen.length;
    for (let i = 0; i < 3; i++) expect(statuses(await rawExchange(sandbox.proxy.socketPath, get(`/debian/k${i}`, 'connection: close\r\n')))).toEqual([200]);
    const used = new Set(mirror.seen.slice(before).map((s) => s.connection));
    expect(used.size).toBe(1);
  });

  it('refuses the second request of a pipeline when its host is unlisted, after serving the first, and sends nothing after it upstream', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const before = mirror.seen.length;
    // The first answer is still on its way when the second is refused: both reach the guest, in order.
    const text = await rawExchange(sandbox.proxy.socketPath, get('/debian/slow-first') + get('/x', '', 'unlisted.example') + get('/debian/third'));
    expect(statuses(text)).toEqual([200, 403]);
    expect(servedPaths(text)).toEqual(['/debian/slow-first']);
    expect(text).toMatch(/no egress rule for http:\/\/unlisted\.example:80/);
    expect(mirror.seen.slice(before).map((s) => s.url)).toEqual(['/debian/slow-first']);
    expect(sandbox.refusals).toEqual([expect.objectContaining({ scheme: 'http', host: 'unlisted.example', port: 80, method: 'GET', path: '/x', step: 'setup' })]);
  });

  it('never lets a credential, cookie or forwarding hint reach the upstream', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const placeholder = sandbox.anthropicAuth['x-api-key']!;
    const text = await rawExchange(
      sandbox.proxy.socketPath,
      get(
        '/debian/secret',
        `authorization: Bearer ${placeholder}\r\nproxy-authorization: Basic dXNlcjpwYXNz\r\nx-api-key: ${placeholder}\r\ncookie: session=abc\r\n` +
          `x-github-token: ghp_x\r\nx-amz-security-token: t\r\nx-session-id: s\r\nx-forwarded-for: 1.2.3.4\r\nforwarded: for=1.2.3.4\r\nx-kept: yes\r\nconnection: close\r\n`,
      ),
    );
    expect(statuses(text)).toEqual([200]);
    const seen = mirror.seen.at(-1)!;
    expect(seen.url).toBe('/debian/secret');
    expect(Object.keys(seen.headers).sort()).toEqual(['connection', 'host', 'x-kept']);
    expect(JSON.stringify(seen.headers)).not.toContain(placeholder);
  });

  it('refuses what the rules do not allow, naming why, with nothing reaching the upstream', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const before = mirror.seen.length;
    const cases: Array<[string, string, number, RegExp]> = [
      ['an unlisted host', get('/debian/x', '', 'unlisted.example'), 403, /no egress rule for http:\/\/unlisted\.example:80/],
      ['another port', get('/debian/x', '', `localhost:${mirror.port + 1}`), 403, /rules for localhost allow only http port/],
      ['an IP literal', get('/debian/x', '', `127.0.0.1:${mirror.port}`), 403, /IP literal/],
      ['a path outside the rule', get('/etc/passwd'), 403, /allows only paths under \/debian\//],
      ['a dot-dot path', get('/debian/../etc/passwd'), 403, /contains "\.\."/],
      ['an encoded dot-dot', get('/debian/%2e%2e/etc/passwd'), 403, /encoded dot, slash or backslash/],
      ['another method', `DELETE http://${at}/debian/x HTTP/1.1\r\nhost: ${at}\r\n\r\n`, 403, /does not allow method DELETE/],
      ['a Host header that disagrees with the URL', `GET http://${at}/debian/x HTTP/1.1\r\nhost: evil.example\r\n\r\n`, 400, /the Host header "evil\.example" disagrees with the URL's host localhost:\d+/],
      ['absolute-form https', `GET https://${at}/debian/x HTTP/1.1\r\nhost: ${at}\r\n\r\n`, 403, /absolute-form https:\/\/ requests are refused: tunnel with CONNECT/],
      ['user info in the URL', `GET http://user:pw@${at}/debian/x HTTP/1.1\r\nhost: ${at}\r\n\r\n`, 400, /user info/],
      ['a trailing-dot host', get('/debian/x', '', `localhost.:${mirror.port}`), 403, /ends with a dot/],
      ['a percent-encoded host', get('/debian/x', '', `local%68ost:${mirror.port}`), 403, /invalid label/],
      ['a body on a GET', get('/debian/x', 'content-length: 5\r\n') + 'hello', 400, /a GET request may not carry a body/],
      ['a chunked GET', get('/debian/x', 'transfer-encoding: chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n', 400, /a GET request may not carry a body/],
      [
        'chunked and Content-Length together (smuggling)',
        `POST http://${at}/debian/x HTTP/1.1\r\nhost: ${at}\r\ncontent-length: 40\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /debian/smuggled HTTP/1.1\r\nhost: ${at}\r\n\r\n`,
        400,
        /malformed request refused/,
      ],
    ];
    for (const [name, bytes, status, why] of cases) {
      const text = await rawExchange(sandbox.proxy.socketPath, bytes);
      expect(statuses(text), name).toEqual([status]);
      expect(text, name).toMatch(why);
    }
    expect(mirror.seen.length).toBe(before);
    expect(sandbox.refusals.map((r) => r.reason)).toHaveLength(cases.length);
    expect(sandbox.refusals.map((r) => r.host)).toContain('unlisted.example');
    const entries = await sandbox.entries(cases.length);
    expect(entries).toHaveLength(cases.length);
    for (const e of entries) expect(e.rule).toMatch(/^refused: /);
  });

  it('takes mixed case in the URL as the same host and treats the proxy itself as origin-form', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const mixed = `LocalHost:${mirror.port}`;
    expect(statuses(await rawExchange(sandbox.proxy.socketPath, get('/debian/m', 'connection: close\r\n', mixed)))).toEqual([200]);
    expect(mirror.seen.at(-1)!.headers.host).toBe(at);
    const self = await rawExchange(
      sandbox.proxy.socketPath,
      `GET http://10.0.2.100/anthropic/v1/models HTTP/1.1\r\nhost: 10.0.2.100\r\nx-api-key: ${sandbox.anthropicAuth['x-api-key']}\r\nconnection: close\r\n\r\n`,
    );
    expect(statuses(self)).toEqual([200]);
    expect(stub.requestLog.at(-1)).toMatchObject({ path: '/v1/models' });
  });

  it('refuses outside the rule\'s steps, follows setStep, and takes allowEgress from the next request on', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule], step: 'build' });
    const wrongStep = await rawExchange(sandbox.proxy.socketPath, get('/debian/s'));
    expect(wrongStep).toMatch(/rule "test mirror" does not apply in step build \(only in setup\)/);
    sandbox.proxy.allowEgress([{ name: 'build mirror', host: 'localhost', port: mirror.port, scheme: 'http', steps: ['build'] }]);
    expect(statuses(await rawExchange(sandbox.proxy.socketPath, get('/anything', 'connection: close\r\n')))).toEqual([200]);
    sandbox.proxy.setStep('test');
    expect(statuses(await rawExchange(sandbox.proxy.socketPath, get('/anything')))).toEqual([403]);
    expect(sandbox.refusals.map((r) => [r.step, r.reason])).toEqual([
      ['build', 'rule "test mirror" does not apply in step build (only in setup)'],
      ['test', 'rule "test mirror" does not apply in step test (only in setup)'],
    ]);
  });

  it('refuses a listed name that resolves to a loopback address (the address guard runs after resolution)', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule], strict: true });
    const before = mirror.seen.length;
    const text = await rawExchange(sandbox.proxy.socketPath, get('/debian/x'));
    expect(statuses(text)).toEqual([403]);
    expect(text).toMatch(/destination localhost refused: 127\.0\.0\.1 is a loopback/);
    expect(mirror.seen.length).toBe(before);
    expect(sandbox.refusals).toEqual([expect.objectContaining({ host: 'localhost', reason: expect.stringMatching(/loopback/) })]);
    expect((await sandbox.entries(1))[0]).toMatchObject({ rule: expect.stringMatching(/^refused: destination localhost refused/), status: 403 });
  });
});
