// Credential broker types shared by the host and the UI. Pure TypeScript.
// A credential's VALUE never appears here: the app keeps only references; the
// value lives in the OS keychain and is read only by the per-sandbox proxy.
import { z } from 'zod';

export const CREDENTIAL_KINDS = ['anthropic', 'openai', 'git', 'custom-header'] as const;
export const CredentialKind = z.enum(CREDENTIAL_KINDS);
export type CredentialKind = z.infer<typeof CredentialKind>;

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

const headerName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9-]+$/, 'must be a header name (letters, digits, dash)');

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
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type CredentialRef = z.infer<typeof CredentialRef>;

export const CredentialSetInput = z.object({
  /** Omit to create a new credential; give an existing id to replace its value or settings. */
  id: credentialId.optional(),
  kind: CredentialKind,
  label: z.string().trim().min(1, 'the label is empty').max(200),
  /** Write-only. Omit when only label/target change on an existing credential. */
  value: z.string().min(1, 'the value is empty').max(16_384).optional(),
  target: CredentialTarget.partial().optional(),
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
});
export type AuditEntry = z.infer<typeof AuditEntry>;

export const LeakHit = z.object({
  credentialId: z.string(),
  /** raw, base64, base64-basic, utf16le, hex, url ... — never the value itself. */
  encoding: z.string(),
  source: z.enum(['overlay', 'memory', 'file']),
  offset: z.number(),
});
export type LeakHit = z.infer<typeof LeakHit>;

export const LeakReport = z.object({
  sandboxId: z.string(),
  at: z.string(),
  /** 'clean' only when every source was scanned and nothing was found. */
  verdict: z.enum(['clean', 'leak', 'incomplete']),
  scanned: z.array(z.object({ source: z.string(), bytes: z.number(), error: z.string().optional() })),
  credentialIds: z.array(z.string()),
  hits: z.array(LeakHit),
  durationMs: z.number(),
});
export type LeakReport = z.infer<typeof LeakReport>;
