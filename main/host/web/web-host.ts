// The web host: the same API as the Electron IPC adapter, over HTTP + WebSocket
// on 127.0.0.1 only. Used by `npm start` without an Electron runtime, by remote
// use over an SSH tunnel, and by the end-to-end tests in Chromium.
//
// Guards, because any web page the user visits can talk to 127.0.0.1:
//  - a random token on every API request and on the WebSocket upgrade;
//  - the Origin of the upgrade must be this host's own origin (no cross-site WebSocket);
//  - the Host header must be 127.0.0.1:PORT or localhost:PORT (DNS rebinding);
//  - the page itself is served with a strict CSP (script-src 'self').
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket, type RawData } from 'ws';
import { encodeTerminalFrame } from '../../../common/terminal-frame.js';
import { dispatchCall, type HostedApp } from '../hosted-app.js';

export interface WebHostOptions {
  /** The built renderer (index.html and its assets). */
  staticDir: string;
  /** 0 or absent: a random free port. */
  port?: number;
  /** Absent: a fresh random token. */
  token?: string;
}

export interface WebHost {
  /** http://127.0.0.1:PORT/?token=... */
  url: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

const MAX_MESSAGE_BYTES = 2 * 1024 * 1024;
/** A client that stops reading is dropped rather than buffering without bound. */
const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
};

/** The page's CSP. Inline styles are allowed (xterm.js injects style elements); scripts are not. */
export function contentSecurityPolicy(port: number): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src 'self' ws://127.0.0.1:${port} ws://localhost:${port}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export async function startWebHost(app: HostedApp, opts: WebHostOptions): Promise<WebHost> {
  const token = opts.token ?? randomBytes(24).toString('base64url');
  if (token.length < 16) throw new Error('web host token must be at least 16 characters');
  const staticDir = path.resolve(opts.staticDir);
  const clients = new Set<WebSocket>();
  let port = 0;

  const tokenOk = (given: string | null | undefined): boolean => {
    if (!given) return false;
    const a = Buffer.from(given);
    const b = Buffer.from(token);
    return a.length === b.length && timingSafeEqual(a, b);
  };
  const hostOk = (host: string | undefined): boolean =>
    host === `127.0.0.1:${port}` || host === `localhost:${port}`;
  const originOk = (origin: string | undefined): boolean =>
    origin === `http://127.0.0.1:${port}` || origin === `http://localhost:${port}`;

  const server = http.createServer((req, res) => {
    void handleHttp(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendText(res, 500, 'internal error');
      else res.destroy();
      console.error('web host: request failed:', err);
    });
  });

  async function handleHttp(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (!hostOk(req.headers.host)) return sendText(res, 421, 'unexpected Host header');
    const url = new URL(req.url ?? '/', `http://127.0.0.1:${port}`);
    if (url.pathname === '/api' || url.pathname.startsWith('/api/')) return handleApi(req, res, url);
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendText(res, 405, 'method not allowed');
    return serveStatic(req, res, url.pathname);
  }

  /** POST /api/call with {method, input} — the same calls as the WebSocket, for scripts and curl. */
  async function handleApi(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> {
    const auth = req.headers.authorization;
    const given = auth?.startsWith('Bearer ') ? auth.slice(7) : (req.headers['x-factory-token'] as string | undefined);
    if (!tokenOk(given)) return sendJson(res, 401, { error: { name: 'Unauthorized', message: 'missing or wrong token' } });
    if (url.pathname !== '/api/call' || req.method !== 'POST') {
      return sendJson(res, 404, { error: { name: 'NotFound', message: 'use POST /api/call' } });
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req, MAX_MESSAGE_BYTES));
    } catch (err) {
      return sendJson(res, 400, { error: { name: 'InvalidInput', message: `request body: ${(err as Error).message}` } });
    }
    const { method, input } = (body ?? {}) as { method?: unknown; input?: unknown };
    const reply = await dispatchCall(app.api, method, input);
    sendJson(res, 'error' in reply ? 400 : 200, reply);
  }

  async function serveStatic(req: http.IncomingMessage, res: http.ServerResponse, pathname: string): Promise<void> {
    let rel: string;
    try {
      rel = decodeURIComponent(pathname);
    } catch {
      return sendText(res, 400, 'bad path');
    }
    if (rel.endsWith('/')) rel += 'index.html';
    const file = path.resolve(staticDir, '.' + rel);
    if (file !== staticDir && !file.startsWith(staticDir + path.sep)) return sendText(res, 404, 'not found');
    const info = await stat(file).catch(() => null);
    if (!info?.isFile()) return sendText(res, 404, 'not found');
    const isHtml = file.endsWith('.html');
    res.writeHead(200, {
      'content-type': MIME[path.extname(file)] ?? 'application/octet-stream',
      'content-length': info.size,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': isHtml ? 'no-store' : 'no-cache',
      ...(isHtml ? { 'content-security-policy': contentSecurityPolicy(port), 'x-frame-options': 'DENY' } : {}),
    });
    if (req.method === 'HEAD') return void res.end();
    createReadStream(file).pipe(res);
  }

  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const refuse = (status: number, why: string) => {
      socket.end(`HTTP/1.1 ${status} ${why}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    if (!hostOk(req.headers.host)) return refuse(421, 'Misdirected Request');
    const url = new URL(req.url ?? '/', `http://127.0.0.1:${port}`);
    if (url.pathname !== '/ws') return refuse(404, 'Not Found');
    if (!originOk(req.headers.origin)) return refuse(403, 'Forbidden');
    if (!tokenOk(url.searchParams.get('token'))) return refuse(401, 'Unauthorized');
    wss.handleUpgrade(req, socket, head, (ws) => attachClient(ws));
  });

  function attachClient(ws: WebSocket): void {
    clients.add(ws);
    const send = (payload: string | Uint8Array) => {
      if (ws.readyState !== ws.OPEN) return;
      if (ws.bufferedAmount > MAX_BUFFERED_BYTES) {
        ws.close(1013, 'client too slow');
        return;
      }
      ws.send(payload);
    };
    const offEvent = app.onEvent((event) => send(JSON.stringify({ event })));
    const offData = app.onTerminalData((e) => send(encodeTerminalFrame(e.sessionId, e.data)));
    ws.on('message', (raw: RawData, isBinary: boolean) => {
      if (isBinary) return ws.close(1003, 'binary frames are not accepted from clients');
      let msg: { id?: unknown; method?: unknown; input?: unknown };
      try {
        msg = JSON.parse(rawToString(raw));
      } catch {
        return send(JSON.stringify({ id: null, error: { name: 'InvalidInput', message: 'message is not JSON' } }));
      }
      const id = typeof msg?.id === 'number' || typeof msg?.id === 'string' ? msg.id : null;
      if (id === null) {
        return send(JSON.stringify({ id: null, error: { name: 'InvalidInput', message: 'id: must be a number or string' } }));
      }
      void dispatchCall(app.api, msg.method, msg.input).then((reply) => send(JSON.stringify({ id, ...reply })));
    });
    ws.on('close', () => {
      clients.delete(ws);
      offEvent();
      offData();
    });
    ws.on('error', () => ws.terminate());
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as { port: number }).port;

  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}/?token=${encodeURIComponent(token)}`,
    port,
    token,
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const ws of clients) ws.terminate();
        wss.close();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

function rawToString(raw: RawData): string {
  if (Array.isArray(raw)) return Buffer.concat(raw).toString('utf8');
  return Buffer.from(raw as ArrayBuffer).toString('utf8');
}

function readBody(req: http.IncomingMessage, cap: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > cap) {
        reject(new Error(`larger than ${cap} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendText(res: http.ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' });
  res.end(text + '\n');
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'x-content-type-options': 'nosniff' });
  res.end(JSON.stringify(body));
}
