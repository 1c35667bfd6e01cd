// The whole app with a real agent: createFactoryApp with a temp data dir, the
// real credential broker over the real keychain (a throwaway keychain service),
// a credential whose upstream is a scripted model API stub served over HTTPS by
// the test CA (the proxy verifies it): the Messages API stub under an Anthropic
// key, or the Responses API stub under an OpenAI key for Codex. Helpers wait
// for a task (the shared helper) and run commands in its sandbox through the
// app's own shell.
// Used by the sandbox and agent session integration tests and the agent overhead bench.
import { randomBytes } from 'node:crypto';
import type { CredentialKind } from '../../common/credentials.js';
import type { FactoryApp } from '../../main/app.js';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import type { AppPaths } from '../../main/state/paths.js';
import { AnthropicStub, type AnthropicStubOptions } from './anthropic-stub.js';
import { createTestCa, type TestCa } from './https.js';
import { requireSecretService } from './keyring.js';
import { ResponsesStub, type ResponsesStubOptions } from './responses-stub.js';
import { startTestApp } from './test-app.js';

export { waitForTask } from './wait-for-task.js';

export interface AgentApp<Stub = AnthropicStub> {
  app: FactoryApp;
  stub: Stub;
  ca: TestCa;
  paths: AppPaths;
  /** The real key, stored in the keychain; only the stub should ever see it. */
  apiKey: string;
  credentialId: string;
  /** Terminal output by session id, as the UI would receive it. */
  output: Map<string, string>;
  /** Removes the layers of its tasks, ends the app, deletes its data folder, the credential and the stub. */
  dispose(): Promise<void>;
}

/**
 * The app with an Anthropic key whose upstream is the Messages API stub (Claude Code);
 * with `subscriptionToken`, that Claude Code subscription token in its place (no key).
 */
export function startAgentApp(opts: { stub: Omit<AnthropicStubOptions, 'tls'>; subscriptionToken?: string }): Promise<AgentApp> {
  return startAppWithStub({
    ...(opts.subscriptionToken
      ? { kind: 'claude-code-oauth', label: 'Claude subscription (stub)', apiKey: opts.subscriptionToken }
      : { kind: 'anthropic', label: 'Anthropic (stub)', apiKey: `sk-ant-api03-${randomBytes(24).toString('hex')}` }),
    startStub: (ca) => AnthropicStub.start({ ...opts.stub, tls: ca.issue(['localhost', '127.0.0.1']) }),
  });
}

/** The app with an OpenAI key whose upstream is the Responses API stub (Codex). */
export function startCodexAgentApp(opts: { stub: Omit<ResponsesStubOptions, 'apiKey' | 'ca'> }): Promise<AgentApp<ResponsesStub>> {
  const apiKey = `sk-proj-${randomBytes(24).toString('hex')}`;
  return startAppWithStub({ kind: 'openai', label: 'OpenAI (stub)', apiKey, startStub: (ca) => ResponsesStub.start({ ...opts.stub, apiKey, ca }) });
}

async function startAppWithStub<Stub extends { url: string; close(): Promise<void> }>(opts: {
  kind: CredentialKind;
  label: string;
  apiKey: string;
  startStub: (ca: TestCa) => Promise<Stub>;
}): Promise<AgentApp<Stub>> {
  requireSecretService();
  const ca = createTestCa();
  const stub = await opts.startStub(ca);
  const keychain = new KeychainStore({ service: `factory-in-a-box-agents-${randomBytes(4).toString('hex')}` });
  const env = await startTestApp('fag-', (paths) => ({
    // The stub listens on the host loopback, which the proxy refuses for anything else.
    credentials: new CredentialBroker({ paths, secrets: keychain, upstreamCa: ca.cert, allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1' }),
  }));
  const { app, paths, output } = env;
  const cred = await app.api['credentials.set']({ kind: opts.kind, label: opts.label, value: opts.apiKey, target: { upstream: stub.url } });
  return {
    app,
    stub,
    ca,
    paths,
    apiKey: opts.apiKey,
    credentialId: cred.id,
    output,
    async dispose() {
      await env.dispose();
      await keychain.remove(cred.id).catch(() => undefined); // teardown: a throwaway service's entry, nothing to report
      await stub.close();
      ca.dispose();
    },
  };
}

/**
 * A root shell in a task's sandbox opened through the app (terminal.openShell,
 * an SSH channel with a pty), used like a person at the keyboard: type a
 * command, read what it printed.
 */
export class SandboxShell {
  private seq = 0;
  private constructor(
    private readonly agentApp: Pick<AgentApp<unknown>, 'app' | 'output'>,
    readonly sessionId: string,
  ) {}

  static async open(agentApp: Pick<AgentApp<unknown>, 'app' | 'output'>, taskId: string): Promise<SandboxShell> {
    const info = await agentApp.app.api['terminal.openShell']({ taskId, cols: 200, rows: 50 });
    const shell = new SandboxShell(agentApp, info.id);
    await shell.run('stty -echo; export PAGER=cat');
    return shell;
  }

  /** Types `command`; resolves with what it printed (without the echo of the typed line). */
  async run(command: string, timeoutMs = 60_000): Promise<string> {
    const n = ++this.seq;
    // The markers are computed by the shell, so the echoed input never matches them.
    await this.type(`echo "@@B$((${n}+0))@@"; ${command}; echo "@@E$((${n}+0))@@"\n`);
    const begin = `@@B${n}@@`;
    const end = `@@E${n}@@`;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = (this.agentApp.output.get(this.sessionId) ?? '').replace(/\r/g, '');
      const e = text.lastIndexOf(end);
      if (e >= 0) {
        const b = text.lastIndexOf(begin, e);
        return text.slice(b + begin.length, e).replace(/^\n/, '');
      }
      if (Date.now() > deadline) throw new Error(`guest shell: no answer to ${JSON.stringify(command).slice(0, 200)} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Types raw input without waiting. */
  async type(data: string): Promise<void> {
    await this.agentApp.app.api['terminal.write']({ sessionId: this.sessionId, data });
  }

  async close(): Promise<void> {
    await this.agentApp.app.api['terminal.close']({ sessionId: this.sessionId }).catch(() => undefined); // closing a session that ended already is fine
  }
}
