// Egress rules: which hosts a sandbox may reach through its proxy without a
// credential, by host, port, scheme and (for plain HTTP) method and path
// prefix, per pipeline step. Pure zod + TypeScript (shared with the UI).
import { z } from 'zod';

export const STEP_NAMES = ['setup', 'request', 'plan', 'build', 'test', 'review', 'document'] as const;
export const StepName = z.enum(STEP_NAMES);
export type StepName = (typeof STEP_NAMES)[number];

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Why `host` is not a host name an egress rule can name (or a request can be
 * matched by), or undefined. `host` must already be lowercase. With
 * `wildcard`, a leading "*." (subdomains only) is accepted.
 */
export function egressHostProblem(host: string, opts: { wildcard?: boolean } = {}): string | undefined {
  const show = JSON.stringify(host.length > 80 ? host.slice(0, 80) + '…' : host);
  if (host.length === 0) return 'the host name is empty';
  if (host.length > 253) return `the host name ${show} is longer than 253 characters`;
  if (/[\x00-\x1f\x7f]/.test(host)) return `the host name ${show} contains control characters`;
  if (/[^\x20-\x7e]/.test(host)) return `the host name ${show} is not ASCII: give an internationalised name as punycode (xn--...)`;
  if (host.includes(':') || host.startsWith('[')) return `${show} is an IP literal (or has a port): rules name hosts, never addresses`;
  if (host.endsWith('.')) return `the host name ${show} ends with a dot: write it without the trailing dot`;
  let name = host;
  if (opts.wildcard && host.startsWith('*.')) {
    name = host.slice(2);
    if (name.split('.').length < 2) return `the wildcard ${show} is too broad: "*." needs at least two labels after it (e.g. *.example.com)`;
  }
  if (name.includes('*')) return `the host name ${show} has a "*" that is not a leading "*." (wildcards match subdomains only)`;
  const labels = name.split('.');
  // 127.1, 2130706433, 0x7f.1: resolvers read an all-numeric last label as an address.
  if (/^(0x[0-9a-f]*|\d+)$/.test(labels[labels.length - 1]!)) return `${show} is an IP literal: rules name hosts, never addresses`;
  for (const label of labels) {
    if (!LABEL.test(label)) return `the host name ${show} has an invalid label ${JSON.stringify(label.slice(0, 64))} (letters, digits and inner dashes only, 1-63 characters)`;
  }
  return undefined;
}

/** Whether a (valid, lowercase) request host is covered by a rule's host: exact, or "*.x.y" for subdomains of x.y only. */
export function egressHostMatches(ruleHost: string, host: string): boolean {
  if (ruleHost.startsWith('*.')) {
    const suffix = ruleHost.slice(1); // ".x.y"
    return host.length > suffix.length && host.endsWith(suffix);
  }
  return ruleHost === host;
}

/** Why a path prefix (or a request's path) is not a plain path, or undefined. */
export function plainPathProblem(path: string): string | undefined {
  const show = JSON.stringify(path.length > 120 ? path.slice(0, 120) + '…' : path);
  if (!path.startsWith('/')) return `the path ${show} does not start with "/"`;
  if (/[\x00-\x20\x7f-\uffff]/.test(path)) return `the path ${show} has control characters, spaces or non-ASCII characters`;
  if (path.includes('..')) return `the path ${show} contains ".."`;
  if (path.includes('//')) return `the path ${show} contains "//"`;
  if (path.includes('\\')) return `the path ${show} contains a backslash`;
  if (/%2e|%2f|%5c/i.test(path)) return `the path ${show} has an encoded dot, slash or backslash`;
  if (path.includes('#')) return `the path ${show} contains a fragment ("#")`;
  return undefined;
}

const ruleHost = z
  .string()
  .max(253)
  .transform((h) => h.toLowerCase())
  .superRefine((h, ctx) => {
    const problem = egressHostProblem(h, { wildcard: true });
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

const method = z
  .string()
  .transform((m) => m.toUpperCase())
  .refine((m) => /^[A-Z]{1,20}$/.test(m), 'must be an HTTP method name (letters only)')
  .refine((m) => m !== 'CONNECT', 'CONNECT is what an https rule allows, not a method of an http rule');

const pathPrefix = z
  .string()
  .max(512)
  .superRefine((p, ctx) => {
    const problem = plainPathProblem(p);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** An address range in CIDR form, e.g. 10.20.0.0/16 or fd00:1::/64 (the host's guard parses it exactly). */
const cidr = z
  .string()
  .max(64)
  .regex(/^(?:\d{1,3}(?:\.\d{1,3}){3}\/\d{1,2}|[0-9a-f:]+\/\d{1,3})$/i, 'must be an address range like 10.20.0.0/16 or fd00:1::/64');

export const EgressRule = z
  .strictObject({
    /** Label shown to the user, e.g. "npm registry". */
    name: z.string().min(1).max(80),
    /** Exact host name (lowercase; uppercase is lowercased), or "*.example.com" for its subdomains. Never an IP literal. */
    host: ruleHost,
    port: z.number().int().min(1).max(65535),
    /** https: CONNECT tunnel (host and port only); http: forward request (method and path prefix checked too). */
    scheme: z.enum(['https', 'http']),
    /** http only; default GET, HEAD. */
    methods: z.array(method).min(1).max(16).optional(),
    /** http only; default ['/']. A prefix ending in "/" matches below it; otherwise whole path segments. */
    pathPrefixes: z.array(pathPrefix).min(1).max(32).optional(),
    /** Steps the rule applies in; absent = every step. */
    steps: z.array(StepName).optional(),
    /**
     * Private or reserved address ranges this rule's host may resolve to (a registry
     * mirror on the LAN, a network that maps registries to a gateway). Loopback,
     * link-local and metadata addresses are never allowed, whatever this says.
     */
    addresses: z.array(cidr).min(1).max(16).optional(),
  })
  .superRefine((r, ctx) => {
    if (r.scheme === 'https' && (r.methods || r.pathPrefixes)) {
      ctx.addIssue({ code: 'custom', message: `rule "${r.name}": an https rule is a CONNECT tunnel, the proxy cannot see methods or paths in it: drop methods and pathPrefixes` });
    }
  });
export type EgressRule = z.infer<typeof EgressRule>;

export const EgressRefusal = z.object({
  time: z.string(),
  sandboxId: z.string(),
  step: StepName,
  scheme: z.enum(['https', 'http']),
  /** As the guest sent it (lowercased when it was a valid name). */
  host: z.string(),
  /** 0 when the request was too malformed to name one. */
  port: z.number().int(),
  method: z.string().optional(),
  path: z.string().optional(),
  reason: z.string(),
  /** Requests to this destination refused in this step, this one included (absent: one). */
  count: z.number().int().positive().optional(),
});
export type EgressRefusal = z.infer<typeof EgressRefusal>;

const BUILD: StepName[] = ['setup', 'build'];
const tls = (name: string, host: string): EgressRule => ({ name, host, port: 443, scheme: 'https', steps: [...BUILD] });

/** Package registries most projects need to set up and build: npm (and Yarn classic's mirror of it), Debian (plain HTTP), PyPI, crates.io, the Go proxy. */
export function defaultEgressRules(): EgressRule[] {
  const debian = (host: string): EgressRule => ({
    name: 'Debian packages',
    host,
    port: 80,
    scheme: 'http',
    methods: ['GET', 'HEAD'],
    pathPrefixes: ['/debian/', '/debian-security/'],
    steps: [...BUILD],
  });
  return [
    tls('npm registry', 'registry.npmjs.org'),
    // Yarn classic's lockfiles name this host for every package.
    tls('Yarn registry', 'registry.yarnpkg.com'),
    debian('deb.debian.org'),
    debian('security.debian.org'),
    tls('PyPI', 'pypi.org'),
    tls('PyPI files', 'files.pythonhosted.org'),
    tls('crates.io', 'crates.io'),
    tls('crates.io', 'static.crates.io'),
    tls('crates.io', 'index.crates.io'),
    tls('Go module proxy', 'proxy.golang.org'),
    tls('Go checksum database', 'sum.golang.org'),
  ];
}
