// CredentialBroker as the app uses it: a sandbox extension that starts the
// proxy before boot and closes it after, plus the credential API methods.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CredentialEvent } from '../../../common/credentials.js';
import { CredentialBroker } from '../../../main/credentials/broker.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { appPaths } from '../../../main/state/paths.js';
import type { SandboxExtension } from '../../../main/sandbox/sandbox-ports.js';
import { createTestCa, type TestCa } from '../../support/https.js';
import { startModelStub, type ModelStub } from '../../support/model-stub.js';

const REAL = 'sk-ant-broker-test-key-abcdef0123456789';

describe('CredentialBroker', () => {
  let root: string;
  let ca: TestCa;
  let stub: ModelStub;
  let broker: CredentialBroker;
  let secrets: MemorySecretStore;
  const events: CredentialEvent[] = [];
  const paths = () => appPaths({ FACTORY_DATA_DIR: path.join(root, 'data'), FACTORY_CACHE_DIR: path.join(root, 'cache') });

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'fiab-broker-'));
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: REAL });
    secrets = new MemorySecretStore();
    broker = new CredentialBroker({
      paths: paths(),
      secrets,
      emit: (e) => events.push(e),
      upstreamCa: ca.cert,
      allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
    });
  });
  afterAll(async () => {
    await broker.dispose();
    await stub.close();
    ca.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  it('is a SandboxExtension for the task service', () => {
    const ext: SandboxExtension = broker;
    expect(ext.name).toBe('credentials');
  });

  it('stores references through the API, never returning the value; tests the upstream on request', async () => {
    const api = broker.api();
    const ref = await api['credentials.set']({ kind: 'anthropic', label: 'Anthropic', value: REAL, target: { upstream: stub.url } });
    expect(JSON.stringify(ref)).not.toContain(REAL);
    expect(JSON.stringify(await api['credentials.list']({}))).not.toContain(REAL);
    const result = await api['credentials.test']({ id: ref.id, callUpstream: true });
    expect(result).toMatchObject({ stored: true, upstream: { ok: true, status: 200 } });
    await expect(api['credentials.set']({ kind: 'custom-header', label: 'x', value: 'v', target: { upstream: 'http://plain.example' } })).rejects.toThrow(/https/);
    expect(events.some((e) => e.type === 'credentials.changed')).toBe(true);
  });

  it('prepares a proxy per sandbox, audits its requests, and releases it', async () => {
    const sandboxDir = path.join(root, 'sb', 'task1');
    const prepared = await broker.prepare({ taskId: 'task1', sandboxDir });
    expect(prepared.guestForwards).toEqual([{ guestAddress: '10.0.2.100', guestPort: 80, command: `socat - UNIX-CONNECT:${sandboxDir}/proxy.sock` }]);
    expect(prepared.guestEnv.ANTHROPIC_BASE_URL).toBe('http://10.0.2.100/anthropic');
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { socketPath: path.join(sandboxDir, 'proxy.sock'), method: 'POST', path: '/anthropic/v1/messages', headers: { 'x-api-key': prepared.guestEnv.ANTHROPIC_API_KEY!, 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end('{"model":"m","messages":[]}');
    });
    expect(status).toBe(200);
    expect(stub.requests.at(-1)!.headers['x-api-key']).toBe(REAL);
    const audit = await broker.api()['audit.list']({ sandboxId: 'task1' });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ sandboxId: 'task1', method: 'POST', rule: 'anthropic', status: 200 });
    expect(events.some((e) => e.type === 'audit.appended')).toBe(true);

    // The leak check scans what it is given; a file holding the value is a loud 'leak'.
    const planted = path.join(sandboxDir, 'planted.bin');
    writeFileSync(planted, Buffer.concat([Buffer.alloc(4096), Buffer.from(`key=${REAL}`)]));
    const report = await broker.leakCheck('task1', { overlayPath: planted, dumpMemory: async (f) => writeFileSync(f, Buffer.alloc(8192)) });
    expect(report.verdict).toBe('leak');
    expect(report.hits).toEqual([{ credentialId: expect.any(String), encoding: 'raw', source: 'overlay', offset: 4100 }]);
    expect(await broker.api()['leakcheck.get']({ taskId: 'task1' })).toEqual(report);
    expect(events.some((e) => e.type === 'leakcheck.finished' && e.report.verdict === 'leak')).toBe(true);

    // After setup froze the first disk into a layer, the stages write into overlay-1.qcow2: it is scanned too.
    writeFileSync(path.join(sandboxDir, 'overlay.qcow2'), Buffer.alloc(4096));
    writeFileSync(path.join(sandboxDir, 'overlay-1.qcow2'), Buffer.concat([Buffer.alloc(512), Buffer.from(`key=${REAL}`)]));
    const chain = await broker.leakCheck('task1', { dumpMemory: async (f) => writeFileSync(f, Buffer.alloc(8192)) });
    expect(chain.verdict).toBe('leak');
    expect(chain.hits).toEqual([{ credentialId: expect.any(String), encoding: 'raw', source: 'overlay', offset: 516 }]);

    // The guest memory a setup saved with its disk (a warm layer) is scanned as well.
    rmSync(path.join(sandboxDir, 'overlay-1.qcow2'));
    mkdirSync(path.join(sandboxDir, 'warm-overlay'), { recursive: true });
    writeFileSync(path.join(sandboxDir, 'warm-overlay', 'state'), Buffer.concat([Buffer.alloc(100), Buffer.from(REAL)]));
    const warm = await broker.leakCheck('task1', { dumpMemory: async (f) => writeFileSync(f, Buffer.alloc(8192)) });
    expect(warm.hits).toEqual([{ credentialId: expect.any(String), encoding: 'raw', source: 'file', offset: 100 }]);

    await broker.release({ taskId: 'task1' });
    expect(existsSync(path.join(sandboxDir, 'proxy.sock'))).toBe(false);
  });

  it('finds the git credential that covers a task remote, and none for others', async () => {
    const api = broker.api();
    const host = await api['credentials.set']({ kind: 'git', label: 'host-wide', value: 'tok1', target: { upstream: 'https://git.example' } });
    const org = await api['credentials.set']({ kind: 'git', label: 'org', value: 'tok2', target: { upstream: 'https://git.example/acme' } });
    expect(await broker.gitRouteForRemote('https://git.example/acme/app.git', { allowPush: true })).toEqual({ repoUrl: 'https://git.example/acme/app.git', credentialId: org.id, allowPush: true });
    expect((await broker.gitRouteForRemote('https://git.example/other/app.git'))?.credentialId).toBe(host.id);
    expect(await broker.gitRouteForRemote('https://elsewhere.example/acme/app.git')).toBeUndefined();
    expect(await broker.gitRouteForRemote('git@git.example:acme/app.git')).toBeUndefined();
    expect(await broker.gitRouteForRemote('https://user:pw@git.example/acme/app.git')).toBeUndefined();
  });

  it('puts the socket in a private temp folder when the sandbox path has spaces (macOS Application Support)', async () => {
    const sandboxDir = path.join(root, 'Application Support', 'sandboxes', 'task2');
    const prepared = await broker.prepare({ taskId: 'task2', sandboxDir });
    const command = prepared.guestForwards[0]!.command;
    expect(command).toMatch(/^socat - UNIX-CONNECT:\/\S+\/fiab-proxy-[^/ ]+\/proxy\.sock$/);
    const sock = command.slice('socat - UNIX-CONNECT:'.length);
    expect(existsSync(sock)).toBe(true);
    await broker.release({ taskId: 'task2' });
    expect(existsSync(path.dirname(sock))).toBe(false);
  });

  it('after an app restart, an on-demand leak check still knows which credentials the sandbox could use', async () => {
    const sandboxDir = path.join(root, 'sb', 'task3');
    await broker.prepare({ taskId: 'task3', sandboxDir });
    await broker.release({ taskId: 'task3' });
    const used = (await broker.service.list()).find((r) => r.kind === 'anthropic')!.id;
    // What is on disk: ids (and basic-auth user names) only, never a value.
    const recordDir = path.join(root, 'data', 'state', 'sandbox-credentials');
    const record = readFileSync(path.join(recordDir, 'task3.json'), 'utf8');
    expect(JSON.parse(record).credentials.map((c: { id: string }) => c.id)).toContain(used);
    for (const f of readdirSync(recordDir)) expect(readFileSync(path.join(recordDir, f), 'utf8')).not.toContain(REAL);

    // A new app instance (the old one's memory is gone); the sandbox's serial log held the key.
    mkdirSync(sandboxDir, { recursive: true });
    writeFileSync(path.join(sandboxDir, 'serial.log'), `boot\nkey=${REAL}\n`);
    const restarted = new CredentialBroker({ paths: paths(), secrets });
    try {
      const report = await restarted.api()['leakcheck.run']({ taskId: 'task3' });
      expect(report.credentialIds).toContain(used);
      expect(report.verdict).toBe('leak');
      expect(report.hits).toContainEqual({ credentialId: used, encoding: 'raw', source: 'serial-log', offset: 9 });
      // The VM is gone after a restart: its memory cannot be scanned, and the report says so.
      expect(report.scanned.find((s) => s.source === 'guest memory')?.error).toMatch(/not running/);

      // A task this app never prepared: nothing to look for, which is not 'clean'.
      const unknown = await restarted.api()['leakcheck.run']({ taskId: 'never-prepared' });
      expect(unknown.verdict).toBe('incomplete');
      expect(unknown.scanned.find((s) => s.source === 'credentials')?.error).toMatch(/no record of the credentials/);
      await expect(restarted.api()['leakcheck.run']({ taskId: '..' })).rejects.toThrow(/not a task id/);
    } finally {
      await restarted.dispose();
    }
  });
});
