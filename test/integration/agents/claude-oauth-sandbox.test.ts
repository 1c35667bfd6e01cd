// The real Claude Code CLI in a real sandbox, signed in with a subscription
// token: the user stored what `claude setup-token` prints (a Claude Code
// subscription token) in the real keychain and no API key. The model API is the
// scripted Messages API stub over HTTPS (test CA, verified by the proxy). Setup
// as in claude-code-sandbox.test.ts, with the subscription kind in place of the key.
//  1. the plan stage's first model request is held: the stub got the real token
//     as a Bearer, with the CLI's oauth beta; the agent process and the guest's
//     environment file hold only the placeholder, under CLAUDE_CODE_OAUTH_TOKEN;
//  2. from a root shell in the sandbox, the placeholder reaches nothing but the
//     Messages API, and an x-api-key the guest adds is not passed on;
//  3. after cancel and destroy, the leak check finds no trace of the token.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApp } from '../../../main/app.js';
import { stageOfRequest, type AnthropicStub } from '../../support/anthropic-stub.js';
import { SandboxShell, startAgentApp, type AgentApp } from '../../support/agent-app.js';
import { testImage } from '../../support/image.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';

const TOKEN = `sk-ant-oat01-${randomBytes(32).toString('base64url')}`;

let env: AgentApp | undefined;
let app: FactoryApp;
let stub: AnthropicStub;
let repo: FixtureRepo;
let output: Map<string, string>;
let releaseHold: () => void = () => undefined;
const hold = new Promise<void>((resolve) => (releaseHold = resolve));

beforeAll(async () => {
  await testImage();
  env = await startAgentApp({
    subscriptionToken: TOKEN,
    // Every agent request waits: the test looks at the sandbox while the CLI is mid-request.
    stub: { script: (req) => (stageOfRequest(req) === 'plan' ? { hold, text: 'too late' } : { text: 'Done.' }) },
  });
  ({ app, stub, output } = env);
  repo = await makeRepo({
    files: { 'README.md': '# Fixture\n', '.factory/pipeline.json': JSON.stringify({ agent: 'claude-code' }) },
  });
}, 15 * 60_000);

afterAll(async () => {
  releaseHold();
  await env?.dispose();
  repo?.cleanup();
});

describe('Claude Code with a subscription token in a real sandbox', () => {
  let taskId = '';
  let shell: SandboxShell;

  it('the stub gets the real token as a Bearer with the oauth beta; the agent holds only the placeholder', async () => {
    const created = await app.api['tasks.create']({ repoPath: repo.dir, title: 'Say hello' });
    taskId = created.id;
    expect(created.agent).toBe('claude-code');
    const started = Date.now();
    const first = await stub.waitFor((r) => stageOfRequest(r) === 'plan', 6 * 60_000);
    console.log(`claude-oauth-sandbox: first plan request ${((Date.now() - started) / 1000).toFixed(1)} s after create`);
    expect(first.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(String(first.headers['anthropic-beta']).split(',')).toContain('oauth-2025-04-20');
    expect(first.headers).not.toHaveProperty('x-api-key');
    for (const r of stub.requests) {
      expect(r.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(JSON.stringify(r.headers)).not.toContain('fiab-placeholder-');
    }

    shell = await SandboxShell.open(env!, taskId);
    const pid = Number((await shell.run('pgrep -u agent -f /usr/local/bin/claude | head -1')).trim());
    expect(pid, 'no Claude Code process in the guest').toBeGreaterThan(1);
    const agentEnv = await shell.run(`tr '\\0' '\\n' < /proc/${pid}/environ | grep -E '^(ANTHROPIC_|CLAUDE_CODE_OAUTH)'`);
    expect(agentEnv).toContain('ANTHROPIC_BASE_URL=http://10.0.2.100/anthropic');
    expect(agentEnv).toMatch(/CLAUDE_CODE_OAUTH_TOKEN=fiab-placeholder-[0-9a-f]{48}/);
    expect(agentEnv).not.toContain('ANTHROPIC_API_KEY');
    expect(agentEnv).not.toContain(TOKEN);
    const envFile = await shell.run('cat /work/.factory/env.sh');
    expect(envFile).toMatch(/CLAUDE_CODE_OAUTH_TOKEN='fiab-placeholder-/);
    expect(envFile).not.toContain('ANTHROPIC_API_KEY');
    expect(envFile).not.toContain(TOKEN);
  });

  it('from a root shell in the sandbox, the placeholder opens only the Messages API and a guest x-api-key is not passed on', async () => {
    const before = stub.requests.length;
    const curl = (args: string) =>
      shell.run(`. /work/.factory/env.sh; curl -s -o /dev/null -w '%{http_code}\\n' ${args} -H "authorization: Bearer $CLAUDE_CODE_OAUTH_TOKEN"`);
    // The OAuth endpoints that mint API keys or read the account are not on the route.
    expect((await curl('-X POST http://10.0.2.100/anthropic/api/oauth/claude_cli/create_api_key')).trim()).toBe('403');
    expect((await curl('http://10.0.2.100/anthropic/api/oauth/profile')).trim()).toBe('403');
    expect(stub.requests.length).toBe(before);
    // The models list is on the route: it goes out with the token, and the guest's x-api-key stays behind.
    expect((await shell.run(
      `. /work/.factory/env.sh; curl -s -o /dev/null -w '%{http_code}\\n' http://10.0.2.100/anthropic/v1/models -H "x-api-key: $CLAUDE_CODE_OAUTH_TOKEN"`,
    )).trim()).toBe('200');
    const seen = stub.requests.slice(before);
    expect(seen.map((r) => r.path)).toEqual(['/v1/models']);
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(seen[0]!.headers).not.toHaveProperty('x-api-key');
    const audit = await app.api['audit.list']({ sandboxId: taskId });
    expect(audit.filter((e) => e.rule === 'refused: anthropic-oauth').length).toBeGreaterThanOrEqual(2);
  });

  it('after cancel and destroy the leak check of the sandbox is clean', async () => {
    await shell.close();
    const cancelled = await app.api['tasks.cancel']({ taskId });
    expect(cancelled.phase).toBe('cancelled');
    releaseHold();
    const t = await app.api['tasks.destroy']({ taskId });
    expect(t.sandbox.status).toBe('destroyed');
    const report = await app.api['leakcheck.get']({ taskId });
    expect(report?.credentialIds).toEqual([env!.credentialId]);
    expect(report?.scanned.map((s) => s.source)).toEqual(expect.arrayContaining(['disk overlay', 'guest memory']));
    expect(report?.hits).toEqual([]);
    expect(report?.verdict).toBe('clean');
    for (const text of output.values()) expect(text).not.toContain(TOKEN);
  });
});
