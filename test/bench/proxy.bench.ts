// Credential proxy benchmark, run with: npx tsx test/bench/proxy.bench.ts
// One local HTTPS model-API stub (test CA). In the same run, alternating:
//   direct   — node https client → stub (keep-alive), as a host process would call it;
//   proxy    — node http client on the proxy's unix socket (keep-alive) → proxy → stub;
//   socat    — a new connection per request through the exact guestfwd command
//              (socat - UNIX-CONNECT:sock), as each fresh guest connection costs.
// Prints p50/p99 of a small JSON POST /v1/messages for each and the added
// latency, then the time to first byte of an SSE stream direct vs proxied.
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { MemorySecretStore } from '../../main/credentials/keychain.js';
import { CredentialProxy } from '../../main/credentials/proxy.js';
import { planSandboxRoutes, proxyGuestForward } from '../../main/credentials/routes.js';
import { emulateGuestfwd } from '../support/guestfwd.js';
import { createTestCa } from '../support/https.js';
import { startModelStub } from '../support/model-stub.js';

const N = Number(process.env.BENCH_REQUESTS ?? 400);
const SSE_ROUNDS = Number(process.env.BENCH_SSE_ROUNDS ?? 40);
const KEY = 'sk-ant-bench-key-0123456789abcdef';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const ms = (x: number) => `${x.toFixed(2)} ms`;
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;

interface Timing {
  total: number;
  ttfb: number;
}

function timed(send: (onRes: (res: http.IncomingMessage) => void) => http.ClientRequest, body: string): Promise<Timing> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    let ttfb = 0;
    const req = send((res) => {
      res.once('data', () => (ttfb = Number(process.hrtime.bigint() - t0) / 1e6));
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
        else resolve({ total: Number(process.hrtime.bigint() - t0) / 1e6, ttfb });
      });
      res.resume();
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main() {
  const ca = createTestCa();
  const stub = await startModelStub(ca, { anthropicKey: KEY, sseDelayMs: 25, deltas: 4 });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fpb-'));
  const secrets = new MemorySecretStore();
  await secrets.put('anth', KEY);
  const now = new Date().toISOString();
  const plan = planSandboxRoutes([{ id: 'anth', kind: 'anthropic', label: 'bench', target: { upstream: stub.url }, createdAt: now, updatedAt: now }], { taskId: 'bench' });
  const proxy = new CredentialProxy({
    sandboxId: 'bench',
    socketPath: path.join(dir, 'proxy.sock'),
    routes: plan.routes,
    secrets,
    upstreamCa: ca.cert,
    allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
  });
  await proxy.listen();
  const fwd = await emulateGuestfwd(proxyGuestForward(proxy.socketPath).command);
  const placeholder = plan.guestEnv.ANTHROPIC_API_KEY!;
  const stubUrl = new URL(stub.url);
  const directAgent = new https.Agent({ keepAlive: true, ca: ca.cert, maxSockets: 1 });
  const proxyAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });

  const json = JSON.stringify({ model: 'claude-stub', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
  const sse = JSON.stringify({ model: 'claude-stub', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'hi' }] });
  const headers = { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' };
  const direct = (body: string) =>
    timed(
      (cb) => https.request({ host: 'localhost', port: stubUrl.port, path: '/v1/messages', method: 'POST', agent: directAgent, headers: { ...headers, 'x-api-key': KEY } }, cb),
      body,
    );
  const viaProxy = (body: string) =>
    timed(
      (cb) => http.request({ socketPath: proxy.socketPath, path: '/anthropic/v1/messages', method: 'POST', agent: proxyAgent, headers: { ...headers, 'x-api-key': placeholder } }, cb),
      body,
    );
  const viaSocat = (body: string) =>
    timed(
      (cb) => http.request({ host: '127.0.0.1', port: fwd.port, path: '/anthropic/v1/messages', method: 'POST', agent: false, headers: { ...headers, 'x-api-key': placeholder, connection: 'close' } }, cb),
      body,
    );

  // Warm up every path (TLS sessions, keep-alive sockets, JIT).
  for (let i = 0; i < 30; i++) {
    await direct(json);
    await viaProxy(json);
    await viaSocat(json);
  }
  const d: number[] = [];
  const p: number[] = [];
  const s: number[] = [];
  for (let i = 0; i < N; i++) {
    d.push((await direct(json)).total);
    p.push((await viaProxy(json)).total);
    if (i % 4 === 0) s.push((await viaSocat(json)).total);
  }
  console.log(`JSON POST /v1/messages, ${N} requests each, alternating (socat: ${s.length})`);
  console.log(`  direct (https keep-alive)        p50 ${ms(pct(d, 50))}  p99 ${ms(pct(d, 99))}`);
  console.log(`  proxy (unix socket keep-alive)   p50 ${ms(pct(p, 50))}  p99 ${ms(pct(p, 99))}`);
  console.log(`  proxy via guestfwd socat (new connection each)  p50 ${ms(pct(s, 50))}  p99 ${ms(pct(s, 99))}`);
  console.log(`  added by the proxy: p50 +${ms(pct(p, 50) - pct(d, 50))}, p99 +${ms(pct(p, 99) - pct(d, 99))}; with a socat connection per request: p50 +${ms(pct(s, 50) - pct(d, 50))}`);
  console.log(`  ratio proxy/direct: p50 ${ratio(pct(p, 50), pct(d, 50))}  p99 ${ratio(pct(p, 99), pct(d, 99))}`);

  const dt: number[] = [];
  const pt: number[] = [];
  const dEnd: number[] = [];
  const pEnd: number[] = [];
  for (let i = 0; i < SSE_ROUNDS; i++) {
    const a = await direct(sse);
    const b = await viaProxy(sse);
    dt.push(a.ttfb);
    pt.push(b.ttfb);
    dEnd.push(a.total);
    pEnd.push(b.total);
  }
  console.log(`SSE stream (first event at once, then 6 events 25 ms apart), ${SSE_ROUNDS} rounds`);
  console.log(`  time to first byte: direct p50 ${ms(pct(dt, 50))} p99 ${ms(pct(dt, 99))}; proxy p50 ${ms(pct(pt, 50))} p99 ${ms(pct(pt, 99))}`);
  console.log(`  whole stream:       direct p50 ${ms(pct(dEnd, 50))}; proxy p50 ${ms(pct(pEnd, 50))}`);
  console.log(`  ratio proxy/direct: first byte p50 ${ratio(pct(pt, 50), pct(dt, 50))}  p99 ${ratio(pct(pt, 99), pct(dt, 99))}; whole stream p50 ${ratio(pct(pEnd, 50), pct(dEnd, 50))}`);

  directAgent.destroy();
  proxyAgent.destroy();
  await fwd.close();
  await proxy.close();
  await stub.close();
  ca.dispose();
  rmSync(dir, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
