// A Claude Code subscription token (what `claude setup-token` prints) through a
// sandbox's proxy: the guest holds CLAUDE_CODE_OAUTH_TOKEN=<placeholder> and sends
// what the real CLI sends (recorded from the CLI, below); the upstream — the
// scripted Messages API stub over HTTPS with the test CA, verified by the proxy —
// sees `Authorization: Bearer <real token>` and the CLI's own anthropic-beta.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anthropicCredentialInUse, type CredentialRef } from '../../../common/credentials.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { CredentialProxy } from '../../../main/credentials/proxy.js';
import { planSandboxRoutes, type SandboxPlan } from '../../../main/credentials/routes.js';
import { AnthropicStub } from '../../support/anthropic-stub.js';
import { createTestCa, type TestCa } from '../../support/https.js';
import { allowLoopback, guestRequest } from './proxy-harness.js';

const REAL_TOKEN = 'sk-ant-oat01-real-subscription-token-0123456789';
const now = '2026-01-01T00:00:00.000Z';
const ref = (id: string, kind: CredentialRef['kind'], extra: Partial<CredentialRef> = {}): CredentialRef => ({
  id, kind, label: id, target: { upstream: 'https://api.anthropic.com' }, createdAt: now, updatedAt: now, ...extra,
});

/** The headers Claude Code 2.1.332 sent with CLAUDE_CODE_OAUTH_TOKEN set (recorded against the stub). */
const cliHeaders = (token: string) => ({
  accept: 'application/json',
  authorization: `Bearer ${token}`,
  'content-type': 'application/json',
  'user-agent': 'claude-cli/2.1.332 (external, sdk-cli)',
  'x-app': 'cli',
  'anthropic-version': '2023-06-01',
  'anthropic-beta': 'claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14',
  'anthropic-dangerous-direct-browser-access': 'true',
});

describe('which Anthropic credential a sandbox gets', () => {
  it('a subscription token alone: one /anthropic route with Bearer, and the guest gets CLAUDE_CODE_OAUTH_TOKEN, no ANTHROPIC_API_KEY', () => {
    const plan = planSandboxRoutes([ref('sub', 'claude-code-oauth')], { taskId: 't1' });
    expect(plan.routes).toHaveLength(1);
    expect(plan.routes[0]).toMatchObject({
      name: 'anthropic-oauth', mount: '/anthropic', credentialId: 'sub', pathPrefixes: ['/v1/'], inject: { header: 'authorization', format: 'bearer' },
    });
    expect(Object.keys(plan.guestEnv).sort()).toEqual(['ANTHROPIC_BASE_URL', 'CLAUDE_CODE_OAUTH_TOKEN']);
    expect(plan.guestEnv.ANTHROPIC_BASE_URL).toBe('http://10.0.2.100/anthropic');
    expect(plan.guestEnv.CLAUDE_CODE_OAUTH_TOKEN).toBe(plan.routes[0]!.placeholder);
    expect(plan.guestEnv.CLAUDE_CODE_OAUTH_TOKEN).toMatch(/^fiab-placeholder-[0-9a-f]{48}$/);
  });

  it('with both stored the API key wins by default, whatever the order; the guest never holds both variables', () => {
    for (const refs of [[ref('sub', 'claude-code-oauth'), ref('key', 'anthropic')], [ref('key', 'anthropic'), ref('sub', 'claude-code-oauth')]]) {
      const plan = planSandboxRoutes(refs, { taskId: 't1' });
      expect(plan.routes.map((r) => [r.name, r.credentialId])).toEqual([['anthropic', 'key']]);
      expect(plan.guestEnv.ANTHROPIC_API_KEY).toMatch(/^fiab-placeholder-/);
      expect(plan.guestEnv).not.toHaveProperty('CLAUDE_CODE_OAUTH_TOKEN');
      expect(anthropicCredentialInUse(refs)).toMatchObject({ ref: { id: 'key' }, reason: expect.stringMatching(/API key is used before a subscription token/) });
    }
  });

  it('the one the user chose wins, and the other is listed as unused', () => {
    const refs = [ref('key', 'anthropic'), ref('sub', 'claude-code-oauth', { preferred: true })];
    const plan = planSandboxRoutes(refs, { taskId: 't1' });
    expect(plan.routes.map((r) => [r.name, r.credentialId])).toEqual([['anthropic-oauth', 'sub']]);
    expect(plan.guestEnv).not.toHaveProperty('ANTHROPIC_API_KEY');
    const choice = anthropicCredentialInUse(refs)!;
    expect(choice.ref.id).toBe('sub');
    expect(choice.reason).toBe('you chose it');
    expect(choice.unused.map((r) => r.id)).toEqual(['key']);
  });

  it('between two of the same kind the first in the list is used, and the reason says so', () => {
    expect(anthropicCredentialInUse([ref('a', 'anthropic'), ref('b', 'anthropic'), ref('s', 'claude-code-oauth')])).toMatchObject({
      ref: { id: 'a' }, reason: expect.stringMatching(/API key is used before a subscription token/),
    });
    expect(anthropicCredentialInUse([ref('a', 'anthropic'), ref('b', 'anthropic')])).toMatchObject({ ref: { id: 'a' }, reason: 'the first in the list' });
    expect(anthropicCredentialInUse([ref('s1', 'claude-code-oauth'), ref('s2', 'claude-code-oauth')])).toMatchObject({ ref: { id: 's1' }, reason: 'the first in the list' });
    expect(anthropicCredentialInUse([ref('s', 'claude-code-oauth')])).toMatchObject({ ref: { id: 's' }, reason: 'the only Anthropic credential', unused: [] });
    expect(anthropicCredentialInUse([ref('o', 'openai')])).toBeUndefined();
  });

  it('an OpenAI key keeps its own route next to a subscription token', () => {
    const refs = [ref('sub', 'claude-code-oauth'), ref('oai', 'openai', { target: { upstream: 'https://api.openai.com' } })];
    const plan = planSandboxRoutes(refs, { taskId: 't1' });
    expect(plan.routes.map((r) => r.name).sort()).toEqual(['anthropic-oauth', 'openai']);
    expect(plan.guestEnv.OPENAI_API_KEY).toMatch(/^fiab-placeholder-/);
  });
});

describe('the proxy on a subscription-token route', () => {
  let ca: TestCa;
  let stub: AnthropicStub;
  let dir: string;
  let proxy: CredentialProxy;
  let plan: SandboxPlan;
  let placeholder: string;

  beforeAll(async () => {
    ca = createTestCa();
    stub = await AnthropicStub.start({ tls: ca.issue(['localhost', '127.0.0.1']), script: [{ text: 'Hi.' }] });
    dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-oauth-'));
    const secrets = new MemorySecretStore();
    await secrets.put('sub', REAL_TOKEN);
    plan = planSandboxRoutes([ref('sub', 'claude-code-oauth', { target: { upstream: stub.url } })], { taskId: 't1' });
    placeholder = plan.guestEnv.CLAUDE_CODE_OAUTH_TOKEN!;
    proxy = new CredentialProxy({ sandboxId: 'sb-oauth', socketPath: path.join(dir, 'proxy.sock'), routes: plan.routes, secrets, upstreamCa: ca.cert, allowAddress: allowLoopback });
    await proxy.listen();
  });

  afterAll(async () => {
    await proxy?.close();
    await stub?.close();
    ca?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  const send = (headers: Record<string, string>, p = '/anthropic/v1/messages?beta=true') =>
    guestRequest(proxy.socketPath, {
      method: 'POST',
      path: p,
      headers,
      body: JSON.stringify({ model: 'claude-stub', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    });

  it('what the CLI sends goes out with Bearer <real token> and the CLI\'s own oauth beta; the placeholder stays inside', async () => {
    const before = stub.requests.length;
    const reply = await send(cliHeaders(placeholder));
    expect(reply.status, reply.body).toBe(200);
    const [seen, ...more] = stub.requests.slice(before);
    expect(more).toEqual([]);
    expect(seen!.url).toBe('/v1/messages?beta=true');
    expect(seen!.headers.authorization).toBe(`Bearer ${REAL_TOKEN}`);
    expect(seen!.headers['anthropic-beta']).toContain('oauth-2025-04-20');
    expect(seen!.headers['x-app']).toBe('cli');
    expect(seen!.headers).not.toHaveProperty('x-api-key');
    expect(JSON.stringify(seen!.headers)).not.toContain(placeholder);
    expect(JSON.stringify(reply)).not.toContain(REAL_TOKEN);
    expect([...proxy.usedCredentialIds]).toEqual(['sub']);
  });

  it('an x-api-key from the guest is not passed on: the placeholder in x-api-key still becomes only a Bearer upstream', async () => {
    const before = stub.requests.length;
    const reply = await send({ 'x-api-key': placeholder, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' });
    expect(reply.status, reply.body).toBe(200);
    const seen = stub.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers).not.toHaveProperty('x-api-key');
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${REAL_TOKEN}`);
  });

  it('a guest that adds its own x-api-key next to the placeholder Bearer is refused, and nothing reaches the upstream', async () => {
    const before = stub.requests.length;
    const reply = await send({ ...cliHeaders(placeholder), 'x-api-key': 'sk-ant-api03-smuggled-by-the-guest' });
    expect(reply.status).toBe(403);
    expect(reply.body).toMatch(/not this sandbox's placeholder for rule "anthropic-oauth"/);
    expect(stub.requests.length).toBe(before);
  });

  it('a second Authorization header from the guest never reaches the upstream', async () => {
    const before = stub.requests.length;
    const reply = await guestRequest(proxy.socketPath, {
      method: 'POST',
      path: '/anthropic/v1/messages',
      // Node's client writes an array as two header lines, as a hostile guest would.
      headers: { Authorization: [`Bearer ${placeholder}`, 'Bearer attacker-token'], 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-stub', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(reply.status, reply.body).toBe(200);
    const seen = stub.requests.slice(before);
    expect(seen.map((r) => r.headers.authorization)).toEqual([`Bearer ${REAL_TOKEN}`]);
    expect(seen[0]!.rawBody).not.toContain('attacker-token');
    expect(JSON.stringify(seen[0]!.headers)).not.toContain('attacker-token');
  });

  it('a token of its own, no token, or a placeholder one character off is refused before the upstream', async () => {
    const before = stub.requests.length;
    expect((await send({ authorization: 'Bearer sk-ant-oat01-guest-own-token' })).status).toBe(403);
    expect((await send({ 'content-type': 'application/json' })).status).toBe(401);
    expect((await send({ authorization: `Bearer ${placeholder}x` })).status).toBe(403);
    expect((await send({ authorization: `Bearer ${placeholder.slice(0, -1)}` })).status).toBe(403);
    expect(stub.requests.length).toBe(before);
  });

  it('the token goes only to the Messages API paths: the OAuth endpoints that mint keys are refused', async () => {
    const before = stub.requests.length;
    for (const p of ['/anthropic/api/oauth/claude_cli/create_api_key', '/anthropic/api/oauth/profile']) {
      const reply = await send(cliHeaders(placeholder), p);
      expect(reply.status, p).toBe(403);
      expect(reply.body).toContain('rule "anthropic-oauth" allows only paths /v1/');
    }
    for (const p of ['/anthropic/v1/../api/oauth/usage', '/anthropic/v1/%2e%2e/api/oauth/usage']) {
      const reply = await send(cliHeaders(placeholder), p);
      expect(reply.status, p).toBe(403);
      expect(reply.body).toContain('is not a plain path');
    }
    expect(stub.requests.length).toBe(before);
    // The same headers on the Messages API do go through.
    expect((await send(cliHeaders(placeholder))).status).toBe(200);
  });
});
