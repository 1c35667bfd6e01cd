// Shared by the proxy-* tests: a sandbox's proxy in front of the real local
// upstreams (the HTTPS model-API stub and git http-backend, both with the test
// CA), and a guest-side HTTP client that speaks to the proxy's unix socket the
// way a program inside the sandbox can: any method, any headers, any framing.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { CredentialRef } from '../../../common/credentials.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { CredentialProxy, type CredentialProxyOptions } from '../../../main/credentials/proxy.js';
import { planSandboxRoutes, type SandboxPlan } from '../../../main/credentials/routes.js';
import { git, startGitServer, type GitServer } from '../../support/git-server.js';
import { createTestCa, type TestCa } from '../../support/https.js';
import { startModelStub, type ModelStub } from '../../support/model-stub.js';

export const REAL_ANTHROPIC = 'sk-ant-real-key-0123456789abcdef';
export const REAL_GIT_TOKEN = 'ghp_realgittoken1234567890';
export const TASK = 't42';
export const allowLoopback = (ip: string, host: string) => host === 'localhost' && (ip === '127.0.0.1' || ip === '::1');

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface GuestRequest {
  method?: string;
  path: string;
  headers?: http.OutgoingHttpHeaders;
  body?: string | Buffer;
  /** A keep-alive agent, to send several requests on one guest connection. */
  agent?: http.Agent;
}

/**
 * One request from the guest. Node's client writes exactly the framing the
 * headers ask for: `transfer-encoding: chunked` on a GET is sent chunked, and a
 * `content-length` named in `connection:` is still sent, as an attacker wants.
 */
export function guestRequest(socketPath: string, opts: GuestRequest): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, method: opts.method ?? 'GET', path: opts.path, headers: { host: '10.0.2.100', ...opts.headers }, agent: opts.agent ?? false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

export const basicAuth = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

export interface SandboxProxy {
  proxy: CredentialProxy;
  plan: SandboxPlan;
  /** Guest auth headers for the model route and the git route. */
  anthropicAuth: Record<string, string>;
  gitAuth: Record<string, string>;
  close(): Promise<void>;
}

/** A proxy for one sandbox with an Anthropic route to `modelUrl` and, when given, a git route to `repoUrl`. */
export async function startSandboxProxy(opts: {
  modelUrl: string;
  gitServerUrl?: string;
  repoUrl?: string;
  allowPush?: boolean;
  ca: string;
  extra?: Partial<CredentialProxyOptions>;
}): Promise<SandboxProxy> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-proxy-'));
  const secrets = new MemorySecretStore();
  await secrets.put('anth', REAL_ANTHROPIC);
  await secrets.put('gh', REAL_GIT_TOKEN);
  const now = new Date().toISOString();
  const refs: CredentialRef[] = [{ id: 'anth', kind: 'anthropic', label: 'Anthropic', target: { upstream: opts.modelUrl }, createdAt: now, updatedAt: now }];
  if (opts.gitServerUrl) refs.push({ id: 'gh', kind: 'git', label: 'Git', target: { upstream: opts.gitServerUrl }, createdAt: now, updatedAt: now });
  const plan = planSandboxRoutes(refs, {
    taskId: TASK,
    ...(opts.repoUrl ? { git: { repoUrl: opts.repoUrl, credentialId: 'gh', allowPush: opts.allowPush ?? false } } : {}),
  });
  const proxy = new CredentialProxy({
    sandboxId: 'sb-attack',
    socketPath: path.join(dir, 'proxy.sock'),
    routes: plan.routes,
    secrets,
    upstreamCa: opts.ca,
    allowAddress: allowLoopback,
    ...opts.extra,
  });
  await proxy.listen();
  const gitPlaceholder = plan.routes.find((r) => r.git)?.placeholder;
  return {
    proxy,
    plan,
    anthropicAuth: { 'x-api-key': plan.guestEnv.ANTHROPIC_API_KEY! },
    gitAuth: gitPlaceholder ? { authorization: basicAuth('factory', gitPlaceholder) } : {},
    close: async () => {
      await proxy.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function pkt(line: string): Buffer {
  return Buffer.concat([Buffer.from((Buffer.byteLength(line) + 4).toString(16).padStart(4, '0')), Buffer.from(line)]);
}

/**
 * What a receive-pack request body looks like for "move `ref` to a new commit on
 * top of main": the pkt-line command list and the pack, built with real git
 * from the upstream's bare repository (the attacker cloned it through the proxy).
 */
export function receivePackBody(barePath: string, ref: string, opts: { create?: boolean } = {}): { body: Buffer; newId: string } {
  const work = mkdtempSync(path.join(os.tmpdir(), 'fiab-forge-'));
  try {
    git(['clone', '-q', barePath, 'w'], work);
    const w = path.join(work, 'w');
    const oldId = git(['rev-parse', 'HEAD'], w).trim();
    git(['commit', '-q', '--allow-empty', '-m', 'pushed by the guest'], w);
    const newId = git(['rev-parse', 'HEAD'], w).trim();
    const pack = execFileSync('git', ['pack-objects', '--stdout', '--revs', '-q'], { cwd: w, input: `${newId}\n^${oldId}\n` });
    const from = opts.create ? '0'.repeat(40) : oldId;
    return { body: Buffer.concat([pkt(`${from} ${newId} ${ref}\0report-status\n`), Buffer.from('0000'), pack]), newId };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The upstreams most proxy tests need: the test CA, a model API stub and a git server. */
export interface Upstreams {
  ca: TestCa;
  stub: ModelStub;
  gitServer: GitServer;
}

export async function startUpstreams(): Promise<Upstreams> {
  const ca = createTestCa();
  const stub = await startModelStub(ca, { anthropicKey: REAL_ANTHROPIC });
  const gitServer = await startGitServer(ca, { user: 'x-access-token', token: REAL_GIT_TOKEN });
  return { ca, stub, gitServer };
}

/** Stops what startUpstreams started (whatever part of it did start). */
export async function stopUpstreams(u: Partial<Upstreams>): Promise<void> {
  await u.stub?.close();
  await u.gitServer?.dispose();
  u.ca?.dispose();
}
