// CONNECT tunnels for the credential proxy: only where an egress rule for the
// current step allows the host:port, only after the address check, only when
// the guest's TLS ClientHello names that same host (SNI), and with nothing
// added: the bytes are the guest's own TLS, which the proxy can neither read
// nor sign.
import type http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { recordEgress, type EgressGate, type EgressOutcome } from './egress-policy.js';
import { rangeAllowance, type NetGuard } from './net-guard.js';
import { requestFraming } from './proxy-framing.js';
import { MAX_HELLO_BYTES, readClientHello, serverNameProblem } from './tls-hello.js';

export interface TunnelOptions extends EgressGate {
  guard: NetGuard;
  /** How long the guest has to send its ClientHello after the 200 (HELLO_TIMEOUT_MS when absent). */
  helloTimeoutMs?: number;
}

/** host and port of a CONNECT target ("host:port"), or why it is not one. */
export function connectTarget(target: string): { host: string; port: number } | { problem: string; host: string; port: number } {
  const m = /^(.*):([0-9]{1,5})$/.exec(target);
  if (!m) return { problem: `the CONNECT target ${JSON.stringify(target.slice(0, 200))} is not host:port`, host: target, port: 0 };
  const port = Number(m[2]);
  const host = m[1]!.toLowerCase();
  if (!/^[1-9]/.test(m[2]!) || port > 65535) return { problem: `port ${m[2]} is not a port (1-65535, no leading zeros)`, host, port: 0 };
  return { host, port };
}

export function openTunnel(req: http.IncomingMessage, socket: Duplex, head: Buffer, opts: TunnelOptions): void {
  const target = connectTarget(req.url ?? '');
  const outcome: EgressOutcome = {
    scheme: 'https', host: target.host, port: target.port, method: 'CONNECT', started: Date.now(), step: opts.policy.step, status: 0, bytesIn: head.length, bytesOut: 0,
  };
  // The server stops listening for errors on a socket it hands over; a guest
  // resetting it mid-lookup must not become an unhandled error on the host.
  socket.on('error', () => socket.destroy());
  const refuse = (status: string, why: string) => {
    recordEgress(opts, { ...outcome, status: Number(status.slice(0, 3)), refused: why });
    const body = `factory proxy: refused CONNECT ${(req.url ?? '').slice(0, 200)}: ${why}\n`;
    const header = why.replace(/[^\x20-\x7e]/g, '?').slice(0, 1000);
    socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-factory-proxy-refusal: ${header}\r\nconnection: close\r\n\r\n${body}`);
  };
  // A CONNECT has no body: with one, its first bytes would be both body and tunnel data.
  const framed = requestFraming(req);
  if ('problem' in framed) return refuse('400 Bad Request', framed.problem);
  if ('problem' in target) return refuse('400 Bad Request', target.problem);
  const decision = opts.policy.decide({ scheme: 'https', host: target.host, port: target.port });
  if (!decision.allowed) return refuse('403 Forbidden', decision.reason);
  const rule = decision.rule.name;
  // The rule's own address ranges (a LAN mirror) are allowed on top of public addresses.
  opts.guard.resolve(target.host, rangeAllowance(decision.rule.addresses)).then(
    (addrs) => {
      if (socket.destroyed) return;
      // The client starts TLS only after the 200; its ClientHello must name the
      // allowed host before anything reaches the upstream, or another site on the
      // same address (a shared CDN) would be one SNI away.
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      awaitClientHello(socket, head, target.host, opts.helloTimeoutMs ?? HELLO_TIMEOUT_MS).then((hello) => {
        if (hello.status === 'closed') {
          // The guest left before any TLS: nothing was refused, nothing reached the upstream.
          recordEgress(opts, { ...outcome, bytesIn: hello.bytes, status: 200, rule, note: 'the guest closed the tunnel before sending a TLS ClientHello' });
          socket.destroy();
          return;
        }
        if (hello.status === 'refused') {
          // After the 200 the guest can no longer be told in HTTP: the tunnel closes, and the audit says why.
          recordEgress(opts, { ...outcome, bytesIn: hello.bytes, status: 403, refused: hello.problem, note: `rule "${rule}" allowed the CONNECT; its TLS ClientHello was refused` });
          socket.destroy();
          return;
        }
        splice(socket, hello.buffered, addrs[0]!.address, target.port, outcome, rule, opts);
      }, () => socket.destroy());
    },
    (err: Error) => refuse('403 Forbidden', err.message),
  );
}

/** How long the guest has, after the 200, to send its complete ClientHello. */
export const HELLO_TIMEOUT_MS = 10_000;

type HelloOutcome =
  | { status: 'ok'; buffered: Buffer }
  | { status: 'refused'; problem: string; bytes: number }
  | { status: 'closed'; bytes: number };

/**
 * Reads the guest's first bytes (after `head`, what came with the CONNECT)
 * until its ClientHello is complete, bounded in time and size, and checks the
 * server name it asks for against the CONNECT host.
 */
function awaitClientHello(socket: Duplex, head: Buffer, host: string, timeoutMs: number): Promise<HelloOutcome> {
  return new Promise((resolve) => {
    // Chunks are joined only when the reader can make progress, so a ClientHello
    // dribbled a byte at a time costs no more than one sent whole.
    const chunks: Buffer[] = head.length ? [head] : [];
    let bytes = head.length;
    let need = 5;
    let settled = false;
    const settle = (o: HelloOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.pause();
      resolve(o);
    };
    const check = () => {
      if (bytes < need) return;
      const buffered = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks.splice(0, chunks.length, buffered);
      const hello = readClientHello(buffered);
      if (hello.status === 'more') {
        need = hello.need;
        return;
      }
      if (hello.status === 'bad') return settle({ status: 'refused', problem: `not a TLS ClientHello: ${hello.problem}`, bytes });
      const problem = serverNameProblem(hello.serverName, host);
      if (problem) return settle({ status: 'refused', problem, bytes });
      settle({ status: 'ok', buffered });
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      bytes += c.length;
      // The reader caps records and the hello; this caps what waits for it.
      if (bytes > 2 * MAX_HELLO_BYTES) return settle({ status: 'refused', problem: `no complete ClientHello within ${bytes} bytes`, bytes });
      check();
    };
    const onEnd = () =>
      settle(bytes ? { status: 'refused', problem: `the guest closed the tunnel inside its ClientHello (${bytes} bytes)`, bytes } : { status: 'closed', bytes: 0 });
    const timer = setTimeout(() => settle({ status: 'refused', problem: `no complete TLS ClientHello within ${timeoutMs} ms (${bytes} bytes came)`, bytes }), timeoutMs);
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    check();
    if (!settled) socket.resume();
  });
}

/** Connects upstream, sends what the guest already sent, and joins the two sockets both ways. */
function splice(socket: Duplex, buffered: Buffer, address: string, port: number, outcome: EgressOutcome, rule: string, opts: TunnelOptions): void {
  outcome.bytesIn = buffered.length;
  const upstream = net.connect({ host: address, port });
  let connected = false;
  let done = false;
  const finish = (note?: string) => {
    if (done) return;
    done = true;
    recordEgress(opts, { ...outcome, status: note ? 502 : 200, rule, ...(note ? { note } : {}) });
    socket.destroy();
    upstream.destroy();
  };
  upstream.on('connect', () => {
    connected = true;
    upstream.write(buffered);
    socket.on('data', (c: Buffer) => (outcome.bytesIn += c.length));
    upstream.on('data', (c: Buffer) => (outcome.bytesOut += c.length));
    socket.pipe(upstream);
    upstream.pipe(socket);
    socket.resume();
  });
  // The 200 is already sent: an upstream that cannot be reached closes the tunnel, and the audit says why.
  upstream.on('error', (err) => finish(connected ? undefined : `upstream failed: ${err.message}`));
  upstream.on('close', () => finish());
  socket.on('close', () => finish());
  socket.on('error', () => finish());
}
