// A program in the sandbox opens a CONNECT tunnel to an allowed host and then
// asks, in its TLS ClientHello, for another server name: on a shared CDN that
// would reach another site at the same address. The proxy reads the ClientHello
// before anything reaches the upstream and refuses every name but the CONNECT
// host, and every first record that is not a plain ClientHello, without crashing
// and within a time bound. A real TLS client (node:tls) talks through the
// proxy to a real HTTPS server on loopback.
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { EgressRule } from '../../../common/egress.js';
import { readClientHello, serverNameProblem } from '../../../main/credentials/tls-hello.js';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../../support/https.js';
import { startModelStub, type ModelStub } from '../../support/model-stub.js';
import { connectVia, startEgressSandbox, type EgressSandbox } from './egress-harness.js';
import { REAL_ANTHROPIC } from './proxy-harness.js';

/** TLS over `socket` with the given server name (null: none sent), then a GET; resolves with the answer or the error. */
function tlsGet(socket: Duplex, ca: string, servername: string | null): Promise<{ text: string } | { error: string }> {
  return new Promise((resolve) => {
    const t = tls.connect({
      socket, ca,
      // An empty name makes Node send no SNI; the certificate is then checked against localhost.
      servername: servername ?? '',
      checkServerIdentity: (_host, cert) => tls.checkServerIdentity('localhost', cert),
    }, () => t.write('GET /pkg HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n'));
    let text = '';
    t.on('data', (c: Buffer) => (text += c.toString()));
    t.on('end', () => resolve(text ? { text } : { error: 'closed before any answer' }));
    t.on('close', () => resolve(text ? { text } : { error: 'closed' }));
    t.on('error', (err) => resolve({ error: err.message }));
  });
}

/** A socket wrapper that passes what the TLS client writes on one byte at a time, a few milliseconds apart. */
function dribbling(inner: net.Socket): Duplex {
  const d = new Duplex({
    write(chunk: Buffer, _enc, done) {
      let i = 0;
      const next = () => {
        if (i >= chunk.length) return done();
        inner.write(chunk.subarray(i, ++i));
        setTimeout(next, 1);
      };
      next();
    },
    read() {
      inner.resume();
    },
    final(done) {
      inner.end();
      done();
    },
  });
  inner.on('data', (c: Buffer) => {
    if (!d.push(c)) inner.pause();
  });
  inner.on('end', () => d.push(null));
  inner.on('close', () => d.destroy());
  return d;
}

/** Writes raw bytes into an open tunnel and waits for the proxy to close it (5 s at most). */
function sendAndWaitClose(socket: net.Socket, bytes: Buffer | null): Promise<{ closedAfterMs: number; received: string }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    let received = '';
    const timer = setTimeout(() => reject(new Error('the proxy kept the tunnel open')), 5000);
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ closedAfterMs: Date.now() - started, received });
    });
    if (bytes) socket.write(bytes);
  });
}

const u16 = (n: number) => Buffer.of(n >> 8, n & 0xff);
const u24 = (n: number) => Buffer.of(n >> 16, (n >> 8) & 0xff, n & 0xff);

/** A ClientHello body (after the handshake header) with the given extensions block (its length prefix included). */
function helloBody(extensions: Buffer): Buffer {
  return Buffer.concat([Buffer.of(3, 3), Buffer.alloc(32, 7), Buffer.of(0), u16(2), Buffer.of(0x13, 0x01), Buffer.of(1, 0), extensions]);
}
function serverNameExt(entries: Array<[number, string]>): Buffer {
  const list = Buffer.concat(entries.map(([type, name]) => Buffer.concat([Buffer.of(type), u16(name.length), Buffer.from(name, 'latin1')])));
  const data = Buffer.concat([u16(list.length), list]);
  return Buffer.concat([u16(0), u16(data.length), data]);
}
function extensionsOf(...exts: Buffer[]): Buffer {
  const all = Buffer.concat(exts);
  return Buffer.concat([u16(all.length), all]);
}
/** A handshake record (or several, `split` bytes of handshake each) carrying a ClientHello with `body`. */
function helloRecords(body: Buffer, split = 16384): Buffer {
  const message = Buffer.concat([Buffer.of(1), u24(body.length), body]);
  const records: Buffer[] = [];
  for (let at = 0; at < message.length; at += split) {
    const part = message.subarray(at, at + split);
    records.push(Buffer.concat([Buffer.of(22, 3, 1), u16(part.length), part]));
  }
  return Buffer.concat(records);
}

describe('the ClientHello reader', () => {
  it('finds the host_name, in one record or across several, and asks for more until the hello is complete', () => {
    const bytes = helloRecords(helloBody(extensionsOf(serverNameExt([[0, 'registry.npmjs.org']]))), 20);
    expect(readClientHello(bytes)).toEqual({ status: 'done', serverName: 'registry.npmjs.org' });
    expect(readClientHello(bytes.subarray(0, bytes.length - 1))).toMatchObject({ status: 'more' });
    expect(readClientHello(bytes.subarray(0, 3))).toEqual({ status: 'more', need: 5 });
    expect(readClientHello(helloRecords(helloBody(Buffer.alloc(0))))).toEqual({ status: 'done', serverName: null });
  });

  it.each([
    ['a name that is not a host_name', extensionsOf(serverNameExt([[1, 'registry.npmjs.org']])), /not a host_name/],
    ['two host names', extensionsOf(serverNameExt([[0, 'a.example'], [0, 'b.example']])), /two host names/],
    ['server_name twice', extensionsOf(serverNameExt([[0, 'a.example']]), serverNameExt([[0, 'b.example']])), /extension 0 twice/],
    ['an extension list claiming more than is there', Buffer.concat([u16(256), u16(0), u16(0)]), /extensions claim 256 bytes where 4 remain/],
    ['an extension running past the list', Buffer.concat([u16(6), u16(0), u16(40), u16(0)]), /ends inside its extension data/],
    ['a server_name list claiming more than its extension', Buffer.concat([u16(9), u16(0), u16(5), u16(90), Buffer.of(0, 0, 0)]), /server_name list claims 90 bytes where 3 remain/],
  ])('refuses %s', (_name, extensions, why) => {
    const r = readClientHello(helloRecords(helloBody(extensions)));
    expect(r.status).toBe('bad');
    expect((r as { problem: string }).problem).toMatch(why);
  });

  it('refuses records that cannot start a ClientHello, at once', () => {
    expect(readClientHello(Buffer.from('GET / HTTP/1.1\r\n\r\n'))).toMatchObject({ status: 'bad', problem: expect.stringMatching(/not a TLS handshake record/) });
    expect(readClientHello(Buffer.of(22, 3, 1, 0xff, 0xff))).toMatchObject({ status: 'bad', problem: expect.stringMatching(/claims 65535 bytes/) });
    expect(readClientHello(Buffer.concat([Buffer.of(22, 3, 1), u16(4), Buffer.of(1, 0xff, 0xff, 0xff)]))).toMatchObject({ status: 'bad', problem: expect.stringMatching(/over the 65536 byte cap/) });
    expect(readClientHello(Buffer.concat([Buffer.of(22, 3, 1), u16(4), Buffer.of(2, 0, 0, 0)]))).toMatchObject({ status: 'bad', problem: expect.stringMatching(/not a ClientHello/) });
  });

  it('compares the server name to the CONNECT host exactly, ASCII case aside', () => {
    expect(serverNameProblem('Registry.NPMJS.org', 'registry.npmjs.org')).toBeUndefined();
    expect(serverNameProblem('registry.npmjs.org.', 'registry.npmjs.org')).toMatch(/ends with a dot/);
    expect(serverNameProblem('evil.example', 'registry.npmjs.org')).toMatch(/is not registry\.npmjs\.org/);
    expect(serverNameProblem('registry.npmjs.org\0.evil', 'registry.npmjs.org')).toMatch(/not a host name/);
    expect(serverNameProblem('\u212Aey.example', 'key.example')).toMatch(/not a host name/); // Kelvin sign
    expect(serverNameProblem(null, 'registry.npmjs.org')).toMatch(/names no server/);
  });
});

describe('CONNECT checks the TLS server name before reaching the upstream', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let upstream: TestHttpsServer;
  let upstreamConnections = 0;
  let sandbox: EgressSandbox | undefined;
  let rule: EgressRule;
  const open = async () => {
    const c = await connectVia(sandbox!.proxy.socketPath, `localhost:${upstream.port}`);
    expect(c.status).toBe(200);
    return c.socket!;
  };
  const refusalOf = async () => {
    const entries = await sandbox!.entries(1);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ method: 'CONNECT', host: 'localhost', port: upstream.port, status: 403 });
    return entries[0]!.rule;
  };

  beforeAll(async () => {
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: REAL_ANTHROPIC });
    upstream = await startHttpsServer(ca, (_req, res) => res.end('registry says hi'));
    upstream.server.on('connection', () => upstreamConnections++);
    rule = { name: 'test registry', host: 'localhost', port: upstream.port, scheme: 'https' };
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

  it('tunnels a client whose server name is the CONNECT host, end to end, and audits it', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const r = await tlsGet(await open(), ca.cert, 'localhost');
    expect('text' in r && r.text).toMatch(/registry says hi$/);
    const [entry] = await sandbox.entries(1);
    expect(entry).toMatchObject({ method: 'CONNECT', host: 'localhost', rule: 'test registry', status: 200 });
    expect(entry!.bytesIn).toBeGreaterThan(200);
    expect(sandbox.refusals).toEqual([]);
  });

  it('refuses another server name on the same address, and the upstream never sees a connection', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const before = upstreamConnections;
    const r = await tlsGet(await open(), ca.cert, 'other-site.example');
    expect('error' in r).toBe(true);
    expect(upstreamConnections).toBe(before);
    expect(await refusalOf()).toBe('refused: the TLS server name "other-site.example" is not localhost, the host the tunnel was allowed for');
    expect(sandbox.refusals).toEqual([expect.objectContaining({ method: 'CONNECT', host: 'localhost', port: upstream.port, reason: expect.stringMatching(/other-site\.example/) })]);
  });

  it('refuses a ClientHello with no server name', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const before = upstreamConnections;
    const r = await tlsGet(await open(), ca.cert, null);
    expect('error' in r).toBe(true);
    expect(upstreamConnections).toBe(before);
    expect(await refusalOf()).toMatch(/^refused: the TLS ClientHello names no server/);
  });

  it('takes a ClientHello dribbled one byte at a time', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const r = await tlsGet(dribbling(await open()), ca.cert, 'localhost');
    expect('text' in r && r.text).toMatch(/registry says hi$/);
    expect((await sandbox.entries(1))[0]).toMatchObject({ rule: 'test registry', status: 200 });
  }, 30_000);

  it.each([
    ['plain HTTP instead of TLS', Buffer.from('GET / HTTP/1.1\r\nhost: localhost\r\n\r\n'), /^refused: not a TLS ClientHello: the first bytes through the tunnel are not a TLS handshake record/],
    ['a record claiming a huge length', Buffer.of(22, 3, 1, 0xff, 0xff, 1, 0, 0), /^refused: not a TLS ClientHello: a TLS record claims 65535 bytes/],
    ['a truncated extension list', helloRecords(helloBody(Buffer.concat([u16(256), serverNameExt([[0, 'localhost']])]))), /^refused: not a TLS ClientHello: the ClientHello's extensions claim 256 bytes where 18 remain/],
  ])('closes the tunnel on %s, at once, with nothing upstream', async (_name, bytes, why) => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule] });
    const before = upstreamConnections;
    const { closedAfterMs, received } = await sendAndWaitClose(await open(), bytes);
    expect(closedAfterMs).toBeLessThan(2000);
    expect(received).toBe('');
    expect(upstreamConnections).toBe(before);
    expect(await refusalOf()).toMatch(why);
  });

  it('closes a tunnel whose client sends nothing once the bound has passed', async () => {
    sandbox = await startEgressSandbox({ modelUrl: stub.url, ca: ca.cert, egress: [rule], tunnelHelloTimeoutMs: 300 });
    const { closedAfterMs } = await sendAndWaitClose(await open(), null);
    expect(closedAfterMs).toBeGreaterThanOrEqual(250);
    expect(closedAfterMs).toBeLessThan(3000);
    expect(await refusalOf()).toBe('refused: no complete TLS ClientHello within 300 ms (0 bytes came)');
  });
});
