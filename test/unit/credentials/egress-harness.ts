// Shared by the proxy-egress tests: a real plain-HTTP upstream on loopback that
// records what really arrived, a sandbox proxy with egress rules whose audit
// and refusals the test reads, and a guest that writes raw bytes to the proxy's
// socket (pipelined requests, CONNECT, any framing).
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AuditEntry } from '../../../common/credentials.js';
import type { EgressRefusal, EgressRule, StepName } from '../../../common/egress.js';
import { AuditLog } from '../../../main/credentials/audit.js';
import { startSandboxProxy, type SandboxProxy } from './proxy-harness.js';

export interface SeenRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Which TCP connection carried it: 1 for the first, and so on. */
  connection: number;
}

export interface HttpUpstream {
  port: number;
  seen: SeenRequest[];
  close(): Promise<void>;
}

/** A plain-HTTP server on 127.0.0.1 (a package mirror); it answers "served <path>", late for a path with "slow". */
export async function startHttpUpstream(): Promise<HttpUpstream> {
  const seen: SeenRequest[] = [];
  const ids = new WeakMap<object, number>();
  let connections = 0;
  const server = http.createServer({ keepAliveTimeout: 5000 }, (req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, connection: ids.get(req.socket) ?? 0 });
    req.resume();
    req.on('end', () => {
      const body = `served ${req.url}`;
      // A path with "slow" in it is answered after 300 ms (a big package on a slow mirror).
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body), 'set-cookie': 'tracker=1' });
        res.end(req.method === 'HEAD' ? undefined : body);
      }, req.url?.includes('slow') ? 300 : 0);
    });
  });
  server.on('connection', (s) => ids.set(s, ++connections));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface EgressSandbox extends SandboxProxy {
  audit: AuditLog;
  refusals: EgressRefusal[];
  dir: string;
  /** The audit entries of this sandbox once at least `n` are written. */
  entries(n: number): Promise<AuditEntry[]>;
}

/** A sandbox proxy with egress rules; `strict` leaves out the test-only loopback allowance (as the app runs it). */
export async function startEgressSandbox(opts: { modelUrl: string; ca: string; egress: EgressRule[]; step?: StepName; strict?: boolean; tunnelHelloTimeoutMs?: number }): Promise<EgressSandbox> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-egress-'));
  const audit = new AuditLog(path.join(dir, 'audit'));
  const sandbox = await startSandboxProxy({
    modelUrl: opts.modelUrl,
    ca: opts.ca,
    extra: {
      audit, egress: opts.egress, ...(opts.step ? { step: opts.step } : {}), ...(opts.strict ? { allowAddress: undefined } : {}),
      ...(opts.tunnelHelloTimeoutMs ? { tunnelHelloTimeoutMs: opts.tunnelHelloTimeoutMs } : {}),
    },
  });
  const refusals: EgressRefusal[] = [];
  sandbox.proxy.onRefused((r) => refusals.push(r));
  return {
    ...sandbox,
    audit,
    refusals,
    dir,
    entries: async (n) => {
      let list = await audit.list('sb-attack');
      for (let i = 0; i < 150 && list.length < n; i++) {
        await new Promise((r) => setTimeout(r, 20));
        list = await audit.list('sb-attack');
      }
      return list;
    },
    close: async () => {
      await sandbox.close();
      await audit.flush();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Writes raw bytes to the proxy and reads until it closes the connection (5 s at most). */
export function rawExchange(socketPath: string, bytes: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath, () => s.write(bytes));
    let text = '';
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`the proxy neither answered nor closed; got ${JSON.stringify(text)}`));
    }, 5000);
    s.on('data', (c: Buffer) => (text += c.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
  });
}

/** The status codes of the responses in a raw exchange, in order (a status line may follow a body directly). */
export const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

/** The bodies "served <path>" of a raw exchange, in order (a body runs up to the next status line). */
export const servedPaths = (text: string): string[] => [...text.matchAll(/served (\S+?)(?=HTTP\/1\.1 |$)/g)].map((m) => m[1]!);

/** Sends a CONNECT from the guest; resolves with the proxy's answer and, on 200, the open tunnel. */
export function connectVia(socketPath: string, target: string): Promise<{ status: number; body: string; socket?: net.Socket }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: 'CONNECT', path: target, headers: { host: target } });
    req.on('connect', (res, socket, head: Buffer) => {
      if (res.statusCode === 200) return resolve({ status: 200, body: '', socket });
      let body = head.toString();
      socket.on('data', (c: Buffer) => (body += c.toString()));
      socket.on('close', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
