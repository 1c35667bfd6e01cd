// Credential broker types shared by the host and the UI. Pure TypeScript.
// A credential's VALUE never appears here: the app keeps only references; the
// value lives in the OS keychain and is read only by the per-sandbox proxy.
import { z } from 'zod';
import type { EgressRefusal } from './egress.js';

/**
 * anthropic: an API key (x-api-key). claude-code-oauth: the token `claude setup-token`
 * prints for a Claude subscription (Authorization: Bearer). Both serve the same route.
 */
export const CREDENTIAL_KINDS = ['anthropic', 'claude-code-oauth', 'openai', 'git', 'custom-header'] as const;
export const CredentialKind = z.enum(CREDENTIAL_KINDS);
export type CredentialKind = z.infer<typeof CredentialKind>;

/** The kinds that sign Claude Code in to the Anthropic API; a sandbox gets exactly one of them. */
export const ANTHROPIC_KINDS: readonly CredentialKind[] = ['anthropic', 'claude-code-oauth'];

export const credentialId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9._-]*$/, 'must be lower-case letters, digits, dot, dash or underscore');

const httpsBase = z
  .string()
  .max(2048)
  .url()
  .refine((u) => u.startsWith('https://'), 'must be an https:// URL (the proxy forwards over verified TLS only)');

/** Headers a credential may never be injected into (framing, routing, hop-by-hop). */
const FRAMING_HEADERS = new Set([
  'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'host', 'expect',
]);

const headerName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9-]+$/, 'must be a header name (letters, digits, dash)')
  // The proxy frames and routes every request itself: a credential written into one
  // of these would change how the upstream reads the request, not authenticate it.
  .refine((h) => !FRAMING_HEADERS.has(h.toLowerCase()), 'names a header that frames or routes the request; the proxy writes those itself');

/** Where a credential may be used and how it is added. One credential, one upstream. */
export const CredentialTarget = z.object({
  /** e.g. https://api.anthropic.com — for git, the repository host or a repository URL prefix. */
  upstream: httpsBase,
  /** Path prefixes (under the upstream) the credential may be sent to. */
  pathPrefixes: z.array(z.string().startsWith('/').max(512)).min(1).max(32).optional(),
  methods: z.array(z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'])).min(1).optional(),
  /** custom-header only: header to add, and how the value is written into it. */
  header: headerName.optional(),
  format: z.enum(['raw', 'bearer', 'basic']).optional(),
  /** git / basic: the user name paired with the token (GitHub accepts x-access-token). */
  username: z.string().min(1).max(128).regex(/^[^:\s]+$/, 'must not contain a colon or spaces').optional(),
});
export type CredentialTarget = z.infer<typeof CredentialTarget>;

export const CredentialRef = z.object({
  id: credentialId,
  kind: CredentialKind,
  label: z.string().min(1).max(200),
  target: CredentialTarget,
  /** Anthropic kinds only: the user chose this one over the others of ANTHROPIC_KINDS. */
  preferred: z.boolean().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type CredentialRef = z.infer<typeof CredentialRef>;

export interface AnthropicChoice {
  /** The credential sandboxes use for the Anthropic API. */
  ref: CredentialRef;
  /** Why this one, in words for the UI. */
  reason: string;
  /** The other stored Anthropic credentials, unused while this one wins. */
  unused: CredentialRef[];
}

/**
 * Which Anthropic credential sandboxes use when several are stored: the one the
 * user marked preferred, else the first API key, else the first subscription token.
 * An API key wins by default because it is what the CLI itself picks when it has both.
 */
export function anthropicCredentialInUse(refs: readonly CredentialRef[]): AnthropicChoice | undefined {
  const all = refs.filter((r) => ANTHROPIC_KINDS.includes(r.kind));
  const preferred = all.find((r) => r.preferred);
  const apiKey = all.find((r) => r.kind === 'anthropic');
  const ref = preferred ?? apiKey ?? all[0];
  if (!ref) return undefined;
  const unused = all.filter((r) => r !== ref);
  const reason = preferred
    ? 'you chose it'
    : unused.length === 0
      ? 'the only Anthropic credential'
      : ref.kind === 'anthropic' && unused.some((r) => r.kind !== 'anthropic')
        ? 'an API key is used before a subscription token unless you choose otherwise'
        : 'the first in the list';
  return { ref, reason, unused };
}

export const CredentialSetInput = z.object({
  /** Omit to create a new credential; give an existing id to replace its value or settings. */
  id: credentialId.optional(),
  kind: CredentialKind,
  label: z.string().trim().min(1, 'the label is empty').max(200),
  /** Write-only. Omit when only label/target change on an existing credential. */
  value: z.string().min(1, 'the value is empty').max(16_384).optional(),
  target: CredentialTarget.partial().optional(),
  /** Anthropic kinds only: use this one in sandboxes rather than the others (true), or go back to the default (false). */
  preferred: z.boolean().optional(),
});
export type CredentialSetInput = z.infer<typeof CredentialSetInput>;

export const CredentialTestResult = z.object({
  id: z.string(),
  /** The keychain holds a value for this reference. */
  stored: z.boolean(),
  /** Present when the upstream was called: its HTTP status, or the error. */
  upstream: z.object({ ok: z.boolean(), status: z.number().optional(), message: z.string() }).optional(),
});
export type CredentialTestResult = z.infer<typeof CredentialTestResult>;

export const AuditEntry = z.object({
  time: z.string(),
  sandboxId: z.string(),
  method: z.string(),
  host: z.string(),
  path: z.string(),
  /** The rule that matched, or why none did (e.g. "refused: no rule"). */
  rule: z.string(),
  status: z.number(),
  bytesIn: z.number(),
  bytesOut: z.number(),
  durationMs: z.number(),
  note: z.string().optional(),
  /** The pipeline step the sandbox was in (egress entries). */
  step: z.string().optional(),
  /** The destination port, where the request named one (egress entries). */
  port: z.number().optional(),
});
export type AuditEntry = z.infer<typeof AuditEntry>;

/** Where the leak check looked: the VM's disk and memory, what the host kept of its output, what it returned. */
export const LEAK_SOURCES = ['overlay', 'memory', 'file', 'serial-log', 'stage-log', 'returned-work'] as const;

export const LeakHit = z.object({
  credentialId: z.string(),
  /**
   * raw, utf16le, utf16be, hex, hex-upper, base64@0..2, base64url@0..2, basic-auth(user);
   * json-escape:<enc> or url-escape:<enc> for an escaped form; gzip><enc> or zlib><enc>
   * inside decompressed data; <enc>+page-split when the value lies across two
   * memory pages that are not next to each other. Never the value itself.
   */
  encoding: z.string(),
  source: z.enum(LEAK_SOURCES),
  /** Byte offset in the source (for a compressed stream: where the stream starts). */
  offset: z.number(),
  /** More precise place, never the value: a log name, a git object id, an offset in decompressed data. */
  detail: z.string().optional(),
});
export type LeakHit = z.infer<typeof LeakHit>;

/** A compressed stream that was not (fully) inflated, so not (fully) scanned. */
export const NotInflated = z.object({ offset: z.number(), kind: z.enum(['gzip', 'zlib']), reason: z.string() });

export const LeakScanned = z.object({
  source: z.string(),
  bytes: z.number(),
  /** Set when part or all of this source could not be scanned: the verdict is then at best 'incomplete'. */
  error: z.string().optional(),
  /** Something worth knowing that does not limit the scan (e.g. the source does not exist). */
  note: z.string().optional(),
  /** Compressed streams found and inflated, and the bytes they gave. */
  inflated: z.object({ streams: z.number(), bytes: z.number() }).optional(),
  /** Streams the caps stopped (the first few; notInflatedCount counts them all). */
  notInflated: z.array(NotInflated).optional(),
  notInflatedCount: z.number().optional(),
});
export type LeakScanned = z.infer<typeof LeakScanned>;

export const LeakReport = z.object({
  sandboxId: z.string(),
  at: z.string(),
  /** 'clean' only when every source was scanned and nothing was found. */
  verdict: z.enum(['clean', 'leak', 'incomplete']),
  scanned: z.array(LeakScanned),
  credentialIds: z.array(z.string()),
  hits: z.array(LeakHit),
  durationMs: z.number(),
});
export type LeakReport = z.infer<typeof LeakReport>;

// The credential broker's part of the API contract. Kept here so it can be
// merged into common/contract.ts (apiInputs / ApiOutputs / FactoryEvent) in one
// step; values are write-only: nothing here returns one.
const sandboxOrTaskId = z.string().min(1).max(128).regex(/^[A-Za-z0-9._-]+$/, 'must be letters, digits, dot, dash or underscore');

export const credentialApiInputs = {
  'credentials.list': z.object({}),
  'credentials.set': CredentialSetInput,
  'credentials.delete': z.object({ id: credentialId }),
  /** Says whether the keychain holds the value; with callUpstream, whether the service accepts it. */
  'credentials.test': z.object({ id: credentialId, callUpstream: z.boolean().optional() }),
  /** The proxy's audit log of one sandbox (its task id), oldest first. */
  'audit.list': z.object({ sandboxId: sandboxOrTaskId, limit: z.number().int().min(1).max(10_000).optional() }),
  /** Scans the sandbox's overlay and guest memory for its credentials now. */
  'leakcheck.run': z.object({ taskId: sandboxOrTaskId }),
  /** The last leak-check report of a task, or null. */
  'leakcheck.get': z.object({ taskId: sandboxOrTaskId }),
} as const;

export type CredentialApiMethod = keyof typeof credentialApiInputs;

export interface CredentialApiOutputs {
  'credentials.list': CredentialRef[];
  'credentials.set': CredentialRef;
  'credentials.delete': { deleted: boolean };
  'credentials.test': CredentialTestResult;
  'audit.list': AuditEntry[];
  'leakcheck.run': LeakReport;
  'leakcheck.get': LeakReport | null;
}

export type CredentialApi = {
  [M in CredentialApiMethod]: (input: z.input<(typeof credentialApiInputs)[M]>) => Promise<CredentialApiOutputs[M]>;
};

export type CredentialEvent =
  | { type: 'credentials.changed'; credentials: CredentialRef[] }
  | { type: 'audit.appended'; entry: AuditEntry }
  /** A verdict of 'leak' is a security failure: show it loudly on the sandbox. */
  | { type: 'leakcheck.finished'; report: LeakReport }
  /** The sandbox's proxy refused a destination (egress rules, address guard, malformed egress request). */
  | { type: 'egress.refused'; refusal: EgressRefusal };
