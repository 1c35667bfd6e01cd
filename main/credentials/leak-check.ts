// Leak check: proves that no credential a sandbox's routes used ever reached
// the VM. Scans the disk overlay and a dump of guest memory for each value in
// the encodings it could plausibly take there (raw, UTF-16, hex, base64 at
// every alignment, the base64 of "user:token" a basic-auth header carries).
// Files are streamed in chunks with an overlap of (longest needle - 1) bytes so
// a value split across a chunk boundary is still found. Hits name the
// credential, the encoding and the offset — never the value.
import { open, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { LeakHit, LeakReport } from '../../common/credentials.js';
import type { SecretSource } from './keychain.js';
import { QmpClient } from '../vm/qmp-client.js';

export interface LeakNeedle {
  credentialId: string;
  encoding: string;
  bytes: Buffer;
}

/** Shorter fragments than this would match by chance in gigabytes of memory. */
const MIN_NEEDLE_BYTES = 12;

/** Base64 of `value` as it appears inside a longer base64 text, for each of the 3 alignments. */
function base64Fragments(value: Buffer, alphabet: 'base64' | 'base64url'): string[] {
  const out: string[] = [];
  for (let k = 0; k < 3; k++) {
    const padded = Buffer.concat([Buffer.alloc(k), value]);
    const enc = padded.toString(alphabet);
    const drop = [0, 2, 3][k]!; // leading characters that depend on the unknown bytes before
    const stable = 4 * Math.floor(padded.length / 3); // trailing characters depend on the bytes after
    out.push(enc.slice(drop, stable));
  }
  return out;
}

export function needlesFor(credentialId: string, value: string, opts: { basicUsernames?: string[] } = {}): LeakNeedle[] {
  const raw = Buffer.from(value, 'utf8');
  const candidates: Array<[string, Buffer]> = [
    ['raw', raw],
    ['utf16le', Buffer.from(value, 'utf16le')],
    ['hex', Buffer.from(raw.toString('hex'), 'latin1')],
    ['url', Buffer.from(encodeURIComponent(value), 'utf8')],
  ];
  base64Fragments(raw, 'base64').forEach((f, i) => candidates.push([`base64@${i}`, Buffer.from(f, 'latin1')]));
  base64Fragments(raw, 'base64url').forEach((f, i) => candidates.push([`base64url@${i}`, Buffer.from(f, 'latin1')]));
  for (const user of opts.basicUsernames ?? []) {
    candidates.push([`basic-auth(${user})`, Buffer.from(Buffer.from(`${user}:${value}`).toString('base64'), 'latin1')]);
  }
  const seen = new Set<string>();
  const needles: LeakNeedle[] = [];
  for (const [encoding, bytes] of candidates) {
    if (bytes.length < MIN_NEEDLE_BYTES) continue;
    const key = bytes.toString('latin1');
    if (seen.has(key)) continue;
    seen.add(key);
    needles.push({ credentialId, encoding, bytes });
  }
  return needles;
}

export interface ScanResult {
  bytes: number;
  hits: Array<Omit<LeakHit, 'source'>>;
}

/** Streams a file once and reports every needle occurrence (capped per needle). */
export async function scanFile(file: string, needles: LeakNeedle[], opts: { chunkBytes?: number; maxHitsPerNeedle?: number } = {}): Promise<ScanResult> {
  const chunkBytes = opts.chunkBytes ?? 16 * 1024 * 1024;
  const maxHits = opts.maxHitsPerNeedle ?? 20;
  const overlap = Math.max(0, ...needles.map((n) => n.bytes.length)) - 1;
  const hits: ScanResult['hits'] = [];
  const counts = new Map<LeakNeedle, number>();
  const fh = await open(file, 'r');
  let total = 0;
  try {
    const buf = Buffer.alloc(chunkBytes + Math.max(overlap, 0));
    let carry = 0; // bytes kept from the previous chunk at the start of buf
    let base = 0; // file offset of buf[0]
    for (;;) {
      const { bytesRead } = await fh.read(buf, carry, chunkBytes, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      const filled = carry + bytesRead;
      const view = buf.subarray(0, filled);
      for (const n of needles) {
        let from = 0;
        for (;;) {
          const at = view.indexOf(n.bytes, from);
          if (at < 0) break;
          // A match lying entirely in the carried-over bytes was reported with the previous chunk.
          if (at + n.bytes.length > carry) {
            const c = (counts.get(n) ?? 0) + 1;
            counts.set(n, c);
            if (c <= maxHits) hits.push({ credentialId: n.credentialId, encoding: n.encoding, offset: base + at });
          }
          from = at + 1;
        }
      }
      const keep = Math.min(overlap, filled);
      buf.copy(buf, 0, filled - keep, filled);
      base += filled - keep;
      carry = keep;
    }
  } finally {
    await fh.close();
  }
  return { bytes: total, hits };
}

/** Anything that runs a QMP command: the VM's own client (a QMP socket takes one client at a time). */
export interface QmpExecutor {
  execute(command: string, args?: Record<string, unknown>): Promise<unknown>;
}

/** Dumps the guest's memory to a file through QMP (`dump-guest-memory`, paging off: raw RAM as ELF). */
export async function dumpGuestMemoryWith(qmp: QmpExecutor, outFile: string, opts: { timeoutMs?: number } = {}): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      qmp.execute('dump-guest-memory', { paging: false, protocol: `file:${outFile}` }),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('dump-guest-memory did not finish in time')), opts.timeoutMs ?? 300_000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The same over a QMP socket nobody else holds (a fresh connection). */
export async function dumpGuestMemory(qmpSocket: string, outFile: string, opts: { timeoutMs?: number } = {}): Promise<void> {
  const qmp = await QmpClient.connect(qmpSocket, { timeoutMs: 5000 });
  try {
    await dumpGuestMemoryWith(qmp, outFile, opts);
  } finally {
    qmp.close();
  }
}

export interface LeakCheckSources {
  /** The sandbox's qcow2 overlay (guest writes land here). */
  overlayPath?: string;
  /** Writes a guest memory dump to the given file (e.g. dumpGuestMemory with the VM's QMP socket). */
  dumpMemory?: (file: string) => Promise<void>;
  /** Folder for the temporary memory dump (the sandbox folder); deleted after the scan. */
  workDir: string;
  /** Extra files to scan (tests, exported bundles). */
  files?: string[];
}

export class LeakChecker {
  constructor(private readonly deps: { secrets: SecretSource }) {}

  async check(opts: {
    sandboxId: string;
    credentials: Array<{ id: string; basicUsernames?: string[] }>;
    sources: LeakCheckSources;
  }): Promise<LeakReport> {
    const started = Date.now();
    const needles: LeakNeedle[] = [];
    const scanned: LeakReport['scanned'] = [];
    let incomplete = false;
    for (const c of opts.credentials) {
      try {
        needles.push(...needlesFor(c.id, await this.deps.secrets.reveal(c.id), { basicUsernames: c.basicUsernames }));
      } catch (err) {
        incomplete = true;
        scanned.push({ source: `credential ${c.id}`, bytes: 0, error: `cannot read the value to look for: ${(err as Error).message}` });
      }
    }
    const hits: LeakHit[] = [];
    const scan = async (source: LeakHit['source'], file: string, label: string) => {
      try {
        const r = await scanFile(file, needles);
        scanned.push({ source: label, bytes: r.bytes });
        hits.push(...r.hits.map((h) => ({ ...h, source })));
      } catch (err) {
        incomplete = true;
        scanned.push({ source: label, bytes: 0, error: (err as Error).message });
      }
    };
    if (needles.length) {
      if (opts.sources.overlayPath) await scan('overlay', opts.sources.overlayPath, 'disk overlay');
      if (opts.sources.dumpMemory) {
        const dumpFile = path.join(opts.sources.workDir, `memory-${Date.now()}.dump`);
        try {
          await opts.sources.dumpMemory(dumpFile);
          await stat(dumpFile);
          await scan('memory', dumpFile, 'guest memory');
        } catch (err) {
          incomplete = true;
          scanned.push({ source: 'guest memory', bytes: 0, error: `memory dump failed: ${(err as Error).message}` });
        } finally {
          await rm(dumpFile, { force: true });
        }
      }
      for (const f of opts.sources.files ?? []) await scan('file', f, path.basename(f));
    }
    if (!opts.sources.overlayPath && !opts.sources.dumpMemory && !(opts.sources.files ?? []).length) incomplete = true;
    return {
      sandboxId: opts.sandboxId,
      at: new Date(started).toISOString(),
      verdict: hits.length ? 'leak' : incomplete ? 'incomplete' : 'clean',
      scanned,
      credentialIds: opts.credentials.map((c) => c.id),
      hits,
      durationMs: Date.now() - started,
    };
  }
}
