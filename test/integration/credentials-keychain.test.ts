// The OS keychain for real: the Secret Service of gnome-keyring in a private
// D-Bus session (test/support/with-keyring.sh). Values go in and come back out
// only through the proxy's SecretSource; an unreachable keychain gives a clear
// KeychainUnavailable error and nothing is stored anywhere else.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CredentialService } from '../../main/credentials/credential-service.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import { CredentialRefStore } from '../../main/credentials/ref-store.js';
import { requireSecretService } from '../support/keyring.js';

const execFileP = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

describe('KeychainStore against a real Secret Service', () => {
  const service = `factory-in-a-box-test-${randomBytes(4).toString('hex')}`;
  const store = new KeychainStore({ service });
  let dir: string;

  beforeAll(() => {
    requireSecretService();
    dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-kc-'));
  });
  afterAll(async () => {
    await store.remove('roundtrip').catch(() => undefined); // teardown: the test may have ended before storing it
    rmSync(dir, { recursive: true, force: true });
  });

  it('round-trips a value, reports presence, and deletes it', async () => {
    const value = `sk-test-${randomBytes(16).toString('hex')}`;
    await store.put('roundtrip', value);
    expect(await store.has('roundtrip')).toBe(true);
    expect(await store.reveal('roundtrip')).toBe(value);
    // secret-tool (libsecret) sees the same item: it really is in the Secret Service.
    const { stdout } = await execFileP('secret-tool', ['lookup', 'service', service, 'username', 'roundtrip']);
    expect(stdout.trim()).toBe(value);
    await store.put('roundtrip', value + '-replaced');
    expect(await store.reveal('roundtrip')).toBe(value + '-replaced');
    expect(await store.remove('roundtrip')).toBe(true);
    expect(await store.has('roundtrip')).toBe(false);
    await expect(store.reveal('roundtrip')).rejects.toThrow(/holds no value for credential "roundtrip"/);
  });

  it('CredentialService keeps only references in its state file, never the value', async () => {
    const refs = new CredentialRefStore(path.join(dir, 'credentials.json'));
    const svc = new CredentialService({ refs, secrets: store });
    const value = `sk-ant-${randomBytes(16).toString('hex')}`;
    const ref = await svc.set({ kind: 'anthropic', label: 'My Anthropic key', value });
    expect(ref.target.upstream).toBe('https://api.anthropic.com');
    expect(JSON.stringify(ref)).not.toContain(value);
    expect((await svc.list()).map((r) => r.id)).toEqual([ref.id]);
    expect(await svc.test(ref.id)).toEqual({ id: ref.id, stored: true });
    for (const f of readdirSync(dir)) expect(readFileSync(path.join(dir, f), 'utf8')).not.toContain(value);
    await svc.set({ id: ref.id, kind: 'anthropic', label: 'Renamed' });
    expect(await store.reveal(ref.id)).toBe(value);
    await svc.delete(ref.id);
    expect(await svc.list()).toEqual([]);
    expect(await store.has(ref.id)).toBe(false);
  });
});

describe('an unavailable keychain', () => {
  it('gives KeychainUnavailable and no plaintext fallback', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-kc-off-'));
    try {
      const script = `(async () => {
        const { KeychainStore } = await import('./main/credentials/keychain.ts');
        const { CredentialService } = await import('./main/credentials/credential-service.ts');
        const { CredentialRefStore } = await import('./main/credentials/ref-store.ts');
        const svc = new CredentialService({ refs: new CredentialRefStore(${JSON.stringify(path.join(dir, 'credentials.json'))}), secrets: new KeychainStore({ timeoutMs: 5000 }) });
        try {
          await svc.set({ kind: 'openai', label: 'x', value: 'sk-should-never-be-written' });
          console.log('STORED');
        } catch (err) {
          console.log(err.name + '|' + err.message);
        }
      })();`;
      const { stdout } = await execFileP(path.join(root, 'node_modules/.bin/tsx'), ['--eval', script], {
        cwd: root,
        env: { ...process.env, DBUS_SESSION_BUS_ADDRESS: `unix:path=${path.join(dir, 'no-bus')}` },
        timeout: 60_000,
      });
      expect(stdout).toMatch(/^KeychainUnavailable\|the OS keychain cannot be used \(.*\)\. .*never stores credentials in plaintext/m);
      expect(stdout).not.toContain('STORED');
      // Nothing was written: no reference, no file with the value.
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a locked keyring (Secret Service running, nothing unlocked) gives KeychainUnavailable too', async () => {
    const script = `(async () => {
      const { KeychainStore } = await import('./main/credentials/keychain.ts');
      try {
        await new KeychainStore({ timeoutMs: 5000 }).put('locked-probe', 'sk-should-never-be-written');
        console.log('STORED');
      } catch (err) {
        console.log(err.name + '|' + err.message);
      }
    })();`;
    // A private bus with a keyring daemon that was never unlocked (no password given).
    const shell = [
      'home=$(mktemp -d)',
      'XDG_DATA_HOME="$home" gnome-keyring-daemon --foreground --components=secrets >/dev/null 2>&1 & kp=$!',
      'for i in $(seq 1 50); do dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q "boolean true" && break; sleep 0.1; done',
      `"${path.join(root, 'node_modules/.bin/tsx')}" --eval "$FIAB_SCRIPT"`,
      'kill $kp; rm -rf "$home"',
    ].join('\n');
    const { stdout } = await execFileP('dbus-run-session', ['--', 'bash', '-c', shell], {
      cwd: root,
      env: { ...process.env, FIAB_SCRIPT: script },
      timeout: 90_000,
    });
    expect(stdout).toMatch(/^KeychainUnavailable\|the OS keychain cannot be used/m);
    expect(stdout).not.toContain('STORED');
  });
});
