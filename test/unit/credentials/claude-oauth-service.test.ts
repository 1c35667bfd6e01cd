// Storing a Claude Code subscription token through the credential service: its
// default upstream, the pastes it refuses (naming the problem, never the value),
// the user's choice between it and an API key, and the upstream test, which calls
// the HTTPS Messages API stub (test CA) the way the CLI does: Bearer plus the oauth beta.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { anthropicCredentialInUse } from '../../../common/credentials.js';
import { CredentialService } from '../../../main/credentials/credential-service.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { CredentialRefStore } from '../../../main/credentials/ref-store.js';
import { AnthropicStub } from '../../support/anthropic-stub.js';
import { createTestCa, type TestCa } from '../../support/https.js';
import { allowLoopback } from './proxy-harness.js';

const TOKEN = 'sk-ant-oat01-subscription-token-abcdef0123456789';
const API_KEY = 'sk-ant-api03-api-key-abcdef0123456789';

let ca: TestCa;
let stub: AnthropicStub;
let dir: string;
let secrets: MemorySecretStore;
let svc: CredentialService;

beforeAll(async () => {
  ca = createTestCa();
  stub = await AnthropicStub.start({ tls: ca.issue(['localhost', '127.0.0.1']) });
});
afterAll(async () => {
  await stub?.close();
  ca?.dispose();
});
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-oauth-svc-'));
  secrets = new MemorySecretStore();
  svc = new CredentialService({ refs: new CredentialRefStore(path.join(dir, 'credentials.json')), secrets, upstreamCa: ca.cert, allowAddress: allowLoopback });
  return () => rmSync(dir, { recursive: true, force: true });
});

describe('a Claude Code subscription token in the credential service', () => {
  it('is stored for api.anthropic.com by default, value in the secret store only', async () => {
    const r = await svc.set({ kind: 'claude-code-oauth', label: 'My subscription', value: TOKEN });
    expect(r).toMatchObject({ kind: 'claude-code-oauth', target: { upstream: 'https://api.anthropic.com' } });
    expect(r).not.toHaveProperty('preferred');
    expect(JSON.stringify(await svc.list())).not.toContain(TOKEN);
    expect(await secrets.reveal(r.id)).toBe(TOKEN);
  });

  it.each([
    ['an API key pasted as a subscription token', 'claude-code-oauth', API_KEY, /an Anthropic API key \(sk-ant-api\.\.\.\), not a subscription token/],
    ['a subscription token pasted as an API key', 'anthropic', TOKEN, /a Claude Code subscription token \(sk-ant-oat\.\.\.\), not an API key/],
    ['a token with the line break of the terminal it came from', 'claude-code-oauth', `${TOKEN}\n`, /line breaks/],
    ['a token with a space inside', 'claude-code-oauth', `sk-ant-oat01 ${TOKEN}`, /spaces/],
    ['a token with a control character', 'claude-code-oauth', `${TOKEN}\u0007`, /printable ASCII/],
  ] as const)('refuses %s, naming the problem and never the value', async (_what, kind, value, message) => {
    const err = await svc.set({ kind, label: 'x', value }).then(() => undefined, (e: Error) => e);
    expect(err?.name).toBe('InvalidCredential');
    expect(err?.message).toMatch(message);
    expect(err?.message).not.toContain(value.trim().slice(12));
    expect(await svc.list()).toEqual([]);
  });

  it('one preferred Anthropic credential at a time; choosing needs no value, and only Anthropic kinds can be chosen', async () => {
    const key = await svc.set({ kind: 'anthropic', label: 'Key', value: API_KEY });
    const sub = await svc.set({ kind: 'claude-code-oauth', label: 'Sub', value: TOKEN });
    expect(anthropicCredentialInUse(await svc.list())?.ref.id).toBe(key.id);

    await svc.set({ id: sub.id, kind: 'claude-code-oauth', label: 'Sub', preferred: true });
    expect(anthropicCredentialInUse(await svc.list())).toMatchObject({ ref: { id: sub.id }, reason: 'you chose it' });

    await svc.set({ id: key.id, kind: 'anthropic', label: 'Key', preferred: true });
    const refs = await svc.list();
    expect(refs.filter((r) => r.preferred).map((r) => r.id)).toEqual([key.id]);

    // A label edit keeps the choice; false goes back to the default.
    await svc.set({ id: key.id, kind: 'anthropic', label: 'Key renamed' });
    expect((await svc.list()).find((r) => r.id === key.id)?.preferred).toBe(true);
    await svc.set({ id: key.id, kind: 'anthropic', label: 'Key renamed', preferred: false });
    expect((await svc.list()).some((r) => r.preferred)).toBe(false);

    await expect(svc.set({ kind: 'openai', label: 'OpenAI', value: 'sk-openai', preferred: true })).rejects.toThrow(/only an Anthropic API key or a Claude Code subscription token can be preferred/);
  });

  it('the upstream test sends the token as Claude Code does: Bearer with the oauth beta, no x-api-key', async () => {
    const r = await svc.set({ kind: 'claude-code-oauth', label: 'Sub', value: TOKEN, target: { upstream: stub.url } });
    const before = stub.requests.length;
    const result = await svc.test(r.id, { callUpstream: true });
    expect(result).toMatchObject({ stored: true, upstream: { ok: true, status: 200 } });
    const [seen] = stub.requests.slice(before);
    expect(seen).toMatchObject({ method: 'GET', path: '/v1/models' });
    expect(seen!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(seen!.headers['anthropic-beta']).toBe('oauth-2025-04-20');
    expect(seen!.headers).not.toHaveProperty('x-api-key');
    expect(JSON.stringify(result)).not.toContain(TOKEN);
  });
});
