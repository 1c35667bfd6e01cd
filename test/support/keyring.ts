// The keychain tests need a real Secret Service. `npm test` provides one by
// running vitest under test/support/with-keyring.sh, which starts a private
// D-Bus session (dbus-run-session) and `gnome-keyring-daemon --unlock` with a
// password on stdin, in a throwaway keyring folder. Run one file by hand with:
//   test/support/with-keyring.sh npx vitest run test/integration/credentials-keychain.test.ts
import { execFileSync } from 'node:child_process';

export interface KeyringEnvironment {
  ok: boolean;
  /** What is missing and how to get it, when ok is false. */
  problem?: string;
}

/** Checks that a Secret Service answers on the session bus of this process. */
export function checkSecretService(): KeyringEnvironment {
  const bus = process.env.DBUS_SESSION_BUS_ADDRESS;
  if (!bus) {
    return { ok: false, problem: 'no D-Bus session (DBUS_SESSION_BUS_ADDRESS is unset): run the tests through test/support/with-keyring.sh' };
  }
  try {
    const out = execFileSync(
      'dbus-send',
      ['--session', '--print-reply', '--dest=org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus.NameHasOwner', 'string:org.freedesktop.secrets'],
      { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    if (!out.includes('boolean true')) {
      return { ok: false, problem: 'the session bus has no Secret Service (org.freedesktop.secrets): run the tests through test/support/with-keyring.sh' };
    }
    return { ok: true };
  } catch (err) {
    return { ok: false, problem: `the session bus does not answer (${(err as Error).message.split('\n')[0]}): run the tests through test/support/with-keyring.sh` };
  }
}

/** Throws a clear error when the environment lacks a Secret Service (a test failure, never a silent skip). */
export function requireSecretService(): void {
  const env = checkSecretService();
  if (!env.ok) throw new Error(`keychain tests need a real Secret Service: ${env.problem}`);
}
