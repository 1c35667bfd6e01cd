// How the credential proxy delimits request bodies. The proxy re-frames every
// request it sends upstream: it writes the Content-Length (or the chunked
// encoding) itself from what its own parser read, so a body can never extend
// past the request it belongs to and become the head of another one that the
// proxy's next, credentialed request would complete (request smuggling).
// Anything whose framing is not plain and single is refused before any byte
// goes upstream; Node's parser already rejects most of it, and these checks do
// not depend on that.
import type http from 'node:http';
import type { Writable } from 'node:stream';

/** Methods whose requests may not carry a body through the proxy. */
export const BODYLESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

export type Framing = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' };

type FramedRequest = Pick<http.IncomingMessage, 'method' | 'rawHeaders' | 'httpVersion'>;

const show = (v: string) => JSON.stringify(v.length > 80 ? v.slice(0, 80) + '…' : v);

/** The body framing of a guest request, or the problem that makes it ambiguous. */
export function requestFraming(req: FramedRequest): { framing: Framing } | { problem: string } {
  const method = (req.method ?? 'GET').toUpperCase();
  const lengths: string[] = [];
  const codings: string[] = [];
  const connection: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    const value = req.rawHeaders[i + 1]!;
    if (/[\r\n]/.test(value) || /[\s:]/.test(name)) return { problem: `the header ${show(name)} is folded or malformed (obs-fold and line breaks are refused)` };
    if (name === 'content-length') lengths.push(value.trim());
    else if (name === 'transfer-encoding') codings.push(value.trim());
    else if (name === 'connection') connection.push(...value.toLowerCase().split(',').map((t) => t.trim()));
  }
  const named = connection.filter((t) => t === 'content-length' || t === 'transfer-encoding');
  if (named.length) return { problem: `the Connection header names ${named.join(' and ')}, which would strip the request's framing` };
  if (lengths.length > 1) return { problem: `the request has ${lengths.length} Content-Length headers (${lengths.map(show).join(', ')})` };
  if (codings.length > 1) return { problem: `the request has ${codings.length} Transfer-Encoding headers (${codings.map(show).join(', ')})` };
  if (lengths.length && codings.length) return { problem: 'the request has both Content-Length and Transfer-Encoding' };
  if (codings.length) {
    if (codings[0]!.toLowerCase() !== 'chunked') return { problem: `Transfer-Encoding ${show(codings[0]!)} is not supported: only a single "chunked"` };
    if (req.httpVersion !== '1.1') return { problem: `Transfer-Encoding on an HTTP/${req.httpVersion} request` };
    if (BODYLESS_METHODS.has(method)) return { problem: `a ${method} request may not carry a body (Transfer-Encoding: chunked)` };
    return { framing: { kind: 'chunked' } };
  }
  if (lengths.length) {
    if (!/^\d{1,15}$/.test(lengths[0]!)) return { problem: `Content-Length ${show(lengths[0]!)} is not a plain decimal number` };
    const length = Number(lengths[0]);
    if (length > 0 && BODYLESS_METHODS.has(method)) return { problem: `a ${method} request may not carry a body (Content-Length: ${length})` };
    return { framing: length > 0 ? { kind: 'length', length } : { kind: 'none' } };
  }
  return { framing: { kind: 'none' } };
}

/** The framing headers the proxy writes upstream; every guest-supplied one was dropped. */
export function upstreamFramingHeaders(method: string, framing: Framing): Record<string, string> {
  if (framing.kind === 'length') return { 'content-length': String(framing.length) };
  if (framing.kind === 'chunked') return { 'transfer-encoding': 'chunked' };
  // An explicit zero, so nothing can ever be read as this request's body.
  return BODYLESS_METHODS.has(method) ? {} : { 'content-length': '0' };
}

/**
 * Streams the guest's body upstream after `prefix` (bytes already read from it).
 * The upstream request is ended only when the guest's body ended exactly as
 * framed; a guest that stops mid-body destroys the upstream request, so its
 * connection is closed and never reused half-written.
 */
export function forwardBody(req: http.IncomingMessage, upstream: Writable, framing: Framing, prefix: Buffer | undefined, count: (n: number) => void): void {
  let sent = 0;
  const limit = framing.kind === 'length' ? framing.length : framing.kind === 'none' ? 0 : Infinity;
  const send = (c: Buffer) => {
    // Never a byte past the framing written upstream: there it would start another request.
    if (sent + c.length > limit) {
      upstream.destroy(new Error(`the request body ran past the ${limit} bytes its framing said`));
      return false;
    }
    sent += c.length;
    count(c.length);
    return upstream.write(c);
  };
  const finish = () => {
    const expected = framing.kind === 'length' ? framing.length : framing.kind === 'none' ? 0 : sent;
    if (sent !== expected) upstream.destroy(new Error(`the request body had ${sent} bytes where its framing said ${expected}`));
    else upstream.end();
  };
  if (prefix?.length) send(prefix);
  if (req.readableEnded) return finish();
  req.on('data', (c: Buffer) => {
    if (!send(c)) req.pause();
  });
  upstream.on('drain', () => req.resume());
  req.on('end', finish);
  req.on('close', () => {
    if (!req.complete) upstream.destroy(new Error('the guest closed its connection before the request body ended'));
  });
  req.resume();
}
