// A test certificate authority and HTTPS servers signed by it, generated with
// openssl at test time (nothing checked in). The proxy is given the CA as its
// only extra trust root, so certificate verification stays on in every test.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface TestCa {
  dir: string;
  /** PEM of the CA certificate: give it to the proxy (upstreamCa) or to git (GIT_SSL_CAINFO). */
  cert: string;
  certPath: string;
  /** Issues a server certificate for the given DNS names / IPs. */
  issue(names: string[]): { cert: string; key: string };
  dispose(): void;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

export function createTestCa(): TestCa {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-ca-'));
  openssl(
    [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=factory test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  let serial = 0;
  return {
    dir,
    cert: readFileSync(path.join(dir, 'ca.crt'), 'utf8'),
    certPath: path.join(dir, 'ca.crt'),
    issue(names) {
      const n = ++serial;
      const san = names.map((x) => (/^[\d.]+$|:/.test(x) ? `IP:${x}` : `DNS:${x}`)).join(',');
      writeFileSync(
        path.join(dir, `srv${n}.ext`),
        `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n`,
      );
      openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `srv${n}.key`, '-out', `srv${n}.csr`, '-subj', `/CN=${names[0]}`], dir);
      openssl(['x509', '-req', '-in', `srv${n}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', String(1000 + n), '-out', `srv${n}.crt`, '-days', '2', '-extfile', `srv${n}.ext`], dir);
      return { cert: readFileSync(path.join(dir, `srv${n}.crt`), 'utf8'), key: readFileSync(path.join(dir, `srv${n}.key`), 'utf8') };
    },
    dispose() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One request as the server's own HTTP parser saw it (what really arrived, whatever a proxy replied). */
export interface ParsedRequest {
  method: string;
  path: string;
  /** Which TLS connection carried it: 1 for the server's first connection, and so on. */
  connection: number;
  /** Names of the credential headers present (authorization, x-api-key), lower case. */
  auth: string[];
}

export interface TestHttpsServer {
  /** https://localhost:PORT */
  url: string;
  port: number;
  server: https.Server;
  /** Every request the server parsed, in arrival order. */
  requestLog: ParsedRequest[];
  close(): Promise<void>;
}

/** An HTTPS server on 127.0.0.1 with a certificate for localhost / 127.0.0.1 from the CA. */
export async function startHttpsServer(ca: TestCa, handler: http.RequestListener): Promise<TestHttpsServer> {
  const { cert, key } = ca.issue(['localhost', '127.0.0.1']);
  const requestLog: ParsedRequest[] = [];
  const connectionIds = new WeakMap<object, number>();
  let connections = 0;
  const server = https.createServer({ cert, key }, (req, res) => {
    requestLog.push({
      method: req.method ?? '',
      path: req.url ?? '',
      connection: connectionIds.get(req.socket) ?? 0,
      auth: ['authorization', 'x-api-key'].filter((h) => req.headers[h] !== undefined),
    });
    handler(req, res);
  });
  server.on('secureConnection', (socket) => connectionIds.set(socket, ++connections));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://localhost:${port}`,
    port,
    server,
    requestLog,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
