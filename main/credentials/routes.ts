// Turns the user's credential references into one sandbox's proxy routes and
// the environment the guest gets: proxy URLs and per-sandbox placeholders, never
// a real value. Also builds the QEMU guestfwd entry that connects the guest's
// proxy address to the sandbox's unix socket.
import path from 'node:path';
import { anthropicCredentialInUse, type CredentialRef } from '../../common/credentials.js';
import { FactoryError } from '../../common/errors.js';
import { shellQuote } from '../../common/shell-quote.js';
import { GUEST_PROXY_ADDRESS, GUEST_PROXY_ORIGIN, GUEST_PROXY_PORT } from '../guest/guest-proxy.js';
import { newPlaceholder, type ProxyRoute } from './proxy.js';

export const DEFAULT_UPSTREAMS = {
  anthropic: 'https://api.anthropic.com',
  openai: 'https://api.openai.com',
} as const;

/** Where each kind of model credential goes by default. */
export function defaultUpstream(kind: CredentialRef['kind']): string | undefined {
  if (kind === 'anthropic' || kind === 'claude-code-oauth') return DEFAULT_UPSTREAMS.anthropic;
  if (kind === 'openai') return DEFAULT_UPSTREAMS.openai;
  return undefined;
}

interface ModelApi {
  /** Route name (audit log, refusals) and mount, e.g. "anthropic" → /anthropic. */
  mount: string;
  name: string;
  inject: ProxyRoute['inject'];
  guestEnv: (placeholder: string) => Record<string, string>;
}

/** The model APIs a sandbox may reach, by credential kind: where the key goes, and what the agent CLIs read. */
const MODEL_APIS: Partial<Record<CredentialRef['kind'], ModelApi>> = {
  anthropic: {
    mount: 'anthropic',
    name: 'anthropic',
    inject: { header: 'x-api-key', format: 'raw' },
    guestEnv: (placeholder) => ({ ANTHROPIC_BASE_URL: `${GUEST_PROXY_ORIGIN}/anthropic`, ANTHROPIC_API_KEY: placeholder }),
  },
  // A subscription token, as Claude Code sends it: Authorization: Bearer, with its own
  // anthropic-beta (oauth-...) header, which the proxy passes on. Same mount as the API
  // key: one sandbox gets one of them, and the guest holds only that one's variable
  // (with both set, the CLI would take ANTHROPIC_API_KEY).
  'claude-code-oauth': {
    mount: 'anthropic',
    name: 'anthropic-oauth',
    inject: { header: 'authorization', format: 'bearer' },
    guestEnv: (placeholder) => ({ ANTHROPIC_BASE_URL: `${GUEST_PROXY_ORIGIN}/anthropic`, CLAUDE_CODE_OAUTH_TOKEN: placeholder }),
  },
  openai: {
    mount: 'openai',
    name: 'openai',
    inject: { header: 'authorization', format: 'bearer' },
    guestEnv: (placeholder) => ({ OPENAI_BASE_URL: `${GUEST_PROXY_ORIGIN}/openai/v1`, OPENAI_API_KEY: placeholder }),
  },
};

export interface GitRouteOptions {
  /** https URL of the task's repository, e.g. https://github.com/owner/repo.git */
  repoUrl: string;
  credentialId: string;
  /** Off by default; when on, only new branches under refs/heads/factory/<task-id>/ may be pushed. */
  allowPush?: boolean;
}

export interface SandboxPlan {
  routes: ProxyRoute[];
  /** Variables for the guest (agent user's environment). Placeholders only. */
  guestEnv: Record<string, string>;
  /** The guest's remote URL for the task repository, when a git route exists. */
  gitRemoteUrl?: string;
}

const ENV_SAFE = (id: string) => id.toUpperCase().replace(/[^A-Z0-9]/g, '_');

export function planSandboxRoutes(refs: CredentialRef[], opts: { taskId: string; git?: GitRouteOptions }): SandboxPlan {
  const routes: ProxyRoute[] = [];
  const guestEnv: Record<string, string> = {};
  // One credential per model API: the Anthropic one the user chose (else an API key), the first OpenAI key.
  const modelRefs = [anthropicCredentialInUse(refs)?.ref, refs.find((r) => r.kind === 'openai')];

  for (const ref of modelRefs) {
    const api = ref && MODEL_APIS[ref.kind];
    if (!ref || !api) continue;
    const placeholder = newPlaceholder();
    routes.push({
      name: api.name,
      mount: `/${api.mount}`,
      credentialId: ref.id,
      upstream: new URL(ref.target.upstream || defaultUpstream(ref.kind)!),
      pathPrefixes: ref.target.pathPrefixes ?? ['/v1/'],
      methods: ref.target.methods ?? ['GET', 'POST'],
      inject: api.inject,
      placeholder,
    });
    Object.assign(guestEnv, api.guestEnv(placeholder));
  }
  for (const ref of refs.filter((r) => r.kind === 'custom-header')) {
    if (!ref.target.header) throw new FactoryError('InvalidCredential', `credential "${ref.id}" is a custom header rule without a header name`);
    const placeholder = newPlaceholder();
    const mount = `/custom/${ref.id}`;
    routes.push({
      name: `custom:${ref.id}`,
      mount,
      credentialId: ref.id,
      upstream: new URL(ref.target.upstream),
      pathPrefixes: ref.target.pathPrefixes ?? ['/'],
      methods: ref.target.methods ?? ['GET', 'POST'],
      inject: { header: ref.target.header, format: ref.target.format ?? 'raw', username: ref.target.username },
      placeholder,
    });
    guestEnv[`FACTORY_PROXY_${ENV_SAFE(ref.id)}_URL`] = `${GUEST_PROXY_ORIGIN}${mount}`;
    guestEnv[`FACTORY_PROXY_${ENV_SAFE(ref.id)}_TOKEN`] = placeholder;
  }

  let gitRemoteUrl: string | undefined;
  if (opts.git) {
    const ref = refs.find((r) => r.id === opts.git!.credentialId);
    if (!ref) throw new FactoryError('CredentialMissing', `no credential "${opts.git.credentialId}" for the task's git remote`);
    const repo = new URL(opts.git.repoUrl);
    if (repo.protocol !== 'https:') throw new FactoryError('InvalidInput', `the git remote must be an https URL, got ${repo.protocol}`);
    if (repo.username || repo.password) throw new FactoryError('InvalidInput', 'the git remote URL must not contain a user name or token');
    // The remote comes from the repository's own config, which is untrusted: the
    // token goes only to the host (and path prefix) the user stored it for.
    const allowed = new URL(ref.target.upstream);
    const allowedPath = allowed.pathname.replace(/\/$/, '');
    if (repo.origin !== allowed.origin || (allowedPath && !(repo.pathname === allowedPath || repo.pathname.startsWith(allowedPath + '/')))) {
      throw new FactoryError(
        'CredentialScope',
        `the git credential "${ref.id}" is for ${allowed.origin}${allowedPath}, not for the task's remote ${repo.origin}${repo.pathname}`,
      );
    }
    const repoName = path.posix.basename(repo.pathname).replace(/[^A-Za-z0-9._-]/g, '_') || 'repo.git';
    const placeholder = newPlaceholder();
    const mount = `/git/${repoName}`;
    routes.push({
      name: 'git',
      mount,
      credentialId: ref.id,
      upstream: new URL(repo.origin + repo.pathname.replace(/\/$/, '')),
      pathPrefixes: [],
      methods: ['GET', 'POST'],
      inject: { header: 'authorization', format: 'basic', username: ref.target.username ?? 'x-access-token' },
      placeholder,
      git: { taskId: opts.taskId, allowPush: opts.git.allowPush ?? false },
    });
    gitRemoteUrl = `http://factory:${placeholder}@${GUEST_PROXY_ADDRESS}${mount}`;
    guestEnv.FACTORY_GIT_URL = gitRemoteUrl;
  }
  return { routes, guestEnv, gitRemoteUrl };
}

/** The QEMU guestfwd entry: each guest connection to 10.0.2.100:80 → socat → the proxy's unix socket. */
export function proxyGuestForward(socketPath: string): { guestAddress: string; guestPort: number; command: string } {
  // QEMU splits -netdev options on commas and socat splits addresses on ':' and ','.
  if (!/^\/[A-Za-z0-9._/-]+$/.test(socketPath)) {
    throw new FactoryError('InvalidPath', `the proxy socket path ${JSON.stringify(socketPath)} must be absolute and contain only letters, digits, '.', '_', '-' and '/'`);
  }
  return { guestAddress: GUEST_PROXY_ADDRESS, guestPort: GUEST_PROXY_PORT, command: `socat - UNIX-CONNECT:${socketPath}` };
}

/** A shell snippet for the guest (e.g. /etc/profile.d/factory-proxy.sh): placeholders and proxy URLs only. */
export function guestEnvScript(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `export ${k}=${shellQuote(v)}`)
    .join('\n') + '\n';
}
