// The web host on a real 127.0.0.1 server, with a small in-memory app that has
// FactoryApp's shape: calls, pushed events and terminal bytes (an echo terminal).
import http from 'node:http';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type FactoryApi, type FactoryEvent, type TerminalDataEvent } from '../../../common/contract.js';
import { FactoryError } from '../../../common/errors.js';
import { decodeTerminalFrame, encodeTerminalFrame } from '../../../common/terminal-frame.js';
import type { Task } from '../../../common/domain.js';
import { startWebHost, type WebHost } from '../../../main/host/web/web-host.js';

function echoApp() {
  const events = new Set<(e: FactoryEvent) => void>();
  const data = new Set<(e: TerminalDataEvent) => void>();
  const task: Task = {
    id: 't1', title: 'demo', repoPath: '/repo', baseRef: 'main', baseCommit: 'abc', branch: 'factory/t1',
    createdAt: new Date(0).toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
  };
  const notImplemented = async () => {
    throw FactoryError.carried('NotImplemented', 'not in this test app');
  };
  const api = new Proxy({} as FactoryApi, {
    get: (_t, prop: string) => {
      if (prop === 'tasks.get') {
        return async ({ taskId }: { taskId: string }) => {
          if (taskId !== task.id) throw new FactoryError('NotFound', `no task ${taskId}`, 'detail line');
          return task;
        };
      }
      if (prop === 'tasks.cancel') {
        return async () => {
          for (const l of events) l({ type: 'task.updated', task: { ...task, phase: 'cancelled' } });
          return { ...task, phase: 'cancelled' };
        };
      }
      if (prop === 'terminal.write') {
        return async ({ sessionId, data: text }: { sessionId: string; data: string }) => {
          for (const l of data) l({ sessionId, data: new TextEncoder().encode(text) });
        };
      }
      return notImplemented;
    },
  });
  return {
    api,
    onEvent: (l: (e: FactoryEvent) => void) => (events.add(l), () => events.delete(l)),
    onTerminalData: (l: (e: TerminalDataEvent) => void) => (data.add(l), () => data.delete(l)),
    listenerCount: () => events.size + data.size,
  };
}

let host: WebHost;
let app: ReturnType<typeof echoApp>;
let staticDir: string;

beforeAll(async () => {
  staticDir = mkdtempSync(path.join(os.tmpdir(), 'webhost-static-'));
  writeFileSync(path.join(staticDir, 'index.html'), '<!doctype html><title>factory</title>');
  writeFileSync(path.join(os.tmpdir(), 'webhost-outside.txt'), 'secret');
  app = echoApp();
  host = await startWebHost(app, { staticDir });
});
afterAll(async () => {
  await host?.close();
  rmSync(staticDir, { recursive: true, force: true });
});

function origin() {
  return `http://127.0.0.1:${host.port}`;
}

function connect(opts: { token?: string | null; origin?: string | null; host?: string } = {}) {
  const token = opts.token === undefined ? host.token : opts.token;
  const url = `ws://127.0.0.1:${host.port}/ws${token === null ? '' : `?token=${encodeURIComponent(token)}`}`;
  const headers: Record<string, string> = {};
  if (opts.host) headers.host = opts.host;
  return new WebSocket(url, {
    ...(opts.origin === null ? {} : { origin: opts.origin ?? origin() }),
    headers,
  });
}

function refusedStatus(ws: WebSocket): Promise<number> {
  return new Promise((resolve, reject) => {
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('open', () => reject(new Error('connection was accepted')));
    ws.on('error', (err) => {
      // 'unexpected-response' fires first when the server answered with a status.
      if (!/Unexpected server response/.test(String(err))) reject(err);
    });
  });
}

function opened(ws: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
}

function call(ws: WebSocket, id: number, method: string, input: unknown): Promise<any> {
  return new Promise((resolve) => {
    const onMsg = (raw: WebSocket.RawData, isBinary: boolean) => {
      if (isBinary) return;
      const msg = JSON.parse(raw.toString());
      if (msg.id === id) {
        ws.off('message', onMsg);
        resolve(msg);
      }
    };
    ws.on('message', onMsg);
    ws.send(JSON.stringify({ id, method, input }));
  });
}

function httpGet(pathname: string, headers: Record<string, string> = {}, method = 'GET', body?: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: host.port, path: pathname, method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('web host', () => {
  it('listens on 127.0.0.1 and prints a URL with the token', () => {
    expect(host.url).toBe(`http://127.0.0.1:${host.port}/?token=${encodeURIComponent(host.token)}`);
    expect(host.token.length).toBeGreaterThanOrEqual(24);
  });

  it('serves the page with a strict CSP and refuses paths outside the static dir', async () => {
    const page = await httpGet('/?token=x');
    expect(page.status).toBe(200);
    expect(page.body).toContain('<title>factory</title>');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['content-security-policy']).not.toMatch(/script-src[^;]*unsafe/);
    const escape = await httpGet('/..%2fwebhost-outside.txt');
    expect(escape.status).toBe(404);
    expect(escape.body).not.toContain('secret');
  });

  it('refuses a request whose Host header is not its own (DNS rebinding)', async () => {
    const res = await httpGet('/', { host: `evil.example:${host.port}` });
    expect(res.status).toBe(421);
    const ws = connect({ host: `evil.example:${host.port}` });
    expect(await refusedStatus(ws)).toBe(421);
  });

  it('refuses the WebSocket upgrade with a missing or wrong token', async () => {
    expect(await refusedStatus(connect({ token: null }))).toBe(401);
    expect(await refusedStatus(connect({ token: host.token.slice(0, -1) + (host.token.endsWith('A') ? 'B' : 'A') }))).toBe(401);
  });

  it('refuses the WebSocket upgrade from a foreign or missing Origin', async () => {
    expect(await refusedStatus(connect({ origin: 'http://evil.example' }))).toBe(403);
    expect(await refusedStatus(connect({ origin: `http://127.0.0.1:${host.port + 1}` }))).toBe(403);
    expect(await refusedStatus(connect({ origin: null }))).toBe(403);
  });

  it('requires the token on HTTP API requests', async () => {
    const body = JSON.stringify({ method: 'tasks.get', input: { taskId: 't1' } });
    const none = await httpGet('/api/call', { 'content-type': 'application/json' }, 'POST', body);
    expect(none.status).toBe(401);
    const wrong = await httpGet('/api/call', { authorization: 'Bearer nope-nope-nope-nope' }, 'POST', body);
    expect(wrong.status).toBe(401);
    const ok = await httpGet('/api/call', { authorization: `Bearer ${host.token}` }, 'POST', body);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body).result.id).toBe('t1');
  });

  it('round-trips a call, carries errors in the wire format, and pushes events', async () => {
    const ws = connect();
    await opened(ws);
    const ok = await call(ws, 1, 'tasks.get', { taskId: 't1' });
    expect(ok).toMatchObject({ id: 1, result: { id: 't1', branch: 'factory/t1' } });

    const missing = await call(ws, 2, 'tasks.get', { taskId: 'nope' });
    expect(missing).toEqual({ id: 2, error: { name: 'NotFound', message: 'no task nope', detail: 'detail line' } });

    const unknown = await call(ws, 3, 'tasks.explode', {});
    expect(unknown.error.name).toBe('UnknownMethod');

    const event = new Promise<any>((resolve) =>
      ws.on('message', (raw, isBinary) => {
        if (!isBinary && JSON.parse(raw.toString()).event) resolve(JSON.parse(raw.toString()).event);
      }),
    );
    await call(ws, 4, 'tasks.cancel', { taskId: 't1' });
    expect(await event).toMatchObject({ type: 'task.updated', task: { phase: 'cancelled' } });
    ws.close();
  });

  it('returns InvalidInput naming the field for an invalid input', async () => {
    const ws = connect();
    await opened(ws);
    const bad = await call(ws, 7, 'tasks.get', { taskId: '../etc' });
    expect(bad.error.name).toBe('InvalidInput');
    expect(bad.error.message).toMatch(/^taskId: /);
    const missingField = await call(ws, 8, 'terminal.resize', { sessionId: 's1', cols: 80 });
    expect(missingField.error).toMatchObject({ name: 'InvalidInput' });
    expect(missingField.error.message).toMatch(/^rows: /);
    ws.close();
  });

  it('delivers terminal output as binary frames with the session id in the header', async () => {
    const ws = connect();
    await opened(ws);
    const frame = new Promise<{ sessionId: string; data: Uint8Array }>((resolve) =>
      ws.on('message', (raw, isBinary) => {
        if (isBinary) resolve(decodeTerminalFrame(new Uint8Array(raw as Buffer)));
      }),
    );
    await call(ws, 9, 'terminal.write', { sessionId: 'sess-42', data: 'MARKER é\r\n' });
    const got = await frame;
    expect(got.sessionId).toBe('sess-42');
    expect(new TextDecoder().decode(got.data)).toBe('MARKER é\r\n');
    ws.close();
  });

  it('unsubscribes a client when it disconnects', async () => {
    await new Promise((r) => setTimeout(r, 100)); // earlier tests' closes settle
    const before = app.listenerCount();
    const ws = connect();
    await opened(ws);
    expect(app.listenerCount()).toBe(before + 2);
    ws.close();
    await new Promise((r) => setTimeout(r, 100));
    expect(app.listenerCount()).toBe(before);
  });
});

describe('terminal frame codec', () => {
  it('round-trips and rejects malformed frames', () => {
    const bytes = new Uint8Array([0, 255, 10, 13]);
    const frame = encodeTerminalFrame('abc', bytes);
    const back = decodeTerminalFrame(frame);
    expect(back.sessionId).toBe('abc');
    expect([...back.data]).toEqual([...bytes]);
    expect(() => decodeTerminalFrame(new Uint8Array([2, 1, 65]))).toThrow(/unknown kind/);
    expect(() => decodeTerminalFrame(new Uint8Array([1, 9, 65]))).toThrow(/length/);
    expect(() => encodeTerminalFrame('', bytes)).toThrow(/session id/);
  });
});
