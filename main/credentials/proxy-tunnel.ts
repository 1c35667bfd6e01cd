// CONNECT tunnels for the credential proxy: only to allow-listed host:port
// entries, only after the address check, and with nothing added: the bytes are
// the guest's own TLS, which the proxy can neither read nor sign.
import type http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { AuditLog } from './audit.js';
import type { NetGuard } from './net-guard.js';
import { requestFraming } from './proxy-framing.js';

export interface TunnelOptions {
  sandboxId: string;
  /** host:port entries the guest may tunnel to. */
  allow: string[];
  guard: NetGuard;
  audit?: AuditLog;
}

export function openTunnel(req: http.IncomingMessage, socket: Duplex, head: Buffer, opts: TunnelOptions): void {
  const started = Date.now();
  const target = (req.url ?? '').toLowerCase();
  let bytesIn = head.length;
  let bytesOut = 0;
  // The server stops listening for errors on a socket it hands over; a guest
  // resetting it mid-lookup must not become an unhandled error on the host.
  socket.on('error', () => socket.destroy());
  const record = (rule: string, status: number) =>
    opts.audit?.record({
      time: new Date(started).toISOString(),
      sandboxId: opts.sandboxId,
      method: 'CONNECT',
      host: target.slice(0, 300),
      path: '',
      rule,
      status,
      bytesIn,
      bytesOut,
      durationMs: Date.now() - started,
    });
  const refuse = (status: string, why: string) => {
    record(`refused: ${why.slice(0, 120)}`, Number(status.slice(0, 3)));
    const body = `factory proxy: refused CONNECT ${target.slice(0, 200)}: ${why}\n`;
    socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  };
  // A CONNECT has no body: with one, its first bytes would be both body and tunnel data.
  const framed = requestFraming(req);
  if ('problem' in framed) return refuse('400 Bad Request', framed.problem);
  const m = /^([a-z0-9.-]+):(\d{1,5})$/.exec(target);
  if (!m || !opts.allow.map((s) => s.toLowerCase()).includes(target)) {
    return refuse('403 Forbidden', 'no CONNECT allow-list entry for this host:port');
  }
  const [, hostname, port] = m as unknown as [string, string, string];
  opts.guard.resolve(hostname).then(
    (addrs) => {
      if (socket.destroyed) return;
      const upstream = net.connect({ host: addrs[0]!.address, port: Number(port) });
      let connected = false;
      upstream.on('connect', () => {
        connected = true;
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) upstream.write(head);
        socket.on('data', (c: Buffer) => (bytesIn += c.length));
        upstream.on('data', (c: Buffer) => (bytesOut += c.length));
        socket.pipe(upstream);
        upstream.pipe(socket);
      });
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        record('connect-allow', 200);
        socket.destroy();
        upstream.destroy();
      };
      upstream.on('error', () => {
        // Before the 200 the guest can still be told; after it, the bytes are its tunnel's.
        if (!done && !connected) {
          done = true;
          record('connect-allow (upstream failed)', 502);
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
