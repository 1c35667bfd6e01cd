// The pre-scan reads a returned pack before git does. Packs here are written
// the way a hostile sandbox could (test/support/pack-bomb.ts): sizes that lie,
// zlib streams no zlib would write, offsets into nowhere, junk after the end.
// Where the pack is valid, real git is asked too, so the scan is never
// stricter than git and counts what git counts.
import { afterEach, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { scanPack, type PackCaps } from '../../../main/pullback/pack-scan.js';
import { readBundleHeader } from '../../../main/pullback/quarantine.js';
import {
  buildPack, copyBombDelta, deltaVarint, entryHeader, objectId, storedZlib, type PackEntry,
} from '../../support/pack-bomb.js';
import { gitIn, makeRepo, tempDir } from '../../support/repo.js';

const MiB = 1024 * 1024;
const CAPS: PackCaps = { maxObjectBytes: 8 * MiB, maxTotalBytes: 20 * MiB, maxObjects: 100 };

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) fs.rmSync(dirs.pop()!, { recursive: true, force: true });
});

function packFile(pack: Buffer): string {
  const dir = tempDir('factory-pack-');
  dirs.push(dir);
  const file = path.join(dir, 'x.pack');
  fs.writeFileSync(file, pack);
  return file;
}

const scan = (pack: Buffer, caps: PackCaps = CAPS) => scanPack(packFile(pack), 0, 20, caps);

/** A blob entry whose zlib stream is `z` and whose header declares `size`. */
function rawBlob(size: number, z: Buffer): PackEntry {
  return { kind: 'raw', bytes: Buffer.concat([entryHeader(3, size), z]) };
}

/** What real git says about a pack: index it into a fresh repo and sum the object sizes. */
function gitCounts(pack: Buffer): { objects: number; total: number } {
  const repo = tempDir('factory-pack-git-');
  dirs.push(repo);
  gitIn(repo, ['init', '-q', '--bare']);
  gitIn(repo, ['index-pack', '--stdin', '--strict'], pack);
  const sizes = gitIn(repo, ['cat-file', '--batch-all-objects', '--batch-check=%(objectsize)']).trim().split('\n').map(Number);
  return { objects: sizes.length, total: sizes.reduce((a, b) => a + b, 0) };
}

describe('pack pre-scan', () => {
  it('counts what a real git bundle declares, deltas by the size they rebuild, as git does', async () => {
    const repo = await makeRepo({ files: { 'story.txt': Array.from({ length: 4000 }, (_, i) => `line ${i}\n`).join('') } });
    for (let round = 1; round <= 3; round++) {
      repo.write('story.txt', Array.from({ length: 4000 }, (_, i) => `line ${i}${i % 97 === round ? ' changed' : ''}\n`).join(''));
      repo.commit(`round ${round}`);
    }
    fs.writeFileSync(path.join(repo.dir, 'noise.bin'), crypto.randomBytes(3 * MiB)); // past the in-memory path: streamed
    repo.commit('noise');
    const bundle = path.join(repo.dir, '..', `${path.basename(repo.dir)}.bundle`);
    dirs.push(repo.dir, bundle);
    repo.git('bundle', 'create', '-q', bundle, 'main');
    const header = await readBundleHeader(bundle);
    const pack = fs.readFileSync(bundle).subarray(header.packOffset);
    const got = await scanPack(bundle, header.packOffset, 20, { ...CAPS, maxObjectBytes: 4 * MiB });
    expect(got).toMatchObject(Object.fromEntries(Object.entries(gitCounts(pack)).map(([k, v]) => [k === 'total' ? 'totalBytes' : k, v])));
    expect(got.largestBytes).toBe(3 * MiB);
    // The pack really holds deltas (else this test would prove nothing about them).
    const repoForIdx = tempDir('factory-pack-idx-');
    dirs.push(repoForIdx);
    fs.writeFileSync(path.join(repoForIdx, 'p.pack'), pack);
    gitIn(repoForIdx, ['index-pack', 'p.pack']);
    expect(gitIn(repoForIdx, ['verify-pack', '-v', 'p.idx'])).toMatch(/chain length = [1-9]/);
  });

  it('refuses a blob whose header declares more than the per-object cap, before inflating it', async () => {
    const err = await scan(buildPack([rawBlob(64 * MiB, deflateSync(Buffer.alloc(64 * MiB)))])).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'PullbackRejected' });
    expect((err as Error).message).toBe(
      'pack object 1 of 1 (a blob at pack offset 12) declares 67108864 bytes (64 MiB), over the cap of 8388608 bytes per object (8 MiB)',
    );
  });

  it('refuses a zlib bomb whose header lies small, without inflating past what it declares', async () => {
    const bomb = deflateSync(Buffer.alloc(64 * MiB)); // ~64 KiB that inflate to 64 MiB
    const started = Date.now();
    await expect(scan(buildPack([rawBlob(1000, bomb)]))).rejects.toThrow(/pack object 1 of 1 \(a blob at pack offset 12\) inflates to more than the 1000 bytes it declares/);
    await expect(scan(buildPack([rawBlob(2 * MiB, bomb)]))).rejects.toThrow(/inflates to more than the 2097152 bytes it declares/);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('refuses a delta bomb by the size its delta header declares, naming the delta and its base', async () => {
    const base = Buffer.alloc(0x10000);
    await expect(scan(buildPack([
      { kind: 'full', type: 'blob', data: base },
      { kind: 'ofs-delta', baseIndex: 0, delta: copyBombDelta(2048 * MiB) },
    ]))).rejects.toThrow(
      /^pack object 2 of 2 \(a blob, delta on pack object 1, at pack offset \d+\) declares 2147483648 bytes \(2 GiB\), over the cap of 8388608 bytes per object \(8 MiB\)$/,
    );
    const hostBlob = objectId('blob', base);
    await expect(scan(buildPack([{ kind: 'ref-delta', baseId: hostBlob, delta: copyBombDelta(256 * MiB) }]))).rejects.toThrow(
      `pack object 1 of 1 (a delta on object ${hostBlob}, at pack offset 12) declares 268435456 bytes (256 MiB)`,
    );
  });

  it('refuses objects that each fit but together pass the total cap', async () => {
    const six = { kind: 'full', type: 'blob', data: Buffer.alloc(6 * MiB) } as const;
    const four = { kind: 'full', type: 'blob', data: Buffer.alloc(4 * MiB, 1) } as const;
    await expect(scan(buildPack([six, four, six, six]))).rejects.toThrow(
      /^pack object 4 of 4 \(a blob at pack offset \d+\) brings what the bundle's objects declare to 23068672 bytes \(22 MiB\), over the cap of 20971520 bytes in total \(20 MiB\)$/,
    );
    // Deltas count by what they rebuild: many small deltas of a 4 MiB result add up too.
    const deltas: PackEntry[] = [{ kind: 'full', type: 'blob', data: Buffer.alloc(0x10000) }];
    for (let i = 0; i < 6; i++) deltas.push({ kind: 'ofs-delta', baseIndex: 0, delta: copyBombDelta(4 * MiB) });
    await expect(scan(buildPack(deltas))).rejects.toThrow(/pack object 6 of 7 \(a blob, delta on pack object 1.* over the cap of 20971520 bytes in total/);
  });

  it('refuses more objects than the cap, from the pack header alone', async () => {
    const head = Buffer.from('PACK\0\0\0\x02\xff\xff\xff\xff', 'latin1');
    await expect(scan(head)).rejects.toThrow("the bundle's pack declares 4294967295 objects, over the cap of 100 objects");
  });

  it('refuses broken framing with the integrity-check wording', async () => {
    const blob = (s: string): PackEntry => ({ kind: 'full', type: 'blob', data: Buffer.from(s) });
    const ok = buildPack([blob('a'), blob('b')]);
    // Claims 5 objects, holds 2, no checksum.
    const short = Buffer.from(ok.subarray(0, ok.length - 20));
    short.writeUInt32BE(5, 8);
    await expect(scan(short)).rejects.toThrow(/integrity check: the bundle's pack ends after 2 of the 5 objects it declares/);
    await expect(scan(Buffer.concat([ok, Buffer.from('#!/bin/sh\n')]))).rejects.toThrow(/integrity check: the bundle carries 10 bytes after its pack/);
    await expect(scan(ok.subarray(0, ok.length - 5))).rejects.toThrow(/integrity check: the bundle's pack is cut off: its 20-byte checksum is missing/);
    await expect(scan(Buffer.from('PACX\0\0\0\x02\0\0\0\0', 'latin1'))).rejects.toThrow(/integrity check: the bundle holds no packfile/);
    // An ofs-delta whose base offset is not where an object starts.
    const delta = Buffer.concat([deltaVarint(1), deltaVarint(1), Buffer.from([0x01, 0x41])]);
    const bogus = buildPack([blob('a'), { kind: 'raw', bytes: Buffer.concat([entryHeader(6, delta.length), Buffer.from([0x03]), deflateSync(delta)]) }]);
    await expect(scan(bogus)).rejects.toThrow(/pack object 2 of 2 \(at pack offset \d+\) is a delta on an offset where no object starts/);
    // A delta that claims a base of another size than its base has.
    const wrongBase = Buffer.concat([deltaVarint(7), deltaVarint(1), Buffer.from([0x01, 0x41])]);
    await expect(scan(buildPack([blob('a'), { kind: 'ofs-delta', baseIndex: 0, delta: wrongBase }]))).rejects.toThrow(/is a delta for a base of 7 bytes, but its base has 1/);
    // A zlib stream cut short, and one with a bad checksum.
    const z = deflateSync(Buffer.from('hello'));
    await expect(scan(buildPack([rawBlob(5, z.subarray(0, 4)), blob('x')]))).rejects.toThrow(/integrity check: pack object 1 of 2 .*(corrupt|declares)/);
    const badSum = Buffer.from(z);
    badSum[badSum.length - 1]! ^= 1;
    await expect(scan(buildPack([rawBlob(5, badSum)]))).rejects.toThrow(/integrity check: pack object 1 of 1 .* has corrupt compressed data/);
    // Type 5 is reserved.
    await expect(scan(buildPack([{ kind: 'raw', bytes: Buffer.concat([entryHeader(5, 1), deflateSync(Buffer.from('a'))]) }]))).rejects.toThrow(/invalid type 5/);
  });

  it('accepts zlib streams git accepts but no zlib writes, and finds where each ends', async () => {
    // 1,000 empty stored blocks before 10 bytes: far longer than any zlib output for them.
    const padded = rawBlob(10, storedZlib(Buffer.from('0123456789'), { emptyBlocks: 1000 }));
    // A 1.25 MiB object whose stream ends exactly on a read boundary of the streamed path, then another object.
    const exact = 1310720 - 6 - 20 * 5;
    const big = crypto.randomBytes(exact);
    const boundary = rawBlob(exact, storedZlib(big));
    expect(storedZlib(big).length).toBe(5 * 256 * 1024);
    const pack = buildPack([padded, boundary, { kind: 'full', type: 'blob', data: Buffer.from('after') }]);
    const got = await scan(pack);
    expect(got).toEqual({ objects: 3, totalBytes: 10 + exact + 5, largestBytes: exact });
    expect(gitCounts(pack)).toEqual({ objects: 3, total: 10 + exact + 5 });
  });
});
