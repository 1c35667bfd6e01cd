// Hand-made git packs and bundles, the way a hostile sandbox could write them:
// objects and deltas encoded byte by byte with Node's zlib, so a test can
// declare sizes that git itself would never produce (a delta bomb: a small
// base blob and a delta made of copy instructions whose result is huge).
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';

export type PackObjectType = 'commit' | 'tree' | 'blob' | 'tag';
const TYPE_CODE: Record<PackObjectType | 'ofs-delta' | 'ref-delta', number> = {
  commit: 1, tree: 2, blob: 3, tag: 4, 'ofs-delta': 6, 'ref-delta': 7,
};

export type PackEntry =
  | { kind: 'full'; type: PackObjectType; data: Buffer }
  /** A delta on an earlier entry of the same pack, by its index. */
  | { kind: 'ofs-delta'; baseIndex: number; delta: Buffer }
  | { kind: 'ref-delta'; baseId: string; delta: Buffer }
  /** Bytes written as they are: a header and zlib stream of the test's own making. */
  | { kind: 'raw'; bytes: Buffer };

/** Git's object id (SHA-1) of `type size\0data`. */
export function objectId(type: PackObjectType, data: Buffer): string {
  return createHash('sha1').update(`${type} ${data.length}\0`).update(data).digest('hex');
}

const zeroIds = new Map<number, string>();

/** Object id of a blob of `size` zero bytes, hashed in chunks (never held whole). */
export function zeroBlobId(size: number): string {
  const known = zeroIds.get(size);
  if (known) return known;
  const hash = createHash('sha1').update(`blob ${size}\0`);
  const chunk = Buffer.alloc(Math.min(size, 16 * 1024 * 1024));
  for (let left = size; left > 0; left -= chunk.length) hash.update(left >= chunk.length ? chunk : chunk.subarray(0, left));
  const id = hash.digest('hex');
  zeroIds.set(size, id);
  return id;
}

/** Type and size in git's entry header: 3 type bits, then 4 + 7n size bits. */
export function entryHeader(typeCode: number, size: number): Buffer {
  const out: number[] = [];
  let c = (typeCode << 4) | (size % 16);
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    out.push(c | 0x80);
    c = rest % 128;
    rest = Math.floor(rest / 128);
  }
  out.push(c);
  return Buffer.from(out);
}

/** Little-endian base-128 varint, as in a delta's size header. */
export function deltaVarint(n: number): Buffer {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
}

/** The offset encoding of an ofs-delta's base distance (big-endian, with git's +1 per continuation). */
function ofsDistance(d: number): Buffer {
  const out = [d & 0x7f];
  while ((d >>= 7) > 0) {
    d -= 1;
    out.unshift(0x80 | (d & 0x7f));
  }
  return Buffer.from(out);
}

/**
 * A delta whose result is `resultSize` bytes: the whole base copied again and
 * again. Each copy instruction is one byte (0x80 with no offset or size bytes
 * means "copy 64 KiB from offset 0"), so the base must be exactly 64 KiB.
 */
export function copyBombDelta(resultSize: number): Buffer {
  const base = 0x10000;
  if (resultSize % base !== 0) throw new Error('bomb size must be a multiple of 64 KiB');
  return Buffer.concat([deltaVarint(base), deltaVarint(resultSize), Buffer.alloc(resultSize / base, 0x80)]);
}

/** A version 2 pack holding `entries`, with its SHA-1 trailer. */
export function buildPack(entries: PackEntry[]): Buffer {
  const head = Buffer.alloc(12);
  head.write('PACK', 0, 'latin1');
  head.writeUInt32BE(2, 4);
  head.writeUInt32BE(entries.length, 8);
  const parts: Buffer[] = [head];
  const offsets: number[] = [];
  let offset = 12;
  for (const e of entries) {
    offsets.push(offset);
    let bytes: Buffer;
    if (e.kind === 'raw') bytes = e.bytes;
    else if (e.kind === 'full') bytes = Buffer.concat([entryHeader(TYPE_CODE[e.type], e.data.length), deflateSync(e.data)]);
    else if (e.kind === 'ofs-delta') {
      const dist = offset - offsets[e.baseIndex]!;
      bytes = Buffer.concat([entryHeader(TYPE_CODE['ofs-delta'], e.delta.length), ofsDistance(dist), deflateSync(e.delta)]);
    } else {
      bytes = Buffer.concat([entryHeader(TYPE_CODE['ref-delta'], e.delta.length), Buffer.from(e.baseId, 'hex'), deflateSync(e.delta)]);
    }
    parts.push(bytes);
    offset += bytes.length;
  }
  const body = Buffer.concat(parts);
  return Buffer.concat([body, createHash('sha1').update(body).digest()]);
}

/** A v2 bundle: one prerequisite (the base), one ref, then the pack. */
export function buildBundle(opts: { base: string; head: string; ref: string; pack: Buffer }): Buffer {
  return Buffer.concat([Buffer.from(`# v2 git bundle\n-${opts.base} base\n${opts.head} ${opts.ref}\n\n`), opts.pack]);
}

/** A tree object from entries sorted the way git sorts plain files. */
export function treeObject(files: Array<{ name: string; id: string; mode?: string }>): Buffer {
  const sorted = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return Buffer.concat(sorted.map((f) => Buffer.concat([Buffer.from(`${f.mode ?? '100644'} ${f.name}\0`), Buffer.from(f.id, 'hex')])));
}

export function commitObject(tree: string, parent: string, message: string): Buffer {
  const who = 'Sandbox Agent <agent@sandbox.invalid> 1700000000 +0000';
  return Buffer.from(`tree ${tree}\nparent ${parent}\nauthor ${who}\ncommitter ${who}\n\n${message}\n`);
}

/**
 * A result bundle for branch `ref` on top of `base` whose only new file,
 * `name`, is a blob of `resultSize` zero bytes delivered as a delta on a
 * 64 KiB zero blob: a few hundred bytes that declare `resultSize`.
 */
export function deltaBombBundle(opts: { base: string; ref: string; resultSize: number; name?: string; bombId?: string }): { bundle: Buffer; head: string; bombId: string } {
  const baseBlob = Buffer.alloc(0x10000);
  const bombId = opts.bombId ?? zeroBlobId(opts.resultSize);
  const tree = treeObject([{ name: opts.name ?? 'bomb.bin', id: bombId }]);
  const treeId = objectId('tree', tree);
  const commit = commitObject(treeId, opts.base, 'an ordinary looking change');
  const head = objectId('commit', commit);
  const pack = buildPack([
    { kind: 'full', type: 'commit', data: commit },
    { kind: 'full', type: 'tree', data: tree },
    { kind: 'full', type: 'blob', data: baseBlob },
    { kind: 'ofs-delta', baseIndex: 2, delta: copyBombDelta(opts.resultSize) },
  ]);
  return { bundle: buildBundle({ base: opts.base, head, ref: opts.ref, pack }), head, bombId };
}

function adler32(data: Buffer): number {
  let a = 1;
  let b = 0;
  for (let i = 0; i < data.length; i++) {
    a = (a + data[i]!) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

/**
 * A valid zlib stream written with stored (uncompressed) blocks the way no
 * zlib would: `emptyBlocks` empty blocks first (5 bytes each, no output), then
 * the data in blocks of at most `blockSize` bytes. zlib (and so git) accepts it.
 */
export function storedZlib(data: Buffer, opts: { emptyBlocks?: number; blockSize?: number } = {}): Buffer {
  const parts: Buffer[] = [Buffer.from([0x78, 0x01])];
  for (let i = 0; i < (opts.emptyBlocks ?? 0); i++) parts.push(Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]));
  const block = Math.min(opts.blockSize ?? 65535, 65535);
  let at = 0;
  do {
    const len = Math.min(block, data.length - at);
    const final = at + len >= data.length;
    const hdr = Buffer.alloc(5);
    hdr[0] = final ? 1 : 0;
    hdr.writeUInt16LE(len, 1);
    hdr.writeUInt16LE(~len & 0xffff, 3);
    parts.push(hdr, data.subarray(at, at + len));
    at += len;
  } while (at < data.length);
  const sum = Buffer.alloc(4);
  sum.writeUInt32BE(adler32(data), 0);
  parts.push(sum);
  return Buffer.concat(parts);
}
