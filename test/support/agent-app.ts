// The whole app with a real agent: createFactoryApp with a temp data dir, the
// real credential broker over the real keychain (a throwaway keychain service),
// an Anthropic credential whose upstream is the scripted Messages API stub
// served over HTTPS by the test CA (the proxy verifies it), and helpers to wait
// for a task (the shared helper) and to run commands in its sandbox through
// the app's own shell.
// Used by the sandbox integration test and the agent overhead bench.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import { appPaths, type AppPaths } from '../../main/state/paths.js';
import { AnthropicStub, type AnthropicStubOptions } from './anthropic-stub.js';
import { createTestCa, type TestCa } from './https.js';
import { requireSecretService } from './keyring.js';
import { tempDir } from './repo.js';

export { waitForTask } from './wait-for-task.js';

export interface AgentApp {
  app: FactoryApp;
  stub: AnthropicStub;
  ca: TestCa;
  paths: AppPaths;
  /** The real key, stored in the keychain; only the stub should ever see it. */
  apiKey: string;
  credentialId: string;
  /** Terminal output by session id, as the UI would receive it. */
  output: Map<string, string>;
  dispose(): Promise<void>;
}

export async function startAgentApp(opts: { stub: Omit<AnthropicStubOptions, 'tls'> }): Promise<AgentApp> {
  requireSecretService();
  const dataDir = tempDir('fag-');
  const ca = createTestCa();
  const stub = await AnthropicStub.start({ ...opts.stub, tls: ca.issue(['localhost', '127.0.0.1']) });
  const paths = appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir });
  const keychain = new KeychainStore({ service: `factory-in-a-box-agents-${randomBytes(4).toString('hex')}` });
  const broker = new CredentialBroker({
    paths,
    secrets: keychain,
    upstreamCa: ca.cert,
    // The stub listens on the host loopback, which the proxy refuses for anything else.
    allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
  });
  const app = await createFactoryApp({ host: 'web', paths, credentials: broker });
  const output = new Map<string, string>();
  app.onTerminalData((e) => output.set(e.sessionId, (output.get(e.sessionId) ?? '') + Buffer.from(e.data).toString('utf8')));
  const apiKey = `sk-ant-api03-${randomBytes(24).toString('hex')}`;
  const cred = await app.api['credentials.set']({ kind: 'anthropic', label: 'Anthropic (stub)', value: apiKey, target: { upstream: stub.url } });
  return {
    app,
    stub,
    ca,
    paths,
    apiKey,
    credentialId: cred.id,
    output,
    async dispose() {
      await app.dispose();
      await keychain.remove(cred.id).catch(() => undefined); // teardown: the test may have ended before storing it
      await stub.close();
      ca.dispose();
      fs.rmSync(dataDir, { recursive: true, force: true });
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
    private readonly agentApp: Pick<AgentApp, 'app' | 'output'>,
    readonly sessionId: string,
  ) {}

  static async open(agentApp: Pick<AgentApp, 'app' | 'output'>, taskId: string): Promise<SandboxShell> {
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
