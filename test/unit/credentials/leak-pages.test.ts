// A key a guest process holds in one buffer may sit on two physical pages far
// apart in a memory dump. The dump here is written the way QEMU writes one
// (dump-guest-memory, paging off: ELF64 little-endian, one PT_LOAD per RAM
// block, physical addresses in p_paddr); the real dump's headers are checked in
// test/integration/credentials-sandbox.test.ts.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { needlesFor } from '../../../main/credentials/leak-needles.js';
import { elfPageMap, PAGE_BYTES, pageEdges } from '../../../main/credentials/leak-pages.js';
import { scanFile } from '../../../main/credentials/leak-scan.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-pages-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const KEY = `sk-ant-api03-${randomBytes(24).toString('base64url')}`;
const needles = needlesFor('a', KEY);

/** An ELF core file with the given RAM blocks (physical address → bytes). Data starts off page alignment, like QEMU's notes do. */
function elfDump(blocks: Array<{ paddr: number; data: Buffer }>): string {
  const phoff = 64;
  const notes = Buffer.alloc(300, 0x4e); // stands for the PT_NOTE data QEMU writes first
  let offset = phoff + 56 * blocks.length + notes.length;
  const eh = Buffer.alloc(64);
  eh.writeUInt32BE(0x7f454c46, 0);
  eh[4] = 2; // 64-bit
  eh[5] = 1; // little-endian
  eh[6] = 1;
  eh.writeUInt16LE(4, 0x10); // ET_CORE
  eh.writeUInt16LE(62, 0x12); // x86-64
  eh.writeBigUInt64LE(BigInt(phoff), 0x20);
  eh.writeUInt16LE(64, 0x34);
  eh.writeUInt16LE(56, 0x36);
  eh.writeUInt16LE(blocks.length, 0x38);
  const phs = blocks.map((b) => {
    const ph = Buffer.alloc(56);
    ph.writeUInt32LE(1, 0); // PT_LOAD
    ph.writeBigUInt64LE(BigInt(offset), 8);
    ph.writeBigUInt64LE(BigInt(b.paddr), 24);
    ph.writeBigUInt64LE(BigInt(b.data.length), 32);
    ph.writeBigUInt64LE(BigInt(b.data.length), 40);
    offset += b.data.length;
    return ph;
  });
  const f = path.join(dir, `${randomBytes(4).toString('hex')}.dump`);
  writeFileSync(f, Buffer.concat([eh, ...phs, notes, ...blocks.map((b) => b.data)]));
  return f;
}

/** RAM of `pages` pages of noise, with `put` writing into it. */
function ram(pages: number, put: (ram: Buffer) => void = () => undefined): Buffer {
  const r = randomBytes(pages * PAGE_BYTES);
  put(r);
  return r;
}

describe('a key split across two guest pages', () => {
  it('reads the page edges of an ELF dump, and nothing from a file that is not one', async () => {
    const f = elfDump([{ paddr: 0, data: ram(3) }, { paddr: 0x100000, data: ram(2) }]);
    const edges = [...pageEdges((await elfPageMap(f))!)];
    const firstData = 64 + 2 * 56 + 300;
    expect(edges.map((b) => b.offset - firstData)).toEqual([0, 4096, 8192, 12288, 16384, 20480]);
    expect(edges[0]).toMatchObject({ start: true, end: false });
    // The end of the first block is the start of the second: both at once.
    expect(edges[3]).toMatchObject({ start: true, end: true });
    expect(edges[5]).toMatchObject({ start: false, end: true });
    const plain = path.join(dir, 'plain.bin');
    writeFileSync(plain, randomBytes(10_000));
    expect(await elfPageMap(plain)).toBeNull();
  });

  for (const k of [1, 3, 4, 13, 20, KEY.length - 4, KEY.length - 1]) {
    it(`finds it when the first ${k} bytes end one page and the rest starts a page far away`, async () => {
      // The noise next to each half must not happen to continue the key (1 in 256 for a one-byte half):
      // that would be a real contiguous copy, and the check rightly reports it as plain 'raw'.
      const f = elfDump([
        {
          paddr: 0,
          data: ram(8, (r) => {
            r.write(KEY.slice(0, k), 2 * PAGE_BYTES - k, 'latin1');
            r[2 * PAGE_BYTES] = KEY.charCodeAt(k) ^ 0xff;
          }),
        },
        {
          paddr: 0x200000,
          data: ram(4, (r) => {
            r.write(KEY.slice(k), PAGE_BYTES, 'latin1');
            r[PAGE_BYTES - 1] = KEY.charCodeAt(k - 1) ^ 0xff;
          }),
        },
      ]);
      // Also with small chunks, so that page edges fall on chunk boundaries.
      for (const chunkBytes of [16 * 1024 * 1024, 3000]) {
        const r = await scanFile(f, needles, { chunkBytes }, (await elfPageMap(f))!);
        expect(r.hits.map((h) => h.encoding), `chunks of ${chunkBytes}`).toEqual(['raw+page-split']);
        expect(r.hits[0]!.detail).toMatch(new RegExp(`^first ${k} bytes end a page`));
        expect(JSON.stringify(r)).not.toContain(KEY);
      }
    });
  }

  it('finds a split hex form too, and reports a key across physically adjacent pages once, as a plain hit', async () => {
    const hex = Buffer.from(KEY).toString('hex');
    const split = elfDump([{ paddr: 0, data: ram(6, (r) => {
      r.write(hex.slice(0, 40), PAGE_BYTES - 40, 'latin1');
      r.write(hex.slice(40), 4 * PAGE_BYTES, 'latin1');
    }) }]);
    expect((await scanFile(split, needles, {}, (await elfPageMap(split))!)).hits.map((h) => h.encoding)).toEqual(['hex+page-split']);
    const adjacent = elfDump([{ paddr: 0, data: ram(4, (r) => r.write(KEY, 2 * PAGE_BYTES - 10, 'latin1')) }]);
    const r = await scanFile(adjacent, needles, {}, (await elfPageMap(adjacent))!);
    expect(r.hits.map((h) => `${h.encoding}@${h.offset}`)).toEqual([`raw@${64 + 56 + 300 + 2 * PAGE_BYTES - 10}`]);
  });

  it('stays clean when only the public prefix ends a page, or the halves belong to different keys', async () => {
    const other = `sk-ant-api03-${randomBytes(24).toString('base64url')}`;
    const f = elfDump([{ paddr: 0, data: ram(16, (r) => {
      r.write('sk-ant-api03-', PAGE_BYTES - 13, 'latin1'); // every Anthropic key starts so: no evidence
      r.write(KEY.slice(0, 20), 3 * PAGE_BYTES - 20, 'latin1');
      r.write(other.slice(20), 9 * PAGE_BYTES, 'latin1');
      r.write(KEY.slice(25, 30), 12 * PAGE_BYTES, 'latin1'); // too short a half to count
    }) }]);
    const r = await scanFile(f, needles, {}, (await elfPageMap(f))!);
    expect(r.hits).toEqual([]);
  });
});
