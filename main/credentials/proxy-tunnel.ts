// CONNECT tunnels for the credential proxy: only where an egress rule for the
// current step allows the host:port, only after the address check, and with
// nothing added: the bytes are the guest's own TLS, which the proxy can neither
// read nor sign.
import type http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { recordEgress, type EgressGate, type EgressOutcome } from './egress-policy.js';
import { rangeAllowance, type NetGuard } from './net-guard.js';
import { requestFraming } from './proxy-framing.js';

export interface TunnelOptions extends EgressGate {
  guard: NetGuard;
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
      const upstream = net.connect({ host: addrs[0]!.address, port: target.port });
      let connected = false;
      upstream.on('connect', () => {
        connected = true;
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) upstream.write(head);
        socket.on('data', (c: Buffer) => (outcome.bytesIn += c.length));
        upstream.on('data', (c: Buffer) => (outcome.bytesOut += c.length));
        socket.pipe(upstream);
        upstream.pipe(socket);
      });
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        recordEgress(opts, { ...outcome, status: 200, rule });
        socket.destroy();
        upstream.destroy();
      };
      upstream.on('error', (err) => {
        // Before the 200 the guest can still be told; after it, the bytes are its tunnel's.
        if (!done && !connected) {
          done = true;
          recordEgress(opts, { ...outcome, status: 502, rule, note: `upstream failed: ${err.message}` });
          socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
          return;
        }
        finish();
      });
      upstream.on('close', finish);
      socket.on('close', finish);
      socket.on('error', finish);
    },
    (err: Error) => refuse('403 Forbidden', err.message),
  );
}
