// Ambiguous request framing sent by a program in the sandbox, byte for byte on
// the proxy's socket: every case is refused with a 400 that names the problem,
// and nothing reaches the upstream (its own request log says so).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestFraming, upstreamFramingHeaders } from '../../../main/credentials/proxy-framing.js';
import { createTestCa, type TestCa } from '../../support/https.js';
import { startModelStub, type ModelStub } from '../../support/model-stub.js';
import { guestRequest, REAL_ANTHROPIC, startSandboxProxy, type SandboxProxy } from './proxy-harness.js';
import { rawExchange } from './egress-harness.js';

/** Writes raw bytes to the proxy and reads until it closes the connection. */
async function raw(socketPath: string, bytes: string): Promise<{ status: number; text: string }> {
  const text = await rawExchange(socketPath, bytes);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text };
}

describe('request framing at the credential proxy', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let sandbox: SandboxProxy;
  let key: string;

  beforeAll(async () => {
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: REAL_ANTHROPIC });
    sandbox = await startSandboxProxy({ modelUrl: stub.url, ca: ca.cert, extra: { egress: [{ name: 'stub tunnel', host: 'localhost', port: stub.port, scheme: 'https' }] } });
    key = sandbox.anthropicAuth['x-api-key']!;
  });
  afterAll(async () => {
    await sandbox?.close();
    await stub?.close();
    ca?.dispose();
  });

  const head = (method: string, extra: string, version = '1.1') =>
    `${method} /anthropic/v1/messages HTTP/${version}\r\nhost: 10.0.2.100\r\nx-api-key: ${'KEY'}\r\ncontent-type: application/json\r\n${extra}\r\n`;
  const CASES: Array<[string, string, RegExp]> = [
    ['a GET with a chunked body', head('GET', 'transfer-encoding: chunked\r\n') + '2\r\n{}\r\n0\r\n\r\n', /a GET request may not carry a body \(Transfer-Encoding: chunked\)/],
    ['a GET with a Content-Length body', head('GET', 'content-length: 2\r\n') + '{}', /a GET request may not carry a body \(Content-Length: 2\)/],
    ['a HEAD with a body', head('HEAD', 'content-length: 2\r\n') + '{}', /a HEAD request may not carry a body/],
    ['a DELETE with a body', head('DELETE', 'content-length: 2\r\n') + '{}', /a DELETE request may not carry a body/],
    ['an OPTIONS with a chunked body', head('OPTIONS', 'transfer-encoding: chunked\r\n') + '0\r\n\r\n', /an? OPTIONS request may not carry a body/],
    ['both Transfer-Encoding and Content-Length', head('POST', 'content-length: 7\r\ntransfer-encoding: chunked\r\n') + '2\r\n{}\r\n0\r\n\r\n', /Transfer-Encoding can't be present with Content-Length/],
    ['two equal Content-Length headers', head('POST', 'content-length: 2\r\ncontent-length: 2\r\n') + '{}', /Duplicate Content-Length/],
    ['two different Content-Length headers', head('POST', 'content-length: 2\r\ncontent-length: 40\r\n') + '{}', /Duplicate Content-Length/],
    ['a Content-Length list', head('POST', 'content-length: 2, 2\r\n') + '{}', /Invalid character in Content-Length/],
    ['a signed Content-Length', head('POST', 'content-length: +2\r\n') + '{}', /Invalid character in Content-Length/],
    ['Transfer-Encoding other than plain chunked', head('POST', 'transfer-encoding: gzip, chunked\r\n') + '2\r\n{}\r\n0\r\n\r\n', /Transfer-Encoding "gzip, chunked" is not supported: only a single "chunked"/],
    ['Transfer-Encoding chunked then identity', head('POST', 'transfer-encoding: chunked, identity\r\n') + '2\r\n{}\r\n0\r\n\r\n', /Invalid `Transfer-Encoding` header value/],
    ['two Transfer-Encoding headers', head('POST', 'transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n') + '2\r\n{}\r\n0\r\n\r\n', /Transfer-Encoding/],
    ['an obs-fold continuation line', head('POST', 'x-note: a\r\n folded\r\ncontent-length: 2\r\n') + '{}', /malformed request refused: .*(whitespace|header value char)/],
    ['a folded Transfer-Encoding', head('POST', 'transfer-encoding:\r\n chunked\r\n') + '2\r\n{}\r\n0\r\n\r\n', /malformed request refused/],
    ['Connection naming Content-Length', head('POST', 'connection: keep-alive, content-length\r\ncontent-length: 2\r\n') + '{}', /the Connection header names content-length/],
    ['Connection naming Transfer-Encoding', head('POST', 'connection: transfer-encoding\r\ntransfer-encoding: chunked\r\n') + '2\r\n{}\r\n0\r\n\r\n', /the Connection header names transfer-encoding/],
    ['chunked framing on HTTP/1.0', head('POST', 'transfer-encoding: chunked\r\n', '1.0') + '2\r\n{}\r\n0\r\n\r\n', /Transfer-Encoding on an HTTP\/1\.0 request/],
    ['a bare LF line ending', `POST /anthropic/v1/messages HTTP/1.1\nhost: x\ncontent-length: 2\n\n{}`, /malformed request refused/],
  ];

  it.each(CASES)('refuses %s with a 400 that names the problem, and forwards nothing', async (_name, bytes, why) => {
    const before = stub.requestLog.length;
    const reply = await raw(sandbox.proxy.socketPath, bytes.replace('KEY', key));
    expect(reply.status).toBe(400);
    expect(reply.text).toMatch(why);
    expect(reply.text).toMatch(/factory proxy: (refused|malformed request refused)/);
    expect(stub.requestLog.length).toBe(before);
  });

  it('refuses a CONNECT that carries a body, before any tunnel opens', async () => {
    const reply = await raw(sandbox.proxy.socketPath, `CONNECT localhost:${stub.port} HTTP/1.1\r\nhost: localhost:${stub.port}\r\ncontent-length: 5\r\n\r\nhello`);
    expect(reply.status).toBe(400);
    expect(reply.text).toMatch(/a CONNECT request may not carry a body \(Content-Length: 5\)/);
  });

  it('writes the framing upstream itself: a POST whose body holds a whole request arrives as one request, body intact', async () => {
    const inner = `DELETE /v1/organizations/everything HTTP/1.1\r\nhost: x\r\nx-api-key: ${REAL_ANTHROPIC}\r\n\r\n`;
    for (const framing of [{ 'transfer-encoding': 'chunked' }, { 'content-length': String(inner.length) }]) {
      const before = stub.requestLog.length;
      const bodyBefore = stub.requests.length;
      const reply = await guestRequest(sandbox.proxy.socketPath, { method: 'POST', path: '/anthropic/v1/messages', headers: { 'x-api-key': key, ...framing }, body: inner });
      expect(reply.status).toBe(400); // the stub's verdict on a body that is not JSON: it parsed it as a body
      expect(stub.requestLog.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/messages']);
      expect(stub.requests.slice(bodyBefore).map((r) => r.body)).toEqual([inner]);
    }
  });
});

describe('requestFraming (checks that do not rely on Node rejecting them first)', () => {
  const req = (method: string, headers: string[], httpVersion = '1.1') => ({ method, rawHeaders: headers, httpVersion });
  it.each([
    [req('POST', ['Content-Length', '3', 'Content-Length', '3']), /2 Content-Length headers/],
    [req('POST', ['Transfer-Encoding', 'chunked', 'Transfer-Encoding', 'chunked']), /2 Transfer-Encoding headers/],
    [req('POST', ['Content-Length', '3', 'Transfer-Encoding', 'chunked']), /both Content-Length and Transfer-Encoding/],
    [req('POST', ['Transfer-Encoding', 'chunked, chunked']), /only a single "chunked"/],
    [req('POST', ['Content-Length', '0x10']), /not a plain decimal number/],
    [req('POST', ['X-A', 'a\r\n b', 'Content-Length', '1']), /folded or malformed/],
    [req('PUT', ['Connection', 'Content-Length', 'Content-Length', '1']), /Connection header names content-length/],
    [req('TRACE', ['Content-Length', '1']), /a TRACE request may not carry a body/],
  ])('%o is refused', (r, why) => {
    const verdict = requestFraming(r);
    expect('problem' in verdict ? verdict.problem : 'accepted').toMatch(why);
  });
  it('accepts plain framings and says how the proxy writes them upstream', () => {
    expect(requestFraming(req('POST', ['Content-Length', '12']))).toEqual({ framing: { kind: 'length', length: 12 } });
    expect(requestFraming(req('POST', ['Transfer-Encoding', 'Chunked']))).toEqual({ framing: { kind: 'chunked' } });
    expect(requestFraming(req('GET', ['Content-Length', '0']))).toEqual({ framing: { kind: 'none' } });
    expect(upstreamFramingHeaders('POST', { kind: 'none' })).toEqual({ 'content-length': '0' });
    expect(upstreamFramingHeaders('GET', { kind: 'none' })).toEqual({});
    expect(upstreamFramingHeaders('POST', { kind: 'chunked' })).toEqual({ 'transfer-encoding': 'chunked' });
    expect(upstreamFramingHeaders('POST', { kind: 'length', length: 5 })).toEqual({ 'content-length': '5' });
  });
});
