// CredentialProxy against real local upstreams: an HTTPS model-API stub and a
// git http-backend server, both with certificates from a test CA that the proxy
// verifies. The guest side is a real HTTP client on the proxy's unix socket, or
// curl/git through the same socat command QEMU's guestfwd runs.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog } from '../../../main/credentials/audit.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { CredentialProxy, type ProxyRoute } from '../../../main/credentials/proxy.js';
import { planSandboxRoutes, proxyGuestForward } from '../../../main/credentials/routes.js';
import { emulateGuestfwd, type GuestfwdEmulator } from '../../support/guestfwd.js';
import { git, gitAsync, startGitServer, type GitServer } from '../../support/git-server.js';
import { createTestCa, type TestCa } from '../../support/https.js';
import { startModelStub, type ModelStub } from '../../support/model-stub.js';
import { receivePackBody } from './proxy-harness.js';

const execFileP = promisify(execFile);
const REAL_ANTHROPIC = 'sk-ant-real-key-0123456789abcdef';
const REAL_OPENAI = 'sk-openai-real-key-9876543210';
const REAL_GIT_TOKEN = 'ghp_realgittoken1234567890';
const TASK = 't42';
const allowLoopback = (ip: string, host: string) => host === 'localhost' && (ip === '127.0.0.1' || ip === '::1');

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  firstChunkAt?: number;
  endAt?: number;
}

function request(socketPath: string, opts: { method?: string; path: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const req = http.request({ socketPath, method: opts.method ?? 'GET', path: opts.path, headers: { host: '10.0.2.100', ...opts.headers } }, (res) => {
      const chunks: Buffer[] = [];
      let firstChunkAt: number | undefined;
      res.on('data', (c: Buffer) => {
        firstChunkAt ??= Date.now() - started;
        chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), firstChunkAt, endAt: Date.now() - started }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

describe('CredentialProxy', () => {
  let ca: TestCa;
  let stub: ModelStub;
  let gitServer: GitServer;
  let dir: string;
  let proxy: CredentialProxy;
  let audit: AuditLog;
  let routes: ProxyRoute[];
  let env: Record<string, string>;
  let fwd: GuestfwdEmulator;
  const secrets = new MemorySecretStore();

  beforeAll(async () => {
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: REAL_ANTHROPIC, openaiKey: REAL_OPENAI, sseDelayMs: 60, deltas: 5 });
    gitServer = await startGitServer(ca, { user: 'x-access-token', token: REAL_GIT_TOKEN });
    gitServer.createRepo('project');
    dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-proxy-'));
    await secrets.put('anth', REAL_ANTHROPIC);
    await secrets.put('oai', REAL_OPENAI);
    await secrets.put('gh', REAL_GIT_TOKEN);
    const now = new Date().toISOString();
    const plan = planSandboxRoutes(
      [
        { id: 'anth', kind: 'anthropic', label: 'Anthropic', target: { upstream: stub.url }, createdAt: now, updatedAt: now },
        { id: 'oai', kind: 'openai', label: 'OpenAI', target: { upstream: stub.url }, createdAt: now, updatedAt: now },
        { id: 'gh', kind: 'git', label: 'Git', target: { upstream: gitServer.url }, createdAt: now, updatedAt: now },
      ],
      { taskId: TASK, git: { repoUrl: gitServer.repoUrl('project'), credentialId: 'gh', allowPush: true } },
    );
    routes = plan.routes;
    env = plan.guestEnv;
    audit = new AuditLog(path.join(dir, 'audit'));
    proxy = new CredentialProxy({
      sandboxId: 'sb1',
      socketPath: path.join(dir, 'proxy.sock'),
      routes,
      secrets,
      audit,
      upstreamCa: ca.cert,
      allowAddress: allowLoopback,
      egress: [{ name: 'stub tunnel', host: 'localhost', port: stub.port, scheme: 'https' }],
    });
    await proxy.listen();
    fwd = await emulateGuestfwd(proxyGuestForward(proxy.socketPath).command);
  });

  afterAll(async () => {
    await fwd?.close();
    await proxy?.close();
    await stub?.close();
    await gitServer?.dispose();
    ca?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('listens only on a 0600 unix socket and hands the guest placeholders, never a value', () => {
    const st = statSync(proxy.socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    const all = JSON.stringify(env);
    for (const v of [REAL_ANTHROPIC, REAL_OPENAI, REAL_GIT_TOKEN]) expect(all).not.toContain(v);
    expect(env.ANTHROPIC_BASE_URL).toBe('http://10.0.2.100/anthropic');
    expect(env.ANTHROPIC_API_KEY).toMatch(/^fiab-placeholder-[0-9a-f]{48}$/);
  });

  it('adds the real key upstream; the client only ever holds the placeholder; client auth is stripped; the body is untouched', async () => {
    const before = stub.requests.length;
    const body = JSON.stringify({ model: 'claude-stub', max_tokens: 5, messages: [{ role: 'user', content: `my key is ${env.ANTHROPIC_API_KEY}` }] });
    const reply = await request(proxy.socketPath, {
      method: 'POST',
      path: '/anthropic/v1/messages?beta=true',
      headers: {
        'x-api-key': env.ANTHROPIC_API_KEY!,
        authorization: 'Bearer client-supplied-secret',
        cookie: 'session=client-cookie',
        'proxy-authorization': 'Basic Zm9vOmJhcg==',
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
      },
      body,
    });
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.body).content[0].text).toBe('Hello from the stub.');
    expect(JSON.stringify(reply)).not.toContain(REAL_ANTHROPIC);
    const seen = stub.requests.slice(before);
    expect(seen).toHaveLength(1);
    const up = seen[0]!;
    expect(up.path).toBe('/v1/messages?beta=true');
    expect(up.headers['x-api-key']).toBe(REAL_ANTHROPIC);
    expect(up.headers.authorization).toBeUndefined();
    expect(up.headers.cookie).toBeUndefined();
    expect(up.headers['proxy-authorization']).toBeUndefined();
    expect(up.headers['anthropic-version']).toBe('2023-06-01');
    expect(up.headers.host).toBe(new URL(stub.url).host);
    // The placeholder inside the body reaches upstream byte for byte, not replaced.
    expect(up.body).toBe(body);
    expect(up.body).toContain(env.ANTHROPIC_API_KEY);
    expect(up.body).not.toContain(REAL_ANTHROPIC);
  });

  it('streams a large request body through unchanged (curl with Expect: 100-continue, chunked)', async () => {
    const before = stub.requests.length;
    const big = JSON.stringify({ model: 'claude-stub', max_tokens: 1, messages: [{ role: 'user', content: 'x'.repeat(3_000_000) + env.ANTHROPIC_API_KEY }] });
    const file = path.join(dir, 'big.json');
    writeFileSync(file, big);
    const { stdout } = await execFileP('curl', ['-sS', '-H', 'Transfer-Encoding: chunked', '-H', `x-api-key: ${env.ANTHROPIC_API_KEY}`, '-H', 'content-type: application/json', '--data-binary', `@${file}`, `${fwd.url}/anthropic/v1/messages`]);
    expect(JSON.parse(stdout).type).toBe('message');
    expect(stub.requests.length).toBe(before + 1);
    const up = stub.requests[before]!;
    expect(up.body.length).toBe(big.length);
    expect(up.body === big).toBe(true);
    expect(up.headers.expect).toBeUndefined();
    // The proxy wrote the chunked framing itself; no length the guest chose went along.
    expect(up.headers['transfer-encoding']).toBe('chunked');
    expect(up.headers['content-length']).toBeUndefined();
  });

  it('sends the OpenAI key as a Bearer header and drops a client-supplied Authorization', async () => {
    const before = stub.requests.length;
    const reply = await request(proxy.socketPath, {
      method: 'POST',
      path: '/openai/v1/chat/completions',
      headers: { authorization: `Bearer ${env.OPENAI_API_KEY}`, 'content-type': 'application/json' },
      body: '{"model":"gpt-stub","messages":[]}',
    });
    expect(reply.status).toBe(200);
    expect(stub.requests.slice(before).map((r) => [r.path, r.headers.authorization])).toEqual([['/v1/chat/completions', `Bearer ${REAL_OPENAI}`]]);
  });

  it('streams SSE through without buffering: the first event arrives well before the stream ends', async () => {
    const reply = await request(proxy.socketPath, {
      method: 'POST',
      path: '/anthropic/v1/messages',
      headers: { 'x-api-key': env.ANTHROPIC_API_KEY!, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-stub', max_tokens: 5, stream: true, messages: [] }),
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toContain('text/event-stream');
    expect(reply.body).toContain('event: message_start');
    expect(reply.body).toContain('event: content_block_delta');
    expect(reply.body.trim().endsWith('data: {"type":"message_stop"}')).toBe(true);
    // The stub spends 7 x 60 ms between its first and last event.
    expect(reply.firstChunkAt!).toBeLessThan(reply.endAt! - 250);
  });

  it('refuses an unmatched path with a 403 naming the missing rule', async () => {
    const before = stub.requestLog.length;
    const reply = await request(proxy.socketPath, { path: '/example.com/v1/x', headers: { 'x-api-key': env.ANTHROPIC_API_KEY! } });
    expect(reply.status).toBe(403);
    expect(reply.body).toMatch(/no rule matches this path/);
    expect(reply.body).toContain('/anthropic');
    const outside = await request(proxy.socketPath, { path: '/anthropic/admin/keys', headers: { 'x-api-key': env.ANTHROPIC_API_KEY! } });
    expect(outside.status).toBe(403);
    expect(outside.body).toMatch(/rule "anthropic" allows only paths \/v1\//);
    const method = await request(proxy.socketPath, { method: 'DELETE', path: '/anthropic/v1/messages', headers: { 'x-api-key': env.ANTHROPIC_API_KEY! } });
    expect(method.status).toBe(403);
    expect(method.body).toMatch(/does not allow method DELETE/);
    // An absolute-form request is a forward: only where an egress rule allows it.
    const absolute = await request(proxy.socketPath, { path: 'http://evil.example/', headers: { host: 'evil.example' } });
    expect(absolute.status).toBe(403);
    expect(absolute.body).toMatch(/no egress rule for http:\/\/evil\.example:80/);
    expect(stub.requestLog.length).toBe(before);
  });

  it('refuses a wrong placeholder (403) and a missing one (401), and never forwards them', async () => {
    const before = stub.requestLog.length;
    const wrong = await request(proxy.socketPath, { method: 'POST', path: '/anthropic/v1/messages', headers: { 'x-api-key': env.OPENAI_API_KEY! }, body: '{}' });
    expect(wrong.status).toBe(403);
    expect(wrong.body).toMatch(/not this sandbox's placeholder/);
    const real = await request(proxy.socketPath, { method: 'POST', path: '/anthropic/v1/messages', headers: { 'x-api-key': REAL_ANTHROPIC }, body: '{}' });
    expect(real.status).toBe(403);
    const none = await request(proxy.socketPath, { method: 'POST', path: '/anthropic/v1/messages', body: '{}' });
    expect(none.status).toBe(401);
    expect(none.body).toMatch(/needs this sandbox's placeholder key/);
    expect(stub.requestLog.length).toBe(before);
  });

  it('refuses destinations that resolve to loopback, private or metadata addresses', async () => {
    const strictDir = mkdtempSync(path.join(os.tmpdir(), 'fiab-strict-'));
    const targets = [
      stub.url /* localhost → 127.0.0.1 */,
      'https://169.254.169.254',
      'https://10.0.0.1',
      'https://[::1]:443',
      'https://[::ffff:127.0.0.1]',
      // 127.0.0.1 inside IPv6: IPv4-compatible, IPv4-translated, 6to4, Teredo (client bits inverted).
      `https://[::7f00:1]:${stub.port}`,
      `https://[::ffff:0:7f00:1]:${stub.port}`,
      `https://[2002:7f00:1::1]:${stub.port}`,
      `https://[2001:0:4136:e378:8000:63bf:80ff:fffe]:${stub.port}`,
    ];
    const strictRoutes: ProxyRoute[] = targets.map((u, i) => ({
      ...routes.find((r) => r.name === 'anthropic')!,
      name: `t${i}`,
      mount: `/t${i}`,
      upstream: new URL(u),
    }));
    // No allowAddress here: this proxy is configured the way the app configures it.
    const strict = new CredentialProxy({
      sandboxId: 'sb-strict',
      socketPath: path.join(strictDir, 'p.sock'),
      routes: strictRoutes,
      secrets,
      upstreamCa: ca.cert,
      egress: [{ name: 'stub tunnel', host: 'localhost', port: stub.port, scheme: 'https' }],
    });
    await strict.listen();
    try {
      const before = stub.requestLog.length;
      for (let i = 0; i < targets.length; i++) {
        const reply = await request(strict.socketPath, { method: 'POST', path: `/t${i}/v1/messages`, headers: { 'x-api-key': env.ANTHROPIC_API_KEY! }, body: '{}' });
        expect(reply.status, targets[i]).toBe(403);
        expect(reply.body).toMatch(/destination .* refused: .*(loopback|private|link-local)/);
      }
      expect(stub.requestLog.length).toBe(before);
      // An allow-listed CONNECT target is still refused when it resolves to loopback.
      const connect = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request({ socketPath: strict.socketPath, method: 'CONNECT', path: `localhost:${stub.port}` });
        req.on('connect', (res, socket) => {
          let body = '';
          socket.on('data', (c: Buffer) => (body += c.toString()));
          socket.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          socket.on('close', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.end();
      });
      expect(connect.status).toBe(403);
    } finally {
      await strict.close();
      rmSync(strictDir, { recursive: true, force: true });
    }
  });

  it('verifies upstream certificates: an upstream signed by an unknown CA fails with 502', async () => {
    const otherDir = mkdtempSync(path.join(os.tmpdir(), 'fiab-noca-'));
    const noCa = new CredentialProxy({ sandboxId: 'sb-noca', socketPath: path.join(otherDir, 'p.sock'), routes, secrets, allowAddress: allowLoopback });
    await noCa.listen();
    try {
      const reply = await request(noCa.socketPath, { method: 'POST', path: '/anthropic/v1/messages', headers: { 'x-api-key': env.ANTHROPIC_API_KEY! }, body: '{}' });
      expect(reply.status).toBe(502);
      expect(reply.body).toMatch(/certificate/i);
    } finally {
      await noCa.close();
      rmSync(otherDir, { recursive: true, force: true });
    }
  });

  it('CONNECT: tunnels only to allow-listed host:port, adding nothing', async () => {
    const refused = await new Promise<number>((resolve, reject) => {
      const req = http.request({ socketPath: proxy.socketPath, method: 'CONNECT', path: 'registry.example:443' });
      req.on('connect', (res, socket) => {
        socket.destroy();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(refused).toBe(403);
    // curl through the guestfwd command with HTTPS_PROXY: TLS end to end with the stub.
    const before = stub.requests.length;
    const { stdout } = await execFileP('curl', ['-sS', '--cacert', ca.certPath, '-x', fwd.url, '-H', `x-api-key: ${REAL_ANTHROPIC}`, '-H', 'x-probe: tunnel', `${stub.url}/v1/models`]);
    expect(JSON.parse(stdout).data[0].id).toBe('claude-stub');
    // The stub saw curl's own request, headers exactly as curl sent them: nothing added or stripped.
    const seen = stub.requests.slice(before);
    expect(seen.map((r) => [r.method, r.path, r.headers['x-probe'], r.headers['x-api-key']])).toEqual([['GET', '/v1/models', 'tunnel', REAL_ANTHROPIC]]);
    expect(Object.keys(seen[0]!.headers).sort()).toEqual(['accept', 'host', 'user-agent', 'x-api-key', 'x-probe']);
  });

  it('git: clone through the proxy works with the token added by the proxy', async () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'fiab-clone-'));
    try {
      const url = env.FACTORY_GIT_URL!.replace('10.0.2.100', `127.0.0.1:${fwd.port}`);
      const before = gitServer.authSeen.length;
      await gitAsync(['clone', '-q', url, 'repo'], work);
      expect(git(['log', '--format=%s'], path.join(work, 'repo')).trim()).toBe('fixture');
      // Every request of the clone carried the real token, and only the proxy could have added it.
      const seen = gitServer.authSeen.slice(before);
      expect(seen.length).toBeGreaterThanOrEqual(2);
      expect(new Set(seen)).toEqual(new Set([`Basic ${Buffer.from(`x-access-token:${REAL_GIT_TOKEN}`).toString('base64')}`]));
      // Nothing in the clone's config knows the real token.
      expect(git(['config', '--get', 'remote.origin.url'], path.join(work, 'repo'))).not.toContain(REAL_GIT_TOKEN);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('git: push outside refs/heads/factory/<task>/*, deletes and updates are refused; a new task branch is allowed', async () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'fiab-push-'));
    try {
      const url = env.FACTORY_GIT_URL!.replace('10.0.2.100', `127.0.0.1:${fwd.port}`);
      await gitAsync(['clone', '-q', url, 'repo'], work);
      const repo = path.join(work, 'repo');
      writeFileSync(path.join(repo, 'change.txt'), 'agent work\n');
      git(['add', '.'], repo);
      git(['commit', '-q', '-m', 'agent change'], repo);
      const refsBefore = gitServer.refs('project');
      await expect(gitAsync(['push', 'origin', 'HEAD:refs/heads/main'], repo)).rejects.toThrow(/refused: only new branches under refs\/heads\/factory\/t42\//);
      await expect(gitAsync(['push', 'origin', 'HEAD:refs/heads/factory/other-task/x'], repo)).rejects.toThrow(/refused/);
      await expect(gitAsync(['push', 'origin', 'HEAD:refs/tags/v1'], repo)).rejects.toThrow(/refused/);
      expect(gitServer.refs('project')).toEqual(refsBefore);
      await gitAsync(['push', 'origin', `HEAD:refs/heads/factory/${TASK}/work`], repo);
      expect(gitServer.refs('project')[`refs/heads/factory/${TASK}/work`]).toBe(git(['rev-parse', 'HEAD'], repo).trim());
      // A second push to the same branch is an update (could be a force): refused.
      writeFileSync(path.join(repo, 'change.txt'), 'more\n');
      git(['commit', '-qam', 'more'], repo);
      await expect(gitAsync(['push', 'origin', `HEAD:refs/heads/factory/${TASK}/work`], repo)).rejects.toThrow(/only creating new branches/);
      await expect(gitAsync(['push', 'origin', `:refs/heads/factory/${TASK}/work`], repo)).rejects.toThrow(/deleting refs is not allowed/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('records every request in the audit log, per sandbox, with rule, status and bytes (its own requests only)', async () => {
    // A proxy and an audit log of its own, so the entries are exactly this test's requests.
    const ownDir = mkdtempSync(path.join(os.tmpdir(), 'fiab-audit-'));
    const ownAudit = new AuditLog(path.join(ownDir, 'audit'));
    const own = new CredentialProxy({
      sandboxId: 'sb-audit',
      socketPath: path.join(ownDir, 'p.sock'),
      routes,
      secrets,
      audit: ownAudit,
      upstreamCa: ca.cert,
      allowAddress: allowLoopback,
      egress: [{ name: 'stub tunnel', host: 'localhost', port: stub.port, scheme: 'https' }],
    });
    await own.listen();
    try {
      const body = '{"model":"claude-stub","max_tokens":1,"messages":[]}';
      const ok = await request(own.socketPath, { method: 'POST', path: '/anthropic/v1/messages', headers: { 'x-api-key': env.ANTHROPIC_API_KEY!, 'content-type': 'application/json' }, body });
      expect(ok.status).toBe(200);
      expect((await request(own.socketPath, { path: '/nowhere' })).status).toBe(403);
      expect((await request(own.socketPath, { path: '/anthropic/v1/models', headers: { 'x-api-key': env.ANTHROPIC_API_KEY!, 'transfer-encoding': 'chunked' }, body: 'x' })).status).toBe(400);
      const gitRoute = routes.find((r) => r.git)!;
      const push = await request(own.socketPath, {
        method: 'POST',
        path: `${gitRoute.mount}/git-receive-pack`,
        headers: { authorization: `Basic ${Buffer.from(`factory:${gitRoute.placeholder}`).toString('base64')}`, 'content-type': 'application/x-git-receive-pack-request' },
        body: receivePackBody(path.join(gitServer.root, 'project.git'), 'refs/heads/main').body,
      });
      expect(push.body).toMatch(/ng refs\/heads\/main push to refs\/heads\/main refused/);
      await new Promise<void>((resolve, reject) => {
        const req = http.request({ socketPath: own.socketPath, method: 'CONNECT', path: `localhost:${stub.port}` });
        req.on('connect', (res, socket) => {
          expect(res.statusCode).toBe(200);
          socket.destroy();
          resolve();
        });
        req.on('error', reject);
        req.end();
      });
      // Entries are written as each exchange closes: wait for all five.
      let entries = await ownAudit.list('sb-audit');
      for (let i = 0; i < 100 && entries.length < 5; i++) {
        await new Promise((r) => setTimeout(r, 20));
        entries = await ownAudit.list('sb-audit');
      }
      expect(entries.map((e) => [e.method, e.rule, e.status]).sort()).toEqual(
        [
          ['POST', 'anthropic', 200],
          ['GET', 'refused: no rule', 403],
          ['GET', 'refused: framing', 400],
          ['POST', 'refused: git (push)', 200],
          ['CONNECT', 'stub tunnel', 200],
        ].sort(),
      );
      const allowed = entries.find((e) => e.rule === 'anthropic')!;
      expect(allowed.bytesIn).toBe(body.length);
      expect(allowed.bytesOut).toBe(Buffer.byteLength(ok.body));
      expect(allowed.host).toBe(new URL(stub.url).host);
      expect(allowed.path).toBe('/v1/messages');
      expect(entries.find((e) => e.rule === 'refused: git (push)')!.note).toBe('refs/heads/main');
      expect(entries.find((e) => e.rule === 'refused: framing')!.note).toMatch(/a GET request may not carry a body/);
      expect(JSON.stringify(entries)).not.toContain(REAL_ANTHROPIC);
      expect(await ownAudit.list('sb1')).toEqual([]);
    } finally {
      await own.close();
      rmSync(ownDir, { recursive: true, force: true });
    }
  });
});
