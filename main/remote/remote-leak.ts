// The leak check of a sandbox on a remote host, run on the host so that guest
// memory and the overlay never cross the link, and so that no credential
// crosses it either: the host gets only salted SHA-256 digests of each needle
// and of its first bytes (a fresh salt per check) and answers with counts and offsets.
//
// Covered on the host: every fixed encoding of leak-needles whose characters
// fall in one of the scanner's classes (raw, hex, HEX, base64 and base64url
// fragments at each alignment, basic-auth, UTF-16LE, UTF-16BE) in the memory
// dump, the overlay and the serial log. Not covered there (the local check
// covers them): JSON/URL-escaped forms, gzip/zlib-compressed data, values split
// across two non-adjacent memory pages, and values with a space, a control
// character or a non-ASCII character (those needles are named as not scanned).
import { randomBytes, createHash } from 'node:crypto';
import { FactoryError } from '../../common/errors.js';
import type { RemoteLeakSource } from '../credentials/leak-check.js';
import type { LeakNeedle } from '../credentials/leak-needles.js';
import type { SourceScan } from '../credentials/leak-scan.js';
import { checkHostPath, DOMAIN_NAME } from './domain-xml.js';
import { perlFile } from '../guest/guest-perl.js';
import type { SshHost } from './ssh-host.js';

/** The scanner's character classes, narrowest first (must match %CLASS in the script). */
const CLASSES: Array<[string, RegExp]> = [
  ['hex', /^[0-9a-f]+$/],
  ['HEX', /^[0-9A-F]+$/],
  ['tok', /^[A-Za-z0-9_-]+$/],
  ['b64', /^[A-Za-z0-9+/]+$/],
  ['word', /^[\x21-\x7e]+$/],
];

export const REMOTE_SCAN_LIMITS = {
  /** Windows hashed per check; a guest that fills its memory with one long run makes the verdict incomplete, not slow. */
  maxWindows: 150_000_000,
  maxHitsPerNeedle: 20,
  chunkBytes: 16 * 1024 * 1024,
  /** The answer: lines and characters. */
  maxLines: 20_000,
  maxChars: 1024 * 1024,
};

export interface ScanSpec {
  /** The spec file the host reads: digests, never a value. */
  text: string;
  nonce: string;
  /** Needles by the id the host answers with. */
  byId: LeakNeedle[];
  /** Needles the host scanner cannot look for (named in the report). */
  uncovered: LeakNeedle[];
}

/** How a needle looks to the scanner: class, unit and the characters it is made of. */
function shape(n: LeakNeedle): { unit: '1' | 'le' | 'be'; chars: string } | undefined {
  const b = n.bytes;
  if (n.encoding === 'utf16le' || n.encoding === 'utf16be') {
    if (b.length % 2) return undefined;
    const le = n.encoding === 'utf16le';
    let chars = '';
    for (let i = 0; i < b.length; i += 2) {
      const [c, z] = le ? [b[i]!, b[i + 1]!] : [b[i + 1]!, b[i]!];
      if (z !== 0) return undefined;
      chars += String.fromCharCode(c);
    }
    return { unit: le ? 'le' : 'be', chars };
  }
  return { unit: '1', chars: b.toString('latin1') };
}

/**
 * Bytes of a needle's prefix digest: 8 bytes of salt and at most 47 of window fit one SHA-256 block (twice as
 * fast in perl as two). A prefix digest tells no more than the prefix itself could be guessed from; the rest
 * of the value stays behind the full digest.
 */
const MAX_PREFIX = 47;
const SALT_BYTES = 8;

/** The spec for one check: a fresh salt and nonce, two digests per needle the scanner can look for. */
export function scanSpec(needles: readonly LeakNeedle[], opts: { salt?: Buffer; nonce?: string; maxWindows?: number; chunkBytes?: number; maxHits?: number } = {}): ScanSpec {
  const salt = opts.salt ?? randomBytes(SALT_BYTES);
  const nonce = opts.nonce ?? randomBytes(16).toString('hex');
  if (salt.length !== SALT_BYTES || !/^[0-9a-f]{32}$/.test(nonce)) throw new Error('a scan needs an 8-byte salt and a 16-byte hex nonce');
  const lines = ['fiab-leakscan-spec 1', `nonce ${nonce}`, `salt ${salt.toString('hex')}`];
  lines.push(`chunk ${opts.chunkBytes ?? REMOTE_SCAN_LIMITS.chunkBytes}`, `maxwindows ${opts.maxWindows ?? REMOTE_SCAN_LIMITS.maxWindows}`, `maxhits ${opts.maxHits ?? REMOTE_SCAN_LIMITS.maxHitsPerNeedle}`);
  const byId: LeakNeedle[] = [];
  const uncovered: LeakNeedle[] = [];
  const shaped: Array<{ n: LeakNeedle; cls: string; unit: string; group: string }> = [];
  for (const n of needles) {
    const s = shape(n);
    const cls = s && CLASSES.find(([, re]) => re.test(s.chars))?.[0];
    if (!s || !cls || n.bytes.length < 4) uncovered.push(n);
    else shaped.push({ n, cls, unit: s.unit, group: `${cls}.${s.unit === '1' ? '1' : 'w'}` });
  }
  // One prefix length per group (class and width), as the scanner hashes one window per start.
  const prefix = new Map<string, number>();
  for (const { n, group } of shaped) prefix.set(group, Math.min(prefix.get(group) ?? MAX_PREFIX, n.bytes.length));
  const sha = (b: Buffer) => createHash('sha256').update(salt).update(b).digest('hex');
  for (const { n, cls, unit, group } of shaped) {
    const m = prefix.get(group)!;
    lines.push(`needle ${byId.length} ${cls} ${unit} ${n.bytes.length} ${m} ${sha(n.bytes.subarray(0, m))} ${sha(n.bytes)}`);
    byId.push(n);
  }
  lines.push('end', '');
  return { text: lines.join('\n'), nonce, byId, uncovered };
}

export type RemoteLabel = 'memory' | 'disk' | 'serial';

/**
 * Reads the scanner's answer. Anything but exactly the expected shape is an error
 * (the host is trusted less than this machine): a malformed answer never passes.
 */
export function parseScanAnswer(text: string, spec: Pick<ScanSpec, 'nonce' | 'byId'>, labels: readonly RemoteLabel[], maxHits = REMOTE_SCAN_LIMITS.maxHitsPerNeedle): Map<RemoteLabel, SourceScan> {
  const bad = (why: string) => new FactoryError('RemoteCommandFailed', `the sandbox host's leak scan answered something malformed (${why}): not taken as a pass`);
  if (text.length > REMOTE_SCAN_LIMITS.maxChars) throw bad('too long');
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length > REMOTE_SCAN_LIMITS.maxLines) throw bad('too many lines');
  if (lines[0] !== `fiab-leakscan 1 ${spec.nonce}`) throw bad('no header for this check');
  if (lines.at(-1) !== `end ${spec.nonce}`) throw bad('no end for this check');
  const out = new Map<RemoteLabel, SourceScan & { listed: Map<number, number>; counted: Set<number> }>();
  let windows = false;
  const label = (l: string): RemoteLabel => {
    if (!(labels as readonly string[]).includes(l)) throw bad(`unknown source ${JSON.stringify(l.slice(0, 20))}`);
    return l as RemoteLabel;
  };
  const num = (s: string) => {
    const n = Number(s);
    if (!/^(0|[1-9][0-9]{0,15})$/.test(s) || !Number.isSafeInteger(n)) throw bad('a number out of range');
    return n;
  };
  const needle = (s: string) => {
    const id = num(s);
    const n = spec.byId[id];
    if (!n) throw bad(`needle ${id} was not asked for`);
    return { id, n };
  };
  const source = (l: string) => {
    const s = out.get(label(l));
    if (!s) throw bad('a hit before its source');
    return s;
  };
  for (const line of lines.slice(1, -1)) {
    let m: RegExpExecArray | null;
    if ((m = /^source ([a-z-]+) bytes ([0-9]+) runs ([0-9]+) (ok|capped)$/.exec(line))) {
      const l = label(m[1]!);
      if (out.has(l)) throw bad(`source ${l} twice`);
      const capped = m[4] === 'capped';
      out.set(l, {
        bytes: num(m[2]!),
        hits: [],
        listed: new Map(),
        counted: new Set(),
        ...(capped ? { error: `the host stopped hashing after ${REMOTE_SCAN_LIMITS.maxWindows} candidate windows (cap): the rest was not looked at` } : {}),
      });
    } else if ((m = /^source ([a-z-]+) (missing|unreadable)$/.exec(line))) {
      const l = label(m[1]!);
      if (out.has(l)) throw bad(`source ${l} twice`);
      out.set(l, { bytes: 0, hits: [], listed: new Map(), counted: new Set(), ...(m[2] === 'missing' && l === 'serial' ? { note: 'no serial log' } : { error: `the ${l} file on the host is ${m[2]}` }) });
    } else if ((m = /^hit ([a-z-]+) ([0-9]+) ([0-9]+)$/.exec(line))) {
      const s = source(m[1]!);
      const { id, n } = needle(m[2]!);
      const seen = (s.listed.get(id) ?? 0) + 1;
      if (seen > maxHits || s.counted.has(id)) throw bad('more hits than asked for');
      s.listed.set(id, seen);
      s.hits.push({ credentialId: n.credentialId, encoding: n.encoding, offset: num(m[3]!) });
    } else if ((m = /^count ([a-z-]+) ([0-9]+) ([0-9]+)$/.exec(line))) {
      const s = source(m[1]!);
      const { id } = needle(m[2]!);
      const count = num(m[3]!);
      if (s.counted.has(id) || count < 1 || count < (s.listed.get(id) ?? 0) || (s.listed.get(id) ?? 0) < Math.min(count, maxHits)) throw bad('a count that does not match its hits');
      s.counted.add(id);
    } else if ((m = /^windows ([0-9]+)$/.exec(line)) && !windows) {
      num(m[1]!);
      windows = true;
    } else {
      throw bad(`unexpected line ${JSON.stringify(line.replace(/[^\x20-\x7e]/g, '?').slice(0, 60))}`);
    }
  }
  for (const l of labels) if (!out.has(l)) throw bad(`no answer for ${l}`);
  for (const s of out.values()) for (const id of s.listed.keys()) if (!s.counted.has(id)) throw bad('hits without a count');
  if (!windows) throw bad('no window count');
  const result = new Map<RemoteLabel, SourceScan>();
  for (const [l, { listed: _l, counted: _c, ...scan }] of out) result.set(l, scan);
  return result;
}

/** Where the scan looks on the host: the sandbox's own folder there. */
export interface RemoteLeakTarget {
  host: SshHost;
  /** The sandbox's folder on the host (overlay.qcow2, serial.log). */
  dir: string;
  domain: string;
}

const NOT_COVERED = 'looked for on the sandbox host from salted digests: plain, hex, base64 and UTF-16 forms; escaped and compressed forms not looked for there';

/**
 * Dumps the guest's memory into the sandbox's folder on the host (virsh dump --memory-only, ELF), scans it, the
 * overlay and the serial log there with the uploaded scanner, deletes the dump, the scanner and its spec, and
 * returns what the host counted. Only the verdict's numbers cross the link.
 */
export async function remoteLeakScan(target: RemoteLeakTarget, needles: readonly LeakNeedle[], opts: { timeoutMs?: number; maxWindows?: number } = {}): Promise<Awaited<ReturnType<RemoteLeakSource['scan']>>> {
  const { host, domain } = target;
  const dir = checkHostPath('sandbox folder', target.dir);
  if (!DOMAIN_NAME.test(domain)) throw new Error(`bad domain name ${JSON.stringify(domain)}`);
  const spec = scanSpec(needles, opts.maxWindows !== undefined ? { maxWindows: opts.maxWindows } : {});
  const tag = spec.nonce.slice(0, 12);
  const script = `${dir}/leakscan-${tag}.pl`;
  const specFile = `${dir}/leakscan-${tag}.spec`;
  const dump = `${dir}/memory-${tag}.elf`;
  const results: Awaited<ReturnType<RemoteLeakSource['scan']>> = [];
  const timeoutMs = opts.timeoutMs ?? 30 * 60_000;
  try {
    await host.writeFile(script, perlFile('remote-leak-scan.pl'), 0o500);
    await host.writeFile(specFile, spec.text, 0o600);
    let memoryError: string | undefined;
    const dumped = await host.run(['virsh', '-q', '-c', 'qemu:///system', 'dump', '--memory-only', '--format', 'elf', domain, dump], { timeoutMs });
    if (dumped.code !== 0) memoryError = `memory dump on the host failed: ${dumped.stderr.replace(/[^\x20-\x7e]/g, '?').trim().slice(0, 300)}`;
    const labels: RemoteLabel[] = [...(memoryError ? [] : (['memory'] as const)), 'disk', 'serial'];
    const args = labels.map((l) => `${l}=${l === 'memory' ? dump : l === 'disk' ? `${dir}/overlay.qcow2` : `${dir}/serial.log`}`);
    const r = await host.run(['perl', script, specFile, ...args], { timeoutMs });
    if (r.code === 3 || /Digest\/SHA|Digest::SHA/.test(r.stderr)) {
      throw new FactoryError('RemoteHostSetup', `perl's Digest::SHA is missing on sandbox host ${host.target.name}: apt-get install perl`);
    }
    if (r.code === 127 || /perl: (command )?not found/.test(r.stderr)) throw new FactoryError('RemoteHostSetup', `perl is missing on sandbox host ${host.target.name}: apt-get install perl`);
    if (r.code !== 0) throw new FactoryError('RemoteCommandFailed', `the leak scan on sandbox host ${host.target.name} failed (exit ${r.code}): ${r.stderr.replace(/[^\x20-\x7e]/g, '?').trim().slice(0, 300)}`);
    const scans = parseScanAnswer(r.stdout, spec, labels);
    const uncovered = spec.uncovered.length
      ? `; not looked for on the host (characters outside its classes): ${[...new Set(spec.uncovered.map((n) => `${n.credentialId} ${n.encoding}`))].join(', ')}`
      : '';
    const name = host.target.name;
    if (memoryError) results.push({ source: 'memory', label: `guest memory (on ${name})`, scan: { bytes: 0, hits: [], error: memoryError } });
    for (const [l, scan] of scans) {
      const source = l === 'memory' ? 'memory' : l === 'disk' ? 'overlay' : 'serial-log';
      const label = `${l === 'memory' ? 'guest memory' : l === 'disk' ? 'disk overlay' : 'serial log'} (on ${name})`;
      const note = l === 'memory' ? `${NOT_COVERED}, nor values split across memory pages${uncovered}` : `${NOT_COVERED}${uncovered}`;
      results.push({ source, label, scan: { ...scan, note: scan.note ? `${scan.note}; ${note}` : note, ...(spec.uncovered.length && !scan.error ? { error: `some encodings could not be looked for on the host${uncovered}` } : {}) } });
    }
    return results;
  } finally {
    // The dump holds the guest's memory: it must not outlive the check. A dropped link leaves it in the
    // sandbox's folder, which the reap on the next connection deletes whole.
    await host.run(['rm', '-f', '--', dump, script, specFile]).catch(() => undefined);
  }
}
