// Forward (absolute-form) requests through the credential proxy: plain HTTP to
// hosts an egress rule allows (Debian mirrors: apt speaks HTTP and pipelines).
// No credential is ever added and every auth or cookie header is dropped; the
// proxy writes the framing itself (proxy-framing.ts) and sets Host from the
// URL; the address guard checks what the name resolves to; upstream
// connections are kept in a pool; the response streams back untouched.
import http from 'node:http';
import { egressHostProblem } from '../../common/egress.js';
import { recordEgress, type EgressGate, type EgressOutcome } from './egress-policy.js';
import { DestinationRefused, rangeAllowance, type NetGuard } from './net-guard.js';
import { forwardBody, requestFraming, upstreamFramingHeaders } from './proxy-framing.js';
import { connectTarget } from './proxy-tunnel.js';

/** Headers the guest may never send upstream: any credential, cookie or forwarding hint. */
export const STRIPPED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'authorization', 'proxy-authorization', 'x-api-key', 'api-key', 'x-goog-api-key', 'x-auth-token', 'private-token', 'job-token',
  'cookie', 'cookie2', 'forwarded', 'x-real-ip', 'via', 'host',
  // Node answers 100-continue to the guest itself; upstream gets the body straight away.
  'expect',
]);
export const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
/** Never copied from the guest: the proxy writes the framing of every upstream request itself. */
const FRAMING = new Set(['content-length', 'transfer-encoding']);
/** On a forward, where nothing is ever authenticated, any header whose name looks like a credential goes too. */
const CREDENTIAL_LIKE = /auth|token|cookie|session|secret|passw|api-?key|credential|signature/i;

/** The guest's request headers fit to send upstream: credentials, hop-by-hop, framing and forwarding hints dropped. */
export function guestHeadersForUpstream(req: http.IncomingMessage, drop: (lower: string) => boolean = () => false): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = {};
  const listed = String(req.headers.connection ?? '').toLowerCase().split(',').map((s) => s.trim());
  for (const [name, value] of Object.entries(req.headers)) {
    const lower = name.toLowerCase();
    if (value === undefined) continue;
    if (STRIPPED_REQUEST_HEADERS.has(lower) || HOP_BY_HOP.has(lower) || FRAMING.has(lower) || listed.includes(lower)) continue;
    if (lower.startsWith('x-forwarded-') || drop(lower)) continue;
    headers[lower] = value;
  }
  return headers;
}

/** The upstream's response headers fit for the guest: hop-by-hop and cookies dropped. */
export function upstreamHeadersForGuest(upstreamRes: http.IncomingMessage): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  const listed = String(upstreamRes.headers.connection ?? '').toLowerCase().split(',').map((t) => t.trim());
  for (const [name, value] of Object.entries(upstreamRes.headers)) {
    const lower = name.toLowerCase();
    if (value === undefined || HOP_BY_HOP.has(lower) || lower === 'set-cookie') continue;
    if (listed.includes(lower) && lower !== 'content-length') continue;
    out[lower] = value;
  }
  return out;
}

/** Answers with a refusal (reason in the body and in a header: a HEAD has no body) and closes the connection. */
/**
 * Guest connections on which a refusal was sent: it closes them, so requests the
 * guest pipelined behind it are never acted on (the guest would not see the answer).
 */
const closingSockets = new WeakSet<object>();

/** Whether an earlier request on this guest connection was refused (the connection is closing). */
export function refusedEarlier(req: http.IncomingMessage): boolean {
  return closingSockets.has(req.socket);
}

export function refuseResponse(res: http.ServerResponse, status: number, message: string): void {
  closingSockets.add(res.req.socket);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = message + '\n';
  const reason = message.replace(/[^\x20-\x7e]/g, '?').slice(0, 1000);
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close', 'x-factory-proxy-refusal': reason });
  res.end(body);
}

export type AbsoluteTarget =
  | { self: true; path: string }
  | { self: false; host: string; port: number; path: string; problem?: string; status?: number };

/** Reads an absolute-form request target. The proxy's own address (10.0.2.100:80) means origin-form. */
export function absoluteTarget(rawUrl: string, selfHost: string, selfPort: number): AbsoluteTarget {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/s.exec(rawUrl);
  if (!m) return { self: false, host: '', port: 0, path: '', status: 400, problem: 'the request target is neither a path nor an absolute http:// URL' };
  const scheme = m[1]!.toLowerCase();
  const authority = m[2]!;
  const path = m[3]!.startsWith('/') ? m[3]! : '/' + m[3]!;
  if (scheme === 'https') return { self: false, host: authority, port: 443, path, status: 403, problem: 'absolute-form https:// requests are refused: tunnel with CONNECT (HTTPS_PROXY) instead' };
  if (scheme !== 'http') return { self: false, host: authority, port: 0, path, status: 400, problem: `the scheme ${JSON.stringify(scheme.slice(0, 20))} is not forwarded (http only; https through CONNECT)` };
  if (authority.includes('@')) return { self: false, host: authority, port: 0, path, status: 400, problem: 'the URL carries user info (user:password@): credentials are never forwarded' };
  const hp = /^(\[[^\]]*\]|[^:]*)(?::([0-9]{1,5}))?$/.exec(authority);
  if (!hp) return { self: false, host: authority, port: 0, path, status: 400, problem: `the URL's authority ${JSON.stringify(authority.slice(0, 100))} is not host[:port]` };
  const host = hp[1]!.toLowerCase();
  const port = hp[2] === undefined ? 80 : Number(hp[2]);
  if (hp[2] !== undefined && (!/^[1-9]/.test(hp[2]) || port > 65535)) return { self: false, host, port: 0, path, status: 400, problem: `port ${hp[2]} is not a port (1-65535, no leading zeros)` };
  if (host === selfHost && port === selfPort) return { self: true, path };
  return { self: false, host, port, path };
}

export interface ForwardOptions extends EgressGate {
  guard: NetGuard;
  agent: http.Agent;
  upstreamTimeoutMs?: number;
}

export function forwardRequest(req: http.IncomingMessage, res: http.ServerResponse, target: Extract<AbsoluteTarget, { self: false }>, opts: ForwardOptions): void {
  const method = (req.method ?? 'GET').toUpperCase();
  const outcome: EgressOutcome = { scheme: 'http', host: target.host, port: target.port, method, path: target.path, started: Date.now(), step: opts.policy.step, status: 0, bytesIn: 0, bytesOut: 0 };
  const origWrite = res.write.bind(res);
  // Count body bytes to the guest without touching them.
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (chunk) outcome.bytesOut += typeof chunk === 'string' ? Buffer.byteLength(chunk) : (chunk as Buffer).length;
    return (origWrite as (...a: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof res.write;
  // One entry per exchange, written when it ends.
  const record = () => recordEgress(opts, { ...outcome, status: res.statusCode });
  if (res.closed) queueMicrotask(record);
  else res.once('close', record);
  const refuse = (status: number, why: string) => {
    outcome.refused = why;
    refuseResponse(res, status, `factory proxy: refused ${method} http://${target.host.slice(0, 100)}:${target.port}${target.path.slice(0, 200)}: ${why}`);
    // The body of a refused request is not read: the connection closes after the answer.
  };

  if (target.problem) return refuse(target.status ?? 400, target.problem);
  const framed = requestFraming(req);
  if ('problem' in framed) return refuse(400, framed.problem);
  const hostProblem = egressHostProblem(target.host);
  if (hostProblem) return refuse(403, hostProblem);
  // The URL says where the request goes; a Host header that says otherwise is a
  // request to two places at once (virtual hosts behind one address): refused.
  const hosts: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === 'host') hosts.push(req.rawHeaders[i + 1]!.trim().toLowerCase());
  const accepted = target.port === 80 ? [target.host, `${target.host}:80`] : [`${target.host}:${target.port}`];
  if (hosts.length > 1) return refuse(400, `the request has ${hosts.length} Host headers`);
  if (hosts.length === 1 && !accepted.includes(hosts[0]!)) {
    return refuse(400, `the Host header ${JSON.stringify(hosts[0]!.slice(0, 100))} disagrees with the URL's host ${accepted[0]}`);
  }
  const decision = opts.policy.decide({ scheme: 'http', host: target.host, port: target.port, method, path: target.path });
  if (!decision.allowed) return refuse(403, decision.reason);
  outcome.rule = decision.rule.name;

  const headers = guestHeadersForUpstream(req, (lower) => CREDENTIAL_LIKE.test(lower));
  headers.host = target.port === 80 ? target.host : `${target.host}:${target.port}`;
  Object.assign(headers, upstreamFramingHeaders(method, framed.framing));
  const upstreamReq = http.request({
    host: target.host,
    port: target.port,
    method,
    path: target.path,
    headers,
    agent: opts.agent,
    // The address guard runs on what the name resolves to, on every new connection.
    lookup: opts.guard.lookupAllowing(rangeAllowance(decision.rule.addresses)),
    timeout: opts.upstreamTimeoutMs ?? 120_000,
  });
  upstreamReq.on('timeout', () => upstreamReq.destroy(new Error('upstream did not answer in time')));
  upstreamReq.on('error', (err) => {
    if (err instanceof DestinationRefused) {
      outcome.rule = undefined;
      return refuse(403, err.message);
    }
    outcome.note = `upstream failed: ${err.message}`;
    refuseResponse(res, 502, `factory proxy: upstream ${target.host}:${target.port} failed: ${err.message}`);
  });
  relayResponse(upstreamReq, res);
  forwardBody(req, upstreamReq, framed.framing, undefined, (n) => (outcome.bytesIn += n));
}

/**
 * Streams the upstream's answer to the guest, and ends the upstream request when
 * the guest goes away first. Node's client parser has already refused a response
 * with ambiguous framing; a body cut short reaches the guest as a reset, never as an end.
 */
export function relayResponse(upstreamReq: http.ClientRequest, res: http.ServerResponse): void {
  upstreamReq.on('response', (upstreamRes) => {
    res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, upstreamHeadersForGuest(upstreamRes));
    res.flushHeaders();
    upstreamRes.pipe(res);
    upstreamRes.on('error', () => res.destroy());
  });
  res.on('close', () => {
    if (!res.writableFinished) upstreamReq.destroy();
  });
}

/**
 * The egress a request that Node's parser refused was after, so that refusal
 * reaches onRefused too: the last request line before where the parser stopped
 * (`parsed` bytes into the packet; a line after it may be the guest's smuggled
 * one). Undefined for an origin-form request or one with no readable line.
 */
export function egressAttempt(raw: Buffer | undefined, parsed: number | undefined, selfHost: string, selfPort: number): Pick<EgressOutcome, 'scheme' | 'host' | 'port' | 'method' | 'path'> | undefined {
  if (!raw) return undefined;
  const lines = [...raw.subarray(0, parsed ?? raw.length).toString('latin1').matchAll(/^([A-Z]{1,20}) (\S{1,4000}) HTTP\/\d\.\d\r?$/gm)];
  const last = lines[lines.length - 1];
  if (!last) return undefined;
  const method = last[1]!;
  const url = last[2]!;
  if (method === 'CONNECT') {
    const t = connectTarget(url);
    return { scheme: 'https', host: t.host, port: t.port, method };
  }
  if (url.startsWith('/')) return undefined;
  const t = absoluteTarget(url, selfHost, selfPort);
  if (t.self) return undefined;
  return { scheme: /^https:/i.test(url) ? 'https' : 'http', host: t.host, port: t.port, method, path: t.path };
}
