// The whole app (web host) with the remote-host rig as a sandbox host in its
// Settings, the real credential broker over the real keychain (a throwaway
// service) and an Anthropic credential whose upstream is the model stub served
// over HTTPS by the test CA, and a fixture repository. Used by the tests of
// tasks on a remote host; the rig itself stays the test's (it starts and stops it).
import { randomBytes } from 'node:crypto';
import type { FactoryApp } from '../../main/app.js';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import type { Settings } from '../../main/state/settings.js';
import { createTestCa } from './https.js';
import { requireSecretService } from './keyring.js';
import { startModelStub, type ModelStub } from './model-stub.js';
import type { RemoteHostRig } from './remote-host.js';
import { makeRepo, type FixtureRepo } from './repo.js';
import { startTestApp } from './test-app.js';

export interface RemoteApp {
  app: FactoryApp;
  stub: ModelStub;
  repo: FixtureRepo;
  /** Terminal output by session id, as the UI would receive it. */
  output: Map<string, string>;
  dispose(): Promise<void>;
}

export async function startRemoteApp(opts: {
  rig: RemoteHostRig;
  /** The real key: stored in the keychain, expected by the stub. */
  key: string;
  /** Sandboxes the rig may run at once. */
  capacity: number;
  files: Record<string, string>;
  sseDelayMs: number;
  settings?: Partial<Settings>;
}): Promise<RemoteApp> {
  requireSecretService();
  const ca = createTestCa();
  const stub = await startModelStub(ca, { anthropicKey: opts.key, sseDelayMs: opts.sseDelayMs });
  const repo = await makeRepo({ files: opts.files });
  const keychain = new KeychainStore({ service: `factory-in-a-box-remote-${randomBytes(4).toString('hex')}` });
  const env = await startTestApp('fra-', (paths) => ({
    // The stub listens on the host loopback, which the proxy refuses for anything else.
    credentials: new CredentialBroker({ paths, secrets: keychain, upstreamCa: ca.cert, allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1' }),
    settings: { ...opts.settings, sandboxHosts: [opts.rig.hostSetting(opts.capacity)] },
  }));
  const { app, output } = env;
  const credential = await app.api['credentials.set']({ kind: 'anthropic', label: 'Anthropic (stub)', value: opts.key, target: { upstream: stub.url } });
  return {
    app,
    stub,
    repo,
    output,
    async dispose() {
      await env.dispose();
      await keychain.remove(credential.id).catch(() => undefined); // teardown: the test may have ended before storing it
      await stub.close();
      ca.dispose();
      repo.cleanup();
    },
  };
}
