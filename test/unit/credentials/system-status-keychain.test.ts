// The header's keychain state as the host reports it (system.status), against
// the real Secret Service of test/support/with-keyring.sh, and with the session
// bus pointed at a socket that does not exist, as on a machine with no keychain.
// No VM: the image store and QEMU are stand-ins, which nothing here needs.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import type { ImageStatus } from '../../../common/domain.js';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { KeychainStore } from '../../../main/credentials/keychain.js';
import { appPaths } from '../../../main/state/paths.js';
import { runnable } from '../../support/cli.js';
import { requireSecretService } from '../../support/keyring.js';
import { tempDir } from '../../support/repo.js';

const run = promisify(execFile);
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function startApp(): Promise<FactoryApp> {
  const dataDir = tempDir('status-keychain-');
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const status: ImageStatus = { state: 'missing', version: 'test' };
  const app = await createFactoryApp({
    host: 'web',
    paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }),
    vm: {
      images: { status: () => status, ensure: async () => { throw new Error('no image in unit tests'); } },
      qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
    },
  });
  cleanups.push(() => app.dispose());
  return app;
}

describe('system.status keychain', () => {
  it('says the keychain is available when the Secret Service answers, and stores nothing to find out', async () => {
    requireSecretService();
    const app = await startApp();
    const started = Date.now();
    expect((await app.api['system.status']({})).keychain).toEqual({ ok: true });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(await new KeychainStore().has('availability-probe')).toBe(false);
  });

  it('says it is unavailable, why, and without repeating its own name, when no Secret Service can be reached', async () => {
    // The keychain library keeps its bus connection for the life of a process, so the host runs
    // in a child whose session bus is a socket that does not exist.
    const dataDir = tempDir('status-keychain-');
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const appModule = runnable(path.resolve(import.meta.dirname, '../../../main/app.ts'));
    const script = `
      const { createFactoryApp } = await import(${JSON.stringify(appModule.url)});
      const app = await createFactoryApp({
        host: 'web',
        vm: { images: { status: () => ({ state: 'missing', version: 'test' }), ensure: async () => { throw new Error('no image'); } },
              qemu: { checkInstalled: async () => ({ ok: true }), start: async () => { throw new Error('no VM'); } } },
      });
      const started = Date.now();
      const status = await app.api['system.status']({});
      console.log(JSON.stringify({ keychain: status.keychain, ms: Date.now() - started }));
      await app.dispose();`;
    const { stdout } = await run(process.execPath, [...appModule.nodeArgs, '--input-type=module', '-e', script], {
      env: { ...process.env, FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache'), DBUS_SESSION_BUS_ADDRESS: `unix:path=${path.join(dataDir, 'no-bus.sock')}` },
      timeout: 60_000,
    });
    const { keychain, ms } = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(keychain.ok).toBe(false);
    expect(keychain.error.name).toBe('KeychainUnavailable');
    expect(keychain.error.message).toMatch(/^the OS keychain cannot be used \(.*no-bus\.sock/);
    expect(ms).toBeLessThan(4000);
  });
});
