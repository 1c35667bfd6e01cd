// CredentialProxy: one per sandbox. Listens on a unix socket in the sandbox
// folder (mode 0600) — never on a host TCP port — and QEMU's guestfwd connects
// each guest connection to 10.0.2.100:80 to it. The guest holds placeholders;
// the proxy checks them, strips every client-supplied auth header, adds the real
// credential (from the keychain) in a header only, and forwards over verified
// HTTPS. Bodies stream through untouched in both directions, but the proxy
// frames every upstream request itself (proxy-framing.ts): a guest can never
// decide where a credentialed request ends.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmod, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { AuditEntry } from '../../common/credentials.js';
import type { EgressRefusal, EgressRule, StepName } from '../../common/egress.js';
import { Listeners } from '../../common/listeners.js';
import { GUEST_PROXY_ADDRESS, GUEST_PROXY_PORT } from '../guest/guest-proxy.js';
import type { AuditLog } from './audit.js';
import { EgressPolicy, recordEgress, type EgressGate } from './egress-policy.js';
import { checkRefCommand, readReceivePackCommands, receivePackRefusal, showRef } from './git-policy.js';
import type { SecretSource } from './keychain.js';
import { createNetGuard, DestinationRefused, type AddressAllowance, type NetGuard } from './net-guard.js';
import { forwardBody, requestFraming, upstreamFramingHeaders } from './proxy-framing.js';
import { absoluteTarget, egressAttempt, forwardRequest, guestHeadersForUpstream, refusedEarlier, refuseResponse, relayResponse } from './proxy-forward.js';
import { openTunnel } from './proxy-tunnel.js';

export type InjectFormat = 'raw' | 'bearer' | 'basic';

export interface ProxyRoute {
  /** Rule name shown in the audit log and in refusals, e.g. "anthropic". */
  name: string;
  /** Guest path prefix the route is mounted on, e.g. "/anthropic" or "/git/repo.git". */
  mount: string;
  credentialId: string;
  /** https URL; its path is prepended to the forwarded path. */
  upstream: URL;
  /** Allowed path prefixes relative to the upstream (ignored for git routes). */
  pathPrefixes: string[];
  methods: string[];
  inject: { header: string; format: InjectFormat; username?: string };
  /** The per-sandbox value the guest must present; worthless anywhere else. */
  placeholder: string;
  /** Present for a git smart-HTTP route. */
  git?: { taskId: string; allowPush: boolean };
}

export interface CredentialProxyOptions {
  sandboxId: string;
  socketPath: string;
  routes: ProxyRoute[];
  secrets: SecretSource;
  audit?: AuditLog;
  /** Destinations reachable without a credential (CONNECT for https, forward requests for http); more via allowEgress. */
  egress?: EgressRule[];
  /** The pipeline step the sandbox starts in (default setup); egress rules can be limited to steps. */
  step?: StepName;
  /** Extra CA certificates to trust upstream (tests); system CAs are used otherwise. */
  upstreamCa?: string | Buffer | Array<string | Buffer>;
  /** TEST ONLY: lets a test reach its own loopback upstreams. Never built from config. */
  allowAddress?: AddressAllowance;
  /** Upper bound on one upstream response's headers arriving. */
  upstreamTimeoutMs?: number;
  /** How long a CONNECT tunnel waits for the guest's TLS ClientHello (10 s when absent). */
  tunnelHelloTimeoutMs?: number;
}

export function newPlaceholder(): string {
  return `fiab-placeholder-${randomBytes(24).toString('hex')}`;
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** What the guest presented as its key, from any of the usual places. */
function presentedPlaceholder(req: http.IncomingMessage): string | undefined {
  const apiKey = req.headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey) return apiKey;
  const auth = req.headers.authorization;
  if (typeof auth === 'string') {
    const bearer = /^Bearer\s+(.+)$/i.exec(auth);
    if (bearer) return bearer[1]!.trim();
    const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(auth);
    if (basic) {
      const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      return colon >= 0 ? decoded.slice(colon + 1) : decoded;
    }
  }
  return undefined;
}

function credentialHeaderValue(inject: ProxyRoute['inject'], secret: string): string {
  switch (inject.format) {
    case 'bearer':
      return `Bearer ${secret}`;
    case 'basic':
      return `Basic ${Buffer.from(`${inject.username ?? 'x-access-token'}:${secret}`).toString('base64')}`;
    default:
      return secret;
  }
}

interface Match {
  route: ProxyRoute;
  /** Path (with query) relative to the route's mount. */
  rest: string;
}

export class CredentialProxy {
  readonly sandboxId: string;
  readonly socketPath: string;
  private readonly routes: ProxyRoute[];
  private readonly server: http.Server;
  private readonly guard: NetGuard;
  private readonly agent: https.Agent;
  /** Plain-HTTP upstreams of forward requests (no credential ever goes there). */
  private readonly httpAgent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  private readonly egress: EgressGate;
  private readonly sockets = new Set<Duplex>();
  /** Credential ids whose values were actually sent upstream (the leak check scans for these). */
  readonly usedCredentialIds = new Set<string>();
  private listening = false;

  constructor(private readonly opts: CredentialProxyOptions) {
    this.sandboxId = opts.sandboxId;
    this.socketPath = opts.socketPath;
    for (const r of opts.routes) {
      if (r.upstream.protocol !== 'https:') throw new Error(`route ${r.name}: upstream must be https, got ${r.upstream.protocol}`);
      if (!/^\/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$/.test(r.mount)) throw new Error(`route ${r.name}: bad mount ${r.mount}`);
    }
    // Longest mount first, so "/git/a.git" wins over "/git".
    this.routes = [...opts.routes].sort((a, b) => b.mount.length - a.mount.length);
    this.guard = createNetGuard({ allowAddress: opts.allowAddress });
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 32, ca: opts.upstreamCa });
    this.egress = { sandboxId: opts.sandboxId, policy: new EgressPolicy(opts.egress ?? [], opts.step), refusals: new Listeners<EgressRefusal>(), ...(opts.audit ? { audit: opts.audit } : {}) };
    this.server = http.createServer({ requestTimeout: 0, headersTimeout: 60_000 }, (req, res) => {
      this.handle(req, res).catch((err) => this.fail(res, 502, `proxy error: ${(err as Error).message}`));
    });
    // A guest cannot exhaust the host with connections.
    this.server.maxConnections = 128;
    // Node keeps only the first ~1,000 header lines in rawHeaders yet still frames
    // the body by a Transfer-Encoding after them: with no count cap, framing checks
    // see every header (their total is still bounded by the 16 KiB header size).
    this.server.maxHeadersCount = 0;
    this.server.on('connect', (req, socket: Duplex, head) =>
      openTunnel(req, socket, head, { ...this.egress, guard: this.guard, ...(opts.tunnelHelloTimeoutMs ? { helloTimeoutMs: opts.tunnelHelloTimeoutMs } : {}) }),
    );
    // What Node's own parser refuses (both Content-Length and Transfer-Encoding,
    // duplicate lengths, obs-fold, bad chunk sizes...) gets a 400 that says why.
    this.server.on('clientError', (err: NodeJS.ErrnoException & { reason?: string }, socket: Duplex) => {
      const inFlight = (socket as Duplex & { _httpMessage?: http.ServerResponse })._httpMessage;
      if (!socket.writable || inFlight?.headersSent || err.code === 'ECONNRESET') return socket.destroy();
      const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request';
      const body = `factory proxy: malformed request refused: ${err.reason ?? err.message} (${err.code ?? 'parse error'})\n`;
      socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      const why = `malformed request refused: ${err.reason ?? err.message} (${err.code ?? 'parse error'})`;
      const attempt = egressAttempt((err as { rawPacket?: Buffer }).rawPacket, (err as { bytesParsed?: number }).bytesParsed, GUEST_PROXY_ADDRESS, GUEST_PROXY_PORT);
      if (attempt) return recordEgress(this.egress, { ...attempt, started: Date.now(), status: Number(status.slice(0, 3)), bytesIn: 0, bytesOut: 0, refused: why });
      this.opts.audit?.record({
        time: new Date().toISOString(), sandboxId: this.sandboxId, method: '(unparsed)', host: '(none)', path: '',
        rule: 'refused: malformed request', status: Number(status.slice(0, 3)), bytesIn: 0, bytesOut: 0, durationMs: 0,
        note: `${err.code ?? ''} ${err.reason ?? err.message}`.slice(0, 300),
      });
    });
    this.server.on('connection', (s: Duplex) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** The pipeline step now running: egress rules limited to other steps stop applying. */
  setStep(step: StepName): void {
    this.egress.policy.setStep(step);
  }

  /** Adds egress rules for the rest of the sandbox's life (throws, naming it, on an invalid rule). */
  allowEgress(rules: EgressRule[]): void {
    this.egress.policy.allow(rules);
  }

  /** Every refused egress attempt (CONNECT or forward); returns the unsubscribe function. */
  onRefused(listener: (r: EgressRefusal) => void): () => void {
    return this.egress.refusals.add(listener);
  }

  get step(): StepName {
    return this.egress.policy.step;
  }

  async listen(): Promise<void> {
    if (Buffer.byteLength(this.socketPath) > 100) {
      throw new Error(`proxy socket path is too long for a unix socket (${this.socketPath.length} chars): use a shorter data dir`);
    }
    await rm(this.socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.socketPath, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    await chmod(this.socketPath, 0o600);
    this.listening = true;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.agent.destroy();
    this.httpAgent.destroy();
    if (this.listening) {
      await new Promise<void>((resolve) => this.server.close(() => resolve()));
      this.listening = false;
    }
    await rm(this.socketPath, { force: true });
  }

  private match(pathWithQuery: string): Match | undefined {
    for (const route of this.routes) {
      if (pathWithQuery === route.mount || pathWithQuery.startsWith(route.mount + '/') || pathWithQuery.startsWith(route.mount + '?')) {
        const rest = pathWithQuery.slice(route.mount.length) || '/';
        return { route, rest: rest.startsWith('/') ? rest : '/' + rest };
      }
    }
    return undefined;
  }

  /** Undefined when the method + path are allowed on the route, else the missing rule. */
  private ruleProblem(route: ProxyRoute, method: string, rest: string): string | undefined {
    const [pathOnly, query = ''] = rest.split('?', 2) as [string, string?];
    if (pathOnly.includes('..') || pathOnly.includes('//') || /%2e|%2f/i.test(pathOnly)) return `path ${pathOnly} is not a plain path`;
    if (route.git) {
      // Exactly one service and nothing else: git http-backend takes the LAST of a
      // repeated parameter (names %-decoded), so a reader of the first could be fooled.
      const params = [...new URLSearchParams(query)];
      const service = params.length === 1 && params[0]![0] === 'service' ? params[0]![1] : undefined;
      if (pathOnly === '/info/refs' && !service) return `rule "${route.name}" needs exactly one service= in the query of info/refs, not ${JSON.stringify(query.slice(0, 100))}`;
      const push = route.git.allowPush;
      if (method === 'GET' && pathOnly === '/info/refs' && service === 'git-upload-pack') return undefined;
      if (method === 'POST' && pathOnly === '/git-upload-pack') return undefined;
      if ((method === 'GET' && pathOnly === '/info/refs' && service === 'git-receive-pack') || (method === 'POST' && pathOnly === '/git-receive-pack')) {
        return push ? undefined : `git push is disabled for this task (rule "${route.name}" allows fetch only)`;
      }
      return `rule "${route.name}" allows only git smart-HTTP fetch${push ? ' and push' : ''}, not ${method} ${pathOnly}`;
    }
    if (!route.methods.includes(method)) return `rule "${route.name}" does not allow method ${method}`;
    if (!route.pathPrefixes.some((p) => pathOnly.startsWith(p))) {
      return `rule "${route.name}" allows only paths ${route.pathPrefixes.join(', ')}, not ${pathOnly}`;
    }
    return undefined;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    // The guest pipelined this behind a request that was refused: that answer closes the
    // connection, and Node drops the answers queued behind it; nothing is sent upstream.
    if (refusedEarlier(req)) return;
    let rawUrl = req.url ?? '/';
    if (!rawUrl.startsWith('/')) {
      const target = absoluteTarget(rawUrl, GUEST_PROXY_ADDRESS, GUEST_PROXY_PORT);
      if (!target.self) return forwardRequest(req, res, target, { ...this.egress, guard: this.guard, agent: this.httpAgent, upstreamTimeoutMs: this.opts.upstreamTimeoutMs });
      // A client that sends everything to its HTTP_PROXY names the proxy itself: the same as origin-form.
      rawUrl = target.path;
    }
    const started = Date.now();
    const method = (req.method ?? 'GET').toUpperCase();
    let bytesIn = 0;
    let bytesOut = 0;
    const origWrite = res.write.bind(res);
    // Count body bytes to the guest without touching them.
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (chunk) bytesOut += typeof chunk === 'string' ? Buffer.byteLength(chunk) : (chunk as Buffer).length;
      return (origWrite as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof res.write;
    const audit = (fields: Partial<AuditEntry> & { rule: string }) => {
      // Written when the exchange ends; at once if the guest already hung up.
      const write = () =>
        this.opts.audit?.record({
          time: new Date(started).toISOString(),
          sandboxId: this.sandboxId,
          method,
          host: fields.host ?? '(none)',
          path: fields.path ?? rawUrl.slice(0, 512),
          rule: fields.rule,
          status: res.statusCode,
          bytesIn,
          bytesOut,
          durationMs: Date.now() - started,
          ...(fields.note ? { note: fields.note } : {}),
        });
      if (res.closed) write();
      else res.once('close', write);
    };

    const framed = requestFraming(req);
    if ('problem' in framed) {
      audit({ rule: 'refused: framing', note: framed.problem });
      return this.fail(res, 400, `factory proxy: refused ${method} ${rawUrl.slice(0, 200)}: ${framed.problem}`);
    }
    const m = this.match(rawUrl);
    if (!m) {
      audit({ rule: 'refused: no rule' });
      const mounts = this.routes.map((r) => r.mount).join(', ') || '(none)';
      return this.fail(res, 403, `factory proxy: refused ${method} ${rawUrl.slice(0, 200)}: no rule matches this path (configured rules: ${mounts}); add a credential for this service on the Credentials screen`);
    }
    const { route, rest } = m;
    const upstreamPath = route.upstream.pathname.replace(/\/$/, '') + rest;
    const host = route.upstream.host;
    const problem = this.ruleProblem(route, method, rest);
    if (problem) {
      audit({ rule: `refused: ${route.name}`, host, path: upstreamPath });
      return this.fail(res, 403, `factory proxy: refused ${method} https://${host}${upstreamPath.split('?')[0]}: ${problem}`);
    }
    const presented = presentedPlaceholder(req);
    if (!presented) {
      audit({ rule: `refused: ${route.name} (no placeholder)`, host, path: upstreamPath });
      if (route.git) res.setHeader('WWW-Authenticate', 'Basic realm="factory proxy"');
      return this.fail(res, 401, `factory proxy: rule "${route.name}" needs this sandbox's placeholder key (x-api-key, Bearer or basic-auth password)`);
    }
    if (!sameSecret(presented, route.placeholder)) {
      audit({ rule: `refused: ${route.name} (wrong placeholder)`, host, path: upstreamPath });
      return this.fail(res, 403, `factory proxy: refused: the key presented is not this sandbox's placeholder for rule "${route.name}"`);
    }

    let prefix: Buffer | undefined;
    let pushNote: string | undefined;
    if (route.git && method === 'POST' && rest.split('?')[0] === '/git-receive-pack') {
      const enc = req.headers['content-encoding'];
      if (enc && enc !== 'identity') {
        audit({ rule: `refused: ${route.name} (push)`, host, path: upstreamPath });
        return this.fail(res, 403, `factory proxy: refused push: compressed receive-pack requests (${enc}) cannot be checked`);
      }
      const read = await readReceivePackCommands(req);
      if ('error' in read) {
        audit({ rule: `refused: ${route.name} (push)`, host, path: upstreamPath, note: read.error });
        return this.fail(res, 403, `factory proxy: refused push: ${read.error}`);
      }
      const reasons = read.commands.map((c) => checkRefCommand(c, route.git!.taskId));
      pushNote = read.commands.map((c) => showRef(c.ref)).join(' ');
      if (reasons.some(Boolean)) {
        audit({ rule: `refused: ${route.name} (push)`, host, path: upstreamPath, note: pushNote });
        req.resume();
        // Answer in git's own format, so the user sees the reason per ref.
        const body = receivePackRefusal(read.commands, read.capabilities, reasons, `factory proxy: ${reasons.find(Boolean)}`);
        res.writeHead(200, { 'content-type': 'application/x-git-receive-pack-result', 'cache-control': 'no-cache', 'content-length': body.length });
        res.end(body);
        return;
      }
      prefix = read.buffered;
    }

    // Build the upstream request: client credentials and hop-by-hop headers out, the real one in.
    const injectName = route.inject.header.toLowerCase();
    const headers = guestHeadersForUpstream(req, (lower) => lower === injectName);
    let secret: string;
    try {
      secret = await this.opts.secrets.reveal(route.credentialId);
    } catch (err) {
      audit({ rule: `${route.name} (credential unavailable)`, host, path: upstreamPath });
      return this.fail(res, 503, `factory proxy: the credential for rule "${route.name}" is unavailable: ${(err as Error).message}`);
    }
    headers[injectName] = credentialHeaderValue(route.inject, secret);
    headers.host = host;
    Object.assign(headers, upstreamFramingHeaders(method, framed.framing));

    // IP literals never reach a lookup hook, so they are checked here; names are
    // checked on every connect by the lookup hook (after resolution, no rebinding).
    if (net.isIP(route.upstream.hostname.replace(/^\[|\]$/g, ''))) {
      try {
        await this.guard.resolve(route.upstream.hostname);
      } catch (err) {
        audit({ rule: `refused: ${route.name} (destination)`, host, path: upstreamPath });
        return this.fail(res, 403, `factory proxy: refused: ${(err as Error).message}`);
      }
    }

    audit({ rule: route.name, host, path: upstreamPath, note: pushNote });
    this.usedCredentialIds.add(route.credentialId);
    const upstreamReq = https.request({
      protocol: 'https:',
      host: route.upstream.hostname.replace(/^\[|\]$/g, ''),
      port: route.upstream.port || 443,
      servername: net.isIP(route.upstream.hostname) ? undefined : route.upstream.hostname,
      method,
      path: upstreamPath,
      headers,
      agent: this.agent,
      lookup: this.guard.lookup,
      rejectUnauthorized: true,
      timeout: this.opts.upstreamTimeoutMs ?? 120_000,
    });
    upstreamReq.on('timeout', () => upstreamReq.destroy(new Error('upstream did not answer in time')));
    upstreamReq.on('error', (err) => {
      if (err instanceof DestinationRefused) return this.fail(res, 403, `factory proxy: refused: ${err.message}`);
      this.fail(res, 502, `factory proxy: upstream ${host} failed: ${err.message}`);
    });
    relayResponse(upstreamReq, res);
    forwardBody(req, upstreamReq, framed.framing, prefix, (n) => (bytesIn += n));
  }

  private fail(res: http.ServerResponse, status: number, message: string): void {
    refuseResponse(res, status, message);
  }
}
