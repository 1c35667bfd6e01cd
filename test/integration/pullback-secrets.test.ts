// The secret scan of returned work finds the exact value of a credential the
// sandbox could use, read from the real OS keychain (a Secret Service started by
// test/support/with-keyring.sh) through the credential broker, and never puts
// the value in the review. The sandbox's proxy is started as before a boot; no
// VM is needed to bring a result back into quarantine.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import { appPaths } from '../../main/state/paths.js';
import { guestFixture, type GuestFixture } from '../support/pullback-guest.js';
import { tempDir } from '../support/repo.js';

describe('secret scan with the values of the sandbox credentials', () => {
  // Not shaped like any provider's key, so only the exact-value check can find it.
  const VALUE = `fiab-${randomBytes(12).toString('hex')}`;
  let dataDir: string;
  let keychain: KeychainStore;
  let broker: CredentialBroker;
  let credentialId: string;
  const fixtures: GuestFixture[] = [];

  beforeAll(async () => {
    dataDir = tempDir('factory-secrets-');
    keychain = new KeychainStore({ service: `factory-in-a-box-review-${randomBytes(4).toString('hex')}` });
    broker = new CredentialBroker({ paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }), secrets: keychain });
    const ref = await broker.api()['credentials.set']({ kind: 'anthropic', label: 'Anthropic', value: VALUE, target: { upstream: 'https://api.anthropic.com' } });
    credentialId = ref.id;
  });

  afterAll(async () => {
    await broker?.dispose();
    await keychain?.remove(credentialId).catch(() => undefined); // teardown: the test may have ended before storing it
    for (const f of fixtures) f.cleanup();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('flags an added line holding the value, masked, and makes Approve confirm it', async () => {
    const fx = await guestFixture({ id: 'sec1' });
    fixtures.push(fx);
    await broker.prepare({ taskId: fx.id, sandboxDir: path.join(dataDir, 'sandboxes', fx.id) });
    // An agent that copied the key it saw into the repository, in two places.
    fx.guest.write('.env.local', `ANTHROPIC_API_KEY=${VALUE}\n`);
    fx.guest.write('src/client.json', `{\n  "endpoint": "https://api.anthropic.com",\n  "auth": "${VALUE}"\n}\n`);
    fx.guest.commit('cache the key');
    const q = fx.quarantine({ credentialValues: (taskId) => broker.credentialValues(taskId) });
    const { review, headCommit } = await fx.verify(q);
    const mine = review.secrets.filter((s) => s.rule === `credential:${credentialId}`);
    expect(mine.map((s) => [s.path, s.line])).toEqual([['.env.local', 1], ['src/client.json', 3]]);
    expect(mine[0]!.masked).toBe(`************ (${VALUE.length} characters): the value of credential "${credentialId}"`);
    expect(review.confirmations.find((c) => c.kind === 'secrets')!.message).toContain(`.env.local line 1 (credential:${credentialId})`);
    // The patch shows where the value is, never the value: the review is written to disk and sent to the UI.
    expect(review.patch).toContain(`+ANTHROPIC_API_KEY=[value of credential "${credentialId}"]`);
    expect(JSON.stringify(review)).not.toContain(VALUE);
    expect(JSON.stringify(review)).not.toContain(VALUE.slice(5));
    const detail = await q.fileDetail({ taskId: fx.id, baseCommit: fx.base, headCommit, path: '.env.local' });
    expect(detail.leadingBytes).toBe(`ANTHROPIC_API_KEY=${'*'.repeat(VALUE.length)}\\n`);
    expect(detail.patch).toContain(`+ANTHROPIC_API_KEY=[value of credential "${credentialId}"]`);
    expect(JSON.stringify(detail)).not.toContain(VALUE.slice(5));
  });

  it('says so when the keychain cannot give the values, instead of passing the scan', async () => {
    const fx = await guestFixture({ id: 'sec2' });
    fixtures.push(fx);
    await broker.prepare({ taskId: fx.id, sandboxDir: path.join(dataDir, 'sandboxes', fx.id) });
    fx.guest.write('notes.txt', 'nothing secret\n');
    fx.guest.commit('notes');
    const q = fx.quarantine({
      credentialValues: async (taskId) => {
        // The entry is gone from the keychain between the run and the pull-back.
        await keychain.remove(credentialId);
        try {
          return await broker.credentialValues(taskId);
        } finally {
          await keychain.put(credentialId, VALUE);
        }
      },
    });
    const { review } = await fx.verify(q);
    const c = review.confirmations.find((x) => x.kind === 'secrets')!;
    expect(c.message).toMatch(/could not be checked for the values of the sandbox's credentials: .*keychain holds no value for credential/);
    expect(JSON.stringify(review)).not.toContain(VALUE);
  });
});
