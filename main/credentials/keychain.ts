// The OS keychain (macOS Keychain, Windows Credential Manager, Linux Secret
// Service) through @napi-rs/keyring. The only place the app touches a secret's
// value. There is deliberately no plaintext fallback: on Linux the entry is
// pinned to the Secret Service so the library cannot silently fall back to the
// (non-persistent) kernel keyring either.
import { AsyncEntry } from '@napi-rs/keyring';
import { FactoryError } from '../../common/errors.js';

export const KEYCHAIN_SERVICE = 'factory-in-a-box';

export class KeychainUnavailable extends FactoryError {
  constructor(reason: string) {
    super(
      'KeychainUnavailable',
      `the OS keychain cannot be used (${reason}). ` +
        'Unlock it (Linux: a running Secret Service such as gnome-keyring, unlocked) and retry; ' +
        'the app never stores credentials in plaintext instead.',
    );
  }
}

/** Read access for the proxy and the leak check only; never exposed to the API. */
export interface SecretSource {
  reveal(id: string): Promise<string>;
}

/** The keychain operations the credential service needs (values go in, never out). */
export interface SecretStore extends SecretSource {
  put(id: string, value: string): Promise<void>;
  has(id: string): Promise<boolean>;
  remove(id: string): Promise<boolean>;
}

export class SecretMissing extends FactoryError {
  constructor(id: string) {
    super('CredentialMissing', `the keychain holds no value for credential "${id}"; set it again on the Credentials screen`);
  }
}

export class KeychainStore implements SecretStore {
  private readonly service: string;
  private readonly timeoutMs: number;

  constructor(opts: { service?: string; timeoutMs?: number } = {}) {
    this.service = opts.service ?? KEYCHAIN_SERVICE;
    // A locked keyring may wait for a prompt nobody can answer: give up clearly.
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  async put(id: string, value: string): Promise<void> {
    if (!value) throw new FactoryError('InvalidInput', 'a credential value cannot be empty');
    await this.call((e, s) => e.setPassword(value, s), id);
  }

  async has(id: string): Promise<boolean> {
    return (await this.call((e, s) => e.getPassword(s), id)) != null;
  }

  async reveal(id: string): Promise<string> {
    const v = await this.call((e, s) => e.getPassword(s), id);
    if (v == null) throw new SecretMissing(id);
    return v;
  }

  async remove(id: string): Promise<boolean> {
    return this.call((e, s) => e.deleteCredential(s), id);
  }

  private async call<T>(op: (entry: AsyncEntry, signal: AbortSignal) => Promise<T>, id: string): Promise<T> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    let entry: AsyncEntry;
    try {
      entry = new AsyncEntry(this.service, id, { linux: { store: 'secret-service' } });
    } catch (err) {
      clearTimeout(timer);
      throw new KeychainUnavailable(describe(err));
    }
    try {
      return await op(entry, ctrl.signal);
    } catch (err) {
      if (ctrl.signal.aborted) throw new KeychainUnavailable(`no answer within ${this.timeoutMs} ms — is it locked?`);
      throw new KeychainUnavailable(describe(err));
    } finally {
      clearTimeout(timer);
    }
  }
}

function describe(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  // The library's messages never contain the secret; keep them short.
  return msg.replace(/\s+/g, ' ').slice(0, 300);
}

/** In-memory store for unit tests of code that is not about the keychain itself. */
export class MemorySecretStore implements SecretStore {
  private readonly values = new Map<string, string>();
  async put(id: string, value: string): Promise<void> {
    this.values.set(id, value);
  }
  async has(id: string): Promise<boolean> {
    return this.values.has(id);
  }
  async reveal(id: string): Promise<string> {
    const v = this.values.get(id);
    if (v == null) throw new SecretMissing(id);
    return v;
  }
  async remove(id: string): Promise<boolean> {
    return this.values.delete(id);
  }
}
