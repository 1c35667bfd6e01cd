// Changing where a stored credential goes. Someone who can call the API (a
// compromised page, a careless script) but does not know a key must not be
// able to redirect it: a new upstream, path rule, method, header, format or
// basic-auth user needs the value entered again. Real Secret Service (run
// under test/support/with-keyring.sh), the broker's API, its per-sandbox proxy
// and two real HTTPS upstreams with the test CA: the second one stands for the
// attacker's server and must never see the key.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CredentialRef } from '../../common/credentials.js';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { CredentialService } from '../../main/credentials/credential-service.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import { CredentialRefStore } from '../../main/credentials/ref-store.js';
import { appPaths } from '../../main/state/paths.js';
import { createTestCa, type TestCa } from '../support/https.js';
import { requireSecretService } from '../support/keyring.js';
import { startModelStub, type ModelStub } from '../support/model-stub.js';

const KEY = `sk-ant-dest-${randomBytes(16).toString('hex')}`;
const NEW_KEY = `sk-ant-dest-new-${randomBytes(16).toString('hex')}`;

describe('changing where a stored credential is sent', () => {
  let root: string;
  let ca: TestCa;
  let home: ModelStub;
  let elsewhere: ModelStub;
  let keychain: KeychainStore;
  let broker: CredentialBroker;
  const ids: string[] = [];

  beforeAll(async () => {
    requireSecretService();
    root = mkdtempSync(path.join(os.tmpdir(), 'fiab-dest-'));
    ca = createTestCa();
    // Both accept the key, so only the proxy's routing decides who receives it.
    home = await startModelStub(ca, { anthropicKey: KEY });
    elsewhere = await startModelStub(ca, { anthropicKey: NEW_KEY });
    keychain = new KeychainStore({ service: `factory-in-a-box-dest-${randomBytes(4).toString('hex')}` });
    broker = new CredentialBroker({
      paths: appPaths({ FACTORY_DATA_DIR: path.join(root, 'data'), FACTORY_CACHE_DIR: path.join(root, 'cache') }),
      secrets: keychain,
      upstreamCa: ca.cert,
      allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
    });
  });
  afterAll(async () => {
    await broker?.dispose();
    for (const id of ids) await keychain.remove(id).catch(() => undefined); // teardown: the test may have ended before storing it
    await home?.close();
    await elsewhere?.close();
    ca?.dispose();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** What a sandbox does: one model API call through its proxy, with its placeholder. */
  async function callThroughSandbox(taskId: string): Promise<number> {
    const sandboxDir = path.join(root, 'sb', taskId);
    const prepared = await broker.prepare({ taskId, sandboxDir });
    try {
      return await new Promise<number>((resolve, reject) => {
        const req = http.request(
          {
            socketPath: path.join(sandboxDir, 'proxy.sock'),
            method: 'POST',
            path: '/anthropic/v1/messages',
            headers: { 'x-api-key': prepared.guestEnv.ANTHROPIC_API_KEY!, 'content-type': 'application/json' },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end('{"model":"m","max_tokens":1,"messages":[]}');
      });
    } finally {
      await broker.release({ taskId });
    }
  }

  const keysSeenBy = (stub: ModelStub) => stub.requests.map((r) => r.headers['x-api-key']);

  it('refuses to point a stored key at another host without the value, and the next request still goes home', async () => {
    const api = broker.api();
    const ref = await api['credentials.set']({ kind: 'anthropic', label: 'Anthropic', value: KEY, target: { upstream: home.url } });
    ids.push(ref.id);
    const attempt = api['credentials.set']({ id: ref.id, kind: 'anthropic', label: 'Anthropic', target: { upstream: elsewhere.url } });
    await expect(attempt).rejects.toMatchObject({ name: 'CredentialValueRequired' });
    await expect(attempt).rejects.toThrow(/changing where credential ".*" is sent \(upstream: .* → .*\) needs its value entered again/);
    expect((await api['credentials.list']({})).find((r) => r.id === ref.id)!.target.upstream).toBe(home.url);

    expect(await callThroughSandbox('dest1')).toBe(200);
    expect(keysSeenBy(home)).toEqual([KEY]);
    expect(elsewhere.requests).toEqual([]);
  });

  it('with the value entered again, the next request carries the new value to the new host', async () => {
    const api = broker.api();
    const [ref] = (await api['credentials.list']({})).filter((r) => r.kind === 'anthropic');
    await api['credentials.set']({ id: ref!.id, kind: 'anthropic', label: 'Anthropic', value: NEW_KEY, target: { upstream: elsewhere.url } });
    expect(await callThroughSandbox('dest2')).toBe(200);
    expect(keysSeenBy(elsewhere)).toEqual([NEW_KEY]);
    expect(keysSeenBy(home)).toEqual([KEY]); // nothing new went home, and the old key never left it
    expect(await keychain.reveal(ref!.id)).toBe(NEW_KEY);
  });

  it('a change that keeps the destination needs no value (label, the same URL spelled with a slash, the defaults spelled out)', async () => {
    const api = broker.api();
    const [ref] = (await api['credentials.list']({})).filter((r) => r.kind === 'anthropic');
    const renamed = await api['credentials.set']({
      id: ref!.id,
      kind: 'anthropic',
      label: 'Renamed',
      target: { upstream: `${elsewhere.url}/`, pathPrefixes: ['/v1/'], methods: ['POST', 'GET'] },
    });
    expect(renamed.label).toBe('Renamed');
    expect(await keychain.reveal(ref!.id)).toBe(NEW_KEY);
  });

  it('every field that decides where or how a value is sent needs the value: path, method, header, format, user name', async () => {
    const api = broker.api();
    const custom = await api['credentials.set']({
      kind: 'custom-header',
      label: 'Search API',
      value: 'custom-secret-value-1234',
      target: { upstream: home.url, header: 'x-search-key', pathPrefixes: ['/search/'], methods: ['GET'] },
    });
    const gitRef = await api['credentials.set']({ kind: 'git', label: 'Git', value: 'ghp_gitvalue1234567890', target: { upstream: home.url } });
    ids.push(custom.id, gitRef.id);
    const tries: Array<[CredentialRef, Record<string, unknown>, RegExp]> = [
      [custom, { pathPrefixes: ['/'] }, /path rules: "\/search\/" → "\/"/],
      [custom, { methods: ['GET', 'DELETE'] }, /methods: "GET" → "DELETE GET"/],
      [custom, { header: 'authorization' }, /header: "x-search-key" → "authorization"/],
      [custom, { format: 'bearer' }, /format: "raw" → "bearer"/],
      [custom, { upstream: `${home.url}/other` }, /upstream: /],
      [gitRef, { username: 'someone-else' }, /username: "x-access-token" → "someone-else"/],
      [gitRef, { upstream: elsewhere.url }, /upstream: /],
    ];
    for (const [ref, target, why] of tries) {
      const attempt = api['credentials.set']({ id: ref.id, kind: ref.kind, label: ref.label, target });
      await expect(attempt, JSON.stringify(target)).rejects.toMatchObject({ name: 'CredentialValueRequired' });
      await expect(attempt, JSON.stringify(target)).rejects.toThrow(why);
    }
    const after = await api['credentials.list']({});
    expect(after.find((r) => r.id === custom.id)!.target).toEqual(custom.target);
    expect(after.find((r) => r.id === gitRef.id)!.target).toEqual(gitRef.target);
    // The messages name fields and destinations, never a value.
    const err = await api['credentials.set']({ id: custom.id, kind: 'custom-header', label: 'x', target: { header: 'x-other' } }).catch((e: Error) => e);
    expect(String((err as Error).message)).not.toContain('custom-secret-value-1234');
  });

  it('a label edit racing a destination change cannot put the old destination back under the new value', async () => {
    // The real reference store, with a hook that lets the test act the moment the move starts writing.
    class Observed extends CredentialRefStore {
      onUpdate?: () => void;
      override update(fn: (refs: CredentialRef[]) => CredentialRef[]): Promise<CredentialRef[]> {
        const p = super.update(fn);
        this.onUpdate?.();
        return p;
      }
    }
    const refs = new Observed(path.join(root, 'race', 'credentials.json'));
    const svc = new CredentialService({ refs, secrets: keychain });
    const ref = await svc.set({ kind: 'anthropic', label: 'A', value: KEY, target: { upstream: home.url } });
    ids.push(ref.id);
    const writing = new Promise<void>((r) => (refs.onUpdate = r));
    const move = svc.set({ id: ref.id, kind: 'anthropic', label: 'A', value: NEW_KEY, target: { upstream: elsewhere.url } });
    await writing;
    const relabel = svc.set({ id: ref.id, kind: 'anthropic', label: 'Relabelled' });
    await Promise.all([move, relabel]);
    const final = (await svc.list()).find((r) => r.id === ref.id)!;
    expect(await keychain.reveal(ref.id)).toBe(NEW_KEY);
    expect(final.target.upstream).toBe(elsewhere.url);
    expect(final.label).toBe('Relabelled');
  });

  it('if the new destination cannot be recorded, the new value is removed rather than sent to the old one', async () => {
    class FullDisk extends CredentialRefStore {
      failNext = false;
      override update(fn: (refs: CredentialRef[]) => CredentialRef[]): Promise<CredentialRef[]> {
        if (this.failNext) return Promise.reject(new Error('ENOSPC: no space left on device'));
        return super.update(fn);
      }
    }
    // A double for a full disk, which cannot be produced here on demand.
    const refs = new FullDisk(path.join(root, 'full', 'credentials.json'));
    const svc = new CredentialService({ refs, secrets: keychain });
    const ref = await svc.set({ kind: 'anthropic', label: 'A', value: KEY, target: { upstream: home.url } });
    ids.push(ref.id);
    refs.failNext = true;
    await expect(svc.set({ id: ref.id, kind: 'anthropic', label: 'A', value: NEW_KEY, target: { upstream: elsewhere.url } })).rejects.toThrow(/ENOSPC/);
    expect((await svc.list())[0]!.target.upstream).toBe(home.url);
    expect(await keychain.has(ref.id)).toBe(false);
  });
});
