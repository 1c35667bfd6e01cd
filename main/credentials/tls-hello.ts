// The TLS ClientHello a guest sends first through a CONNECT tunnel, read far
// enough to find the server name (SNI) it asks for. Bytes come from the guest
// and are hostile: every length is checked against the bytes of its container,
// records and the handshake message are capped, and anything that is not a
// plain ClientHello is a problem, never a guess. No dependency of the app
// parses a ClientHello without terminating TLS, hence this small reader.

/** TLSPlaintext records carry at most 2^14 bytes (RFC 8446 5.1). */
export const MAX_RECORD_BYTES = 16 * 1024;
/** A ClientHello may span records; more than this is refused (real ones, post-quantum key shares included, stay under 4 KiB). */
export const MAX_HELLO_BYTES = 64 * 1024;
/** Records one ClientHello may span (real clients use one, a very large hello a few). */
export const MAX_HELLO_RECORDS = 16;

const RECORD_HANDSHAKE = 22;
const HANDSHAKE_CLIENT_HELLO = 1;
const EXT_SERVER_NAME = 0;
const NAME_TYPE_HOST = 0;

export type HelloRead =
  /** More bytes are needed: nothing can change until `need` bytes (in all) have come. */
  | { status: 'more'; need: number }
  /** The complete ClientHello: the host_name it names, if any. */
  | { status: 'done'; serverName: string | null }
  | { status: 'bad'; problem: string };

/** A reader over one buffer that refuses to read past its end. */
class Cursor {
  pos = 0;
  constructor(private readonly b: Buffer, private readonly what: string) {}
  get left(): number {
    return this.b.length - this.pos;
  }
  need(n: number, field: string): void {
    if (n > this.left) throw new HelloProblem(`the ${this.what} ends inside its ${field} (${n} bytes claimed, ${this.left} left)`);
  }
  u8(field: string): number {
    this.need(1, field);
    return this.b[this.pos++]!;
  }
  u16(field: string): number {
    this.need(2, field);
    const v = this.b.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  bytes(n: number, field: string): Buffer {
    this.need(n, field);
    const v = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }
}

class HelloProblem extends Error {}

/**
 * Reads the ClientHello from the first bytes the guest sent through the
 * tunnel: TLS handshake records, reassembled until the ClientHello message is
 * complete. 'more' while it is not; 'bad' as soon as the bytes cannot be one.
 */
export function readClientHello(data: Buffer): HelloRead {
  try {
    const fragments: Buffer[] = [];
    let have = 0;
    let messageLength = -1;
    let at = 0;
    for (;;) {
      if (data.length - at < 5) return { status: 'more', need: at + 5 };
      const type = data[at]!;
      const major = data[at + 1]!;
      const length = data.readUInt16BE(at + 3);
      if (type !== RECORD_HANDSHAKE) {
        return { status: 'bad', problem: at === 0 ? 'the first bytes through the tunnel are not a TLS handshake record (an https egress rule tunnels TLS only)' : `a TLS record of type ${type} came before the ClientHello was complete` };
      }
      if (major !== 3) return { status: 'bad', problem: `the TLS record has version ${major}.${data[at + 2]} (3.x expected)` };
      if (length === 0) return { status: 'bad', problem: 'an empty TLS handshake record' };
      if (length > MAX_RECORD_BYTES) return { status: 'bad', problem: `a TLS record claims ${length} bytes, over the ${MAX_RECORD_BYTES} the protocol allows` };
      if (data.length - at - 5 < length) return { status: 'more', need: at + 5 + length };
      if (fragments.length >= MAX_HELLO_RECORDS) return { status: 'bad', problem: `the ClientHello spans more than ${MAX_HELLO_RECORDS} TLS records` };
      fragments.push(data.subarray(at + 5, at + 5 + length));
      have += length;
      at += 5 + length;
      if (messageLength < 0 && have >= 4) {
        const head = Buffer.concat(fragments).subarray(0, 4);
        if (head[0] !== HANDSHAKE_CLIENT_HELLO) return { status: 'bad', problem: `the first TLS handshake message is of type ${head[0]}, not a ClientHello` };
        messageLength = head.readUIntBE(1, 3);
        if (messageLength + 4 > MAX_HELLO_BYTES) return { status: 'bad', problem: `the ClientHello claims ${messageLength} bytes, over the ${MAX_HELLO_BYTES} byte cap` };
      }
      if (messageLength >= 0 && have >= messageLength + 4) {
        // Bytes after the ClientHello in its last record would be a second handshake message: none may come before the server answers.
        if (have !== messageLength + 4) return { status: 'bad', problem: 'the ClientHello record holds more than the ClientHello' };
        return { status: 'done', serverName: serverNameOf(Buffer.concat(fragments).subarray(4)) };
      }
      if (have > MAX_HELLO_BYTES) return { status: 'bad', problem: `the ClientHello runs past the ${MAX_HELLO_BYTES} byte cap` };
    }
  } catch (err) {
    if (err instanceof HelloProblem) return { status: 'bad', problem: err.message };
    throw err;
  }
}

/** The host_name of the server_name extension of a ClientHello body (RFC 8446 4.1.2, RFC 6066 3), or null without one. */
function serverNameOf(body: Buffer): string | null {
  const c = new Cursor(body, 'ClientHello');
  c.u16('version');
  c.bytes(32, 'random');
  const session = c.u8('session id length');
  if (session > 32) throw new HelloProblem(`the ClientHello's session id is ${session} bytes (32 at most)`);
  c.bytes(session, 'session id');
  const suites = c.u16('cipher suites length');
  if (suites < 2 || suites % 2) throw new HelloProblem(`the ClientHello's cipher suites take ${suites} bytes (an even number, at least 2)`);
  c.bytes(suites, 'cipher suites');
  const compression = c.u8('compression methods length');
  if (compression < 1) throw new HelloProblem('the ClientHello lists no compression method');
  c.bytes(compression, 'compression methods');
  if (c.left === 0) return null; // no extensions at all
  const extLength = c.u16('extensions length');
  if (extLength !== c.left) throw new HelloProblem(`the ClientHello's extensions claim ${extLength} bytes where ${c.left} remain`);
  const ext = new Cursor(c.bytes(extLength, 'extensions'), 'extension list');
  const seen = new Set<number>();
  let name: string | null = null;
  while (ext.left > 0) {
    const type = ext.u16('extension type');
    const data = ext.bytes(ext.u16('extension length'), 'extension data');
    if (seen.has(type)) throw new HelloProblem(`the ClientHello has extension ${type} twice`);
    seen.add(type);
    if (type === EXT_SERVER_NAME) name = hostNameOf(data);
  }
  return name;
}

/** The one host_name of a server_name extension. */
function hostNameOf(data: Buffer): string {
  const c = new Cursor(data, 'server_name extension');
  const listLength = c.u16('server name list length');
  if (listLength !== c.left) throw new HelloProblem(`the server_name list claims ${listLength} bytes where ${c.left} remain`);
  if (listLength === 0) throw new HelloProblem('the server_name list is empty');
  let host: string | null = null;
  while (c.left > 0) {
    const type = c.u8('name type');
    const name = c.bytes(c.u16('name length'), 'name');
    if (type !== NAME_TYPE_HOST) throw new HelloProblem(`the server_name list has a name of type ${type}, not a host_name`);
    if (host !== null) throw new HelloProblem('the server_name list has two host names');
    if (name.length === 0) throw new HelloProblem('the server_name host name is empty');
    host = name.toString('latin1');
  }
  return host!;
}

/**
 * Why a ClientHello's server name does not name `host` (the CONNECT host,
 * lowercase), or undefined when it does: exactly, ASCII case aside, with no
 * trailing dot and nothing but host name characters.
 */
export function serverNameProblem(serverName: string | null, host: string): string | undefined {
  if (serverName === null) return `the TLS ClientHello names no server (no SNI host_name); the tunnel is only for ${host}`;
  const shown = JSON.stringify(serverName.length > 120 ? serverName.slice(0, 120) + '…' : serverName);
  if (!/^[A-Za-z0-9.-]+$/.test(serverName)) return `the TLS server name ${shown} is not a host name`;
  if (serverName.endsWith('.')) return `the TLS server name ${shown} ends with a dot; the tunnel is only for ${host}`;
  // ASCII lowercasing only: no Unicode case folding can turn another name into this one.
  const lower = serverName.replace(/[A-Z]/g, (ch) => ch.toLowerCase());
  if (lower !== host) return `the TLS server name ${shown} is not ${host}, the host the tunnel was allowed for`;
  return undefined;
}
