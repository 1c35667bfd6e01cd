// What the API exposes about credentials: references in, references out. A
// value goes into the keychain on `set` and never comes back through here;
// `test` says whether the keychain holds it and, on request, whether the
// upstream accepts it (the answer is a status, never the value).
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import { FactoryError } from '../../common/errors.js';
import {
  ANTHROPIC_KINDS,
  CredentialRef,
  CredentialSetInput,
  CredentialTarget,
  type CredentialTestResult,
} from '../../common/credentials.js';
import type { Logger } from '../log/logger.js';
import type { SecretStore } from './keychain.js';
import { createNetGuard, type AddressAllowance } from './net-guard.js';
import type { CredentialRefStore } from './ref-store.js';
import { defaultUpstream } from './routes.js';

export class CredentialService {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly deps: {
      refs: CredentialRefStore;
      secrets: SecretStore;
      onChange?: (refs: CredentialRef[]) => void;
      /** Extra trust roots and the loopback allowance, for tests only. */
      upstreamCa?: string | Buffer;
      allowAddress?: AddressAllowance;
      /** Told ids and messages only, never a value. */
      log?: Logger;
    },
  ) {}

  list(): Promise<CredentialRef[]> {
    return this.deps.refs.list();
  }

  async set(raw: unknown): Promise<CredentialRef> {
    const input = CredentialSetInput.parse(raw);
    // One change at a time: a concurrent label edit must never write back a
    // destination it read before another call changed it (with a new value).
    return this.serially(() => this.setNow(input));
  }

  private async setNow(input: CredentialSetInput): Promise<CredentialRef> {
    const existing = input.id ? await this.deps.refs.get(input.id) : undefined;
    if (input.id && !existing && !input.value) {
      throw new FactoryError('InvalidInput', `credential "${input.id}" does not exist yet, so a value is required`);
    }
    if (!existing && !input.value) throw new FactoryError('InvalidInput', 'value: a new credential needs a value');
    if (existing && existing.kind !== input.kind) {
      throw new FactoryError('InvalidInput', `credential "${existing.id}" is a ${existing.kind} credential; delete it to change its kind`);
    }
    const id = existing?.id ?? input.id ?? `${input.kind}-${randomBytes(4).toString('hex')}`;
    const target = CredentialTarget.parse({ ...defaultTarget(input.kind), ...existing?.target, ...input.target });
    if (input.kind === 'custom-header' && !target.header) throw new FactoryError('InvalidInput', 'target.header: a custom header rule needs a header name');
    if (input.kind === 'git' && target.format && target.format !== 'basic') throw new FactoryError('InvalidInput', 'target.format: git credentials are sent as basic auth');
    if (input.value) checkValueFitsKind(input.kind, input.value);
    const anthropic = ANTHROPIC_KINDS.includes(input.kind);
    if (input.preferred !== undefined && !anthropic) {
      throw new FactoryError('InvalidInput', `preferred: only an Anthropic API key or a Claude Code subscription token can be preferred, not a ${input.kind} credential`);
    }
    const preferred = input.preferred ?? existing?.preferred ?? false;
    const moved = existing ? destinationChanges(existing.kind, existing.target, target) : [];
    if (moved.length && !input.value) {
      // A stored value must never be redirected: whoever changes where it goes must know it.
      throw new FactoryError(
        'CredentialValueRequired',
        `changing where credential "${id}" is sent (${moved.join('; ')}) needs its value entered again; ` +
          'a stored value is never sent to a new destination without it',
      );
    }
    const now = new Date().toISOString();
    const ref = CredentialRef.parse({
      id, kind: input.kind, label: input.label, target, ...(preferred ? { preferred: true } : {}), createdAt: existing?.createdAt ?? now, updatedAt: now,
    });
    // Keychain first: if it is unavailable, no dangling reference is written.
    if (input.value) await this.deps.secrets.put(id, input.value);
    let refs: CredentialRef[];
    try {
      // At most one preferred Anthropic credential: choosing this one un-chooses the others.
      const others = (all: CredentialRef[]) =>
        all.filter((r) => r.id !== id).map((r) => (preferred && r.preferred && ANTHROPIC_KINDS.includes(r.kind) ? withoutPreferred(r) : r));
      refs = await this.deps.refs.update((all) => [...others(all), ref]);
    } catch (err) {
      // The new value is in the keychain but the old destination is still on file:
      // remove the value rather than let it go where it was not meant to.
      // The caller gets the write's error; a value that could not be removed is for the log (its id, never the value).
      if (moved.length) {
        await this.deps.secrets.remove(id).catch((e: unknown) => this.deps.log?.error('a moved credential\'s new value could not be removed after its record failed to save', { credentialId: id, err: e }));
      }
      throw err;
    }
    this.deps.onChange?.(refs);
    return ref;
  }

  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn);
    // The queue only orders changes; the caller gets this change's failure from `next`.
    this.queue = next.catch(() => undefined);
    return next;
  }

  delete(id: string): Promise<{ deleted: boolean }> {
    return this.serially(() => this.deleteNow(id));
  }

  private async deleteNow(id: string): Promise<{ deleted: boolean }> {
    const existing = await this.deps.refs.get(id);
    if (!existing) throw new FactoryError('NotFound', `no credential "${id}"`);
    await this.deps.secrets.remove(id);
    const refs = await this.deps.refs.update((all) => all.filter((r) => r.id !== id));
    this.deps.onChange?.(refs);
    return { deleted: true };
  }

  async test(id: string, opts: { callUpstream?: boolean } = {}): Promise<CredentialTestResult> {
    const ref = await this.deps.refs.get(id);
    if (!ref) throw new FactoryError('NotFound', `no credential "${id}"`);
    const stored = await this.deps.secrets.has(id);
    if (!stored || !opts.callUpstream) return { id, stored };
    return { id, stored, upstream: await this.probeUpstream(ref) };
  }

  /** One authenticated GET to a harmless endpoint of the upstream; only the status comes back. */
  private async probeUpstream(ref: CredentialRef): Promise<NonNullable<CredentialTestResult['upstream']>> {
    const base = new URL(ref.target.upstream);
    const value = await this.deps.secrets.reveal(ref.id);
    const headers: Record<string, string> = {};
    let probePath = base.pathname.replace(/\/$/, '');
    switch (ref.kind) {
      case 'anthropic':
        headers['x-api-key'] = value;
        headers['anthropic-version'] = '2023-06-01';
        probePath += '/v1/models';
        break;
      case 'claude-code-oauth':
        // As Claude Code sends a subscription token: the API refuses OAuth without this beta.
        headers.authorization = `Bearer ${value}`;
        headers['anthropic-version'] = '2023-06-01';
        headers['anthropic-beta'] = CLAUDE_OAUTH_BETA;
        probePath += '/v1/models';
        break;
      case 'openai':
        headers.authorization = `Bearer ${value}`;
        probePath += '/v1/models';
        break;
      case 'git':
        headers.authorization = `Basic ${Buffer.from(`${ref.target.username ?? 'x-access-token'}:${value}`).toString('base64')}`;
        probePath += probePath.endsWith('.git') ? '/info/refs?service=git-upload-pack' : '/';
        break;
      default: {
        const fmt = ref.target.format ?? 'raw';
        headers[ref.target.header!.toLowerCase()] =
          fmt === 'bearer' ? `Bearer ${value}` : fmt === 'basic' ? `Basic ${Buffer.from(`${ref.target.username ?? 'user'}:${value}`).toString('base64')}` : value;
        probePath += ref.target.pathPrefixes?.[0] ?? '/';
      }
    }
    const guard = createNetGuard({ allowAddress: this.deps.allowAddress });
    try {
      await guard.resolve(base.hostname);
      const status = await new Promise<number>((resolve, reject) => {
        const req = https.request(
          { host: base.hostname, port: base.port || 443, path: probePath || '/', method: 'GET', headers, lookup: guard.lookup, ca: this.deps.upstreamCa, timeout: 15_000 },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('timeout', () => req.destroy(new Error('no answer within 15 s')));
        req.on('error', reject);
        req.end();
      });
      const ok = status >= 200 && status < 300;
      return { ok, status, message: ok ? `${base.host} accepted the credential (HTTP ${status})` : `${base.host} answered HTTP ${status}` };
    } catch (err) {
      return { ok: false, message: (err as Error).message.replaceAll(value, '[redacted]') };
    }
  }
}

/**
 * What decides where a value goes and how it is written, with the defaults the
 * routes apply (routes.ts), so that spelling out a default is not a change.
 */
function destination(kind: CredentialRef['kind'], t: CredentialTarget): Record<string, string> {
  const set = (xs: readonly string[] | undefined, dflt: string[]) => [...new Set(xs ?? dflt)].sort().join(' ');
  const modelApi = kind === 'anthropic' || kind === 'claude-code-oauth' || kind === 'openai';
  const fmt = kind === 'git' ? 'basic' : kind === 'custom-header' ? (t.format ?? 'raw') : '';
  return {
    upstream: new URL(t.upstream).href,
    'path rules': kind === 'git' ? '' : set(t.pathPrefixes, modelApi ? ['/v1/'] : ['/']),
    methods: kind === 'git' ? '' : set(t.methods, ['GET', 'POST']),
    header: kind === 'custom-header' ? (t.header ?? '').toLowerCase() : '',
    format: fmt,
    // The user name is written next to the value only in basic auth.
    username: fmt === 'basic' ? (t.username ?? 'x-access-token') : '',
  };
}

/** The destination fields that differ, described without any value. */
export function destinationChanges(kind: CredentialRef['kind'], before: CredentialTarget, after: CredentialTarget): string[] {
  const a = destination(kind, before);
  const b = destination(kind, after);
  return Object.keys(a)
    .filter((k) => a[k] !== b[k])
    .map((k) => `${k}: ${JSON.stringify(a[k]).slice(0, 200)} → ${JSON.stringify(b[k]).slice(0, 200)}`);
}

function defaultTarget(kind: CredentialRef['kind']): Partial<CredentialTarget> {
  const model = defaultUpstream(kind);
  if (model) return { upstream: model };
  if (kind === 'git') return { upstream: 'https://github.com', username: 'x-access-token' };
  return {};
}

/** The anthropic-beta value Claude Code sends with a subscription token (seen from the CLI itself). */
export const CLAUDE_OAUTH_BETA = 'oauth-2025-04-20';

function withoutPreferred(r: CredentialRef): CredentialRef {
  const { preferred: _dropped, ...rest } = r;
  return rest;
}

/**
 * Catches the two pastes that would fail only later, inside a sandbox: an API key
 * stored as a subscription token (or the other way round), and a token with spaces
 * or a line break from the terminal it was copied from. Never quotes the value.
 */
function checkValueFitsKind(kind: CredentialRef['kind'], value: string): void {
  if (kind !== 'anthropic' && kind !== 'claude-code-oauth') return;
  if (!/^[\x21-\x7e]+$/.test(value)) {
    throw new FactoryError('InvalidCredential', 'value: contains spaces, line breaks or characters outside printable ASCII; paste the token alone');
  }
  if (kind === 'claude-code-oauth' && value.startsWith('sk-ant-api')) {
    throw new FactoryError('InvalidCredential', 'value: this is an Anthropic API key (sk-ant-api...), not a subscription token; store it as "Anthropic API key"');
  }
  if (kind === 'anthropic' && value.startsWith('sk-ant-oat')) {
    throw new FactoryError('InvalidCredential', 'value: this is a Claude Code subscription token (sk-ant-oat...), not an API key; store it as "Claude Code subscription token"');
  }
}
