// The broker as the task service drives a sandbox's egress: the rules it
// starts with, the step of each stage, rules the user allows later, and a
// refusal announced as an event. The guest sees a real plain-HTTP mirror on
// loopback through the proxy's socket, the way its http_proxy sends requests.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CredentialEvent } from '../../../common/credentials.js';
import { CredentialBroker } from '../../../main/credentials/broker.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { appPaths } from '../../../main/state/paths.js';
import { rawExchange, startHttpUpstream, statuses, type HttpUpstream } from './egress-harness.js';

describe('CredentialBroker egress', () => {
  let root: string;
  let mirror: HttpUpstream;
  let broker: CredentialBroker;
  const events: CredentialEvent[] = [];

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'fiab-broker-egress-'));
    mirror = await startHttpUpstream();
    broker = new CredentialBroker({
      paths: appPaths({ FACTORY_DATA_DIR: path.join(root, 'data'), FACTORY_CACHE_DIR: path.join(root, 'cache') }),
      secrets: new MemorySecretStore(),
      emit: (e) => events.push(e),
      allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
    });
  });
  afterAll(async () => {
    await broker.dispose();
    await mirror.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('starts a sandbox with its egress rules and the proxy variables, follows setStep and allowEgress, and announces refusals', async () => {
    const sandboxDir = path.join(root, 'sb', 'task-e');
    const at = `localhost:${mirror.port}`;
    const prepared = await broker.prepare({
      taskId: 'task-e',
      sandboxDir,
      egress: [{ name: 'mirror', host: 'localhost', port: mirror.port, scheme: 'http', steps: ['setup'] }],
    });
    expect(prepared.guestEnv).toMatchObject({
      HTTP_PROXY: 'http://10.0.2.100:80',
      HTTPS_PROXY: 'http://10.0.2.100:80',
      http_proxy: 'http://10.0.2.100:80',
      https_proxy: 'http://10.0.2.100:80',
      NO_PROXY: '10.0.2.100,localhost,127.0.0.1',
      no_proxy: '10.0.2.100,localhost,127.0.0.1',
    });
    const socket = path.join(sandboxDir, 'proxy.sock');
    const get = (p: string) => rawExchange(socket, `GET http://${at}${p} HTTP/1.1\r\nhost: ${at}\r\nconnection: close\r\n\r\n`);
    expect(statuses(await get('/a'))).toEqual([200]);
    broker.setStep('task-e', 'test');
    expect(statuses(await get('/b'))).toEqual([403]);
    broker.allowEgress('task-e', [{ name: 'mirror in test', host: 'localhost', port: mirror.port, scheme: 'http', steps: ['test'] }]);
    expect(statuses(await get('/c'))).toEqual([200]);
    expect(mirror.seen.map((s) => s.url)).toEqual(['/a', '/c']);
    const refused = events.filter((e) => e.type === 'egress.refused');
    expect(refused).toEqual([
      {
        type: 'egress.refused',
        refusal: expect.objectContaining({ sandboxId: 'task-e', step: 'test', scheme: 'http', host: 'localhost', port: mirror.port, method: 'GET', path: '/b', reason: 'rule "mirror" does not apply in step test (only in setup)' }),
      },
    ]);
    const audit = await broker.audit.list('task-e');
    expect(audit.map((e) => [e.path, e.step, e.rule])).toEqual([
      ['/a', 'setup', 'mirror'],
      ['/b', 'test', 'refused: rule "mirror" does not apply in step test (only in setup)'],
      ['/c', 'test', 'mirror in test'],
    ]);
    await broker.release({ taskId: 'task-e' });
    expect(() => broker.setStep('task-e', 'build')).toThrow(/has no running sandbox proxy/);
    expect(() => broker.allowEgress('task-e', [])).toThrow(/has no running sandbox proxy/);
  });

  it('refuses to start a sandbox with an invalid rule, naming it', async () => {
    await expect(
      broker.prepare({ taskId: 'task-bad', sandboxDir: path.join(root, 'sb', 'task-bad'), egress: [{ name: 'metadata', host: '169.254.169.254', port: 80, scheme: 'http' }] }),
    ).rejects.toThrow(/egress rule 0 \("metadata"\) is invalid: host: .*IP literal/);
    expect(broker.proxyFor('task-bad')).toBeUndefined();
    expect(existsSync(path.join(root, 'sb', 'task-bad'))).toBe(false);
  });
});
