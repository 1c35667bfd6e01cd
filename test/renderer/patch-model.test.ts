// How the review cuts a patch into rows and finds each file's place in it,
// with the names and lines a sandbox could craft.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, symlinkSync, chmodSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildPatchModel, decodeGitBytes, patchRow, ROW_CHARS, segments, unquoteGitPath } from '../../renderer/components/review/patch-model.js';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' });
}

describe('patch model', () => {
  it("finds every file's header in a real git patch, whatever its name", () => {
    const repo = mkdtempSync(path.join(os.tmpdir(), 'patch-model-'));
    try {
      git(repo, 'init', '-q', '-b', 'main');
      writeFileSync(path.join(repo, 'old name.txt'), 'a\nb\nc\nd\ne\n');
      writeFileSync(path.join(repo, 'run.sh'), 'echo hi\n');
      writeFileSync(path.join(repo, 'gone.txt'), 'bye\n');
      git(repo, 'add', '-A');
      git(repo, 'commit', '-qm', 'base');
      const names = ['invoice\u202etxt.exe', 'caf\u00e9 menu.md', 'tab\there', 'trailing ', 'quote"d', 'back\\slash', 'a b/c d.txt'];
      for (const n of names) {
        if (n.includes('/')) execFileSync('mkdir', ['-p', path.join(repo, path.dirname(n))]);
        writeFileSync(path.join(repo, n), `${n}\n`);
      }
      git(repo, 'mv', 'old name.txt', 'new name.txt');
      chmodSync(path.join(repo, 'run.sh'), 0o755);
      git(repo, 'rm', '-q', 'gone.txt');
      symlinkSync('../../etc/passwd', path.join(repo, 'link'));
      writeFileSync(path.join(repo, 'bin.dat'), Buffer.from([0x7f, 0x45, 0, 1, 2]));
      writeFileSync(Buffer.concat([Buffer.from(repo + '/bad'), Buffer.from([0xff]), Buffer.from('name')]), 'x\n'); // not UTF-8
      git(repo, 'add', '-A');
      git(repo, 'commit', '-qm', 'change');
      const patch = git(repo, 'diff', '-M', '--no-color', 'HEAD~1', 'HEAD');
      const raw = execFileSync('git', ['diff', '-M', '--name-only', '-z', 'HEAD~1', 'HEAD'], { cwd: repo });
      const changed: string[] = [];
      for (let at = 0; at < raw.length; ) {
        const end = raw.indexOf(0, at);
        changed.push(decodeGitBytes([...raw.subarray(at, end)]));
        at = end + 1;
      }
      const model = buildPatchModel(patch);
      expect([...model.fileRows.keys()].sort()).toEqual([...changed].sort());
      for (const [, row] of model.fileRows) expect(patchRow(model, row).text.startsWith('diff --git ')).toBe(true);
      expect(changed).toEqual(expect.arrayContaining([...names, 'new name.txt', 'run.sh', 'gone.txt', 'link', 'bin.dat', 'bad\udcffname']));
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it("numbers each line as git's own blame would: old and new, from a real patch's hunks", () => {
    const repo = mkdtempSync(path.join(os.tmpdir(), 'patch-lines-'));
    try {
      git(repo, 'init', '-q', '-b', 'main');
      // Lines that look like file headers once prefixed ("--- x", "+++ y") must still count as content.
      const before = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`);
      before[9] = '-- x';
      writeFileSync(path.join(repo, 'f.txt'), before.join('\n') + '\n');
      writeFileSync(path.join(repo, 'end.txt'), 'no newline at the end');
      git(repo, 'add', '-A');
      git(repo, 'commit', '-qm', 'base');
      const after = [...before];
      after.splice(9, 1, '++ y', 'added'); // line 10 replaced by two
      after[24] = 'changed 25'; // was "line 24" (one line later now)
      writeFileSync(path.join(repo, 'f.txt'), after.join('\n') + '\n');
      writeFileSync(path.join(repo, 'end.txt'), 'still none');
      writeFileSync(path.join(repo, 'new.txt'), 'a\nb\n');
      git(repo, 'add', '-A');
      const patch = git(repo, 'diff', '--cached', '--no-color');
      const model = buildPatchModel(patch);
      const numbered = Array.from({ length: model.lineCount }, (_, i) => ({ text: patchRow(model, i).text, old: model.oldLine[i], new: model.newLine[i] }));
      const find = (text: string) => numbered.filter((r) => r.text === text).map((r) => [r.old, r.new]);
      expect(find('--- x')).toEqual([[10, 0]]);
      expect(find('+++ y')).toEqual([[0, 10]]);
      expect(find('+added')).toEqual([[0, 11]]);
      expect(find(' line 9')).toEqual([[9, 9]]);
      expect(find(' line 11')).toEqual([[11, 12]]);
      expect(find('-line 24')).toEqual([[24, 0]]);
      expect(find('+changed 25')).toEqual([[0, 25]]);
      expect(find(' line 27')).toEqual([[27, 28]]);
      expect(find('-no newline at the end')).toEqual([[1, 0]]);
      expect(find('+still none')).toEqual([[0, 1]]);
      expect(find('+b')).toEqual([[0, 2]]);
      // Headers, hunk lines and git's "\ No newline" notes get no number.
      for (const r of numbered.filter((r) => /^(diff |--- a|\+\+\+ b|@@|\\ |index |new file)/.test(r.text))) expect([r.text, r.old, r.new]).toEqual([r.text, 0, 0]);
      expect(model.maxLineNo).toBeGreaterThanOrEqual(Math.max(...model.oldLine, ...model.newLine));
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('cuts a long line into continuation rows and never splits a surrogate pair', () => {
    const long = '+' + 'x'.repeat(ROW_CHARS - 2) + '😀' + 'y'.repeat(ROW_CHARS + 5);
    const model = buildPatchModel(`diff --git a/f b/f\n${long}\n+short\n`);
    expect(model.rowCount).toBe(1 + 3 + 1);
    const rows = Array.from({ length: model.rowCount }, (_, i) => patchRow(model, i));
    expect(rows.map((r) => r.continued)).toEqual([false, false, true, true, false]);
    expect(rows.slice(1, 4).map((r) => r.text).join('')).toBe(long);
    expect(rows[1]!.text.length).toBe(ROW_CHARS - 1); // the emoji moved whole to the next row
    expect(rows[2]!.text.startsWith('😀')).toBe(true);
    expect(rows.every((r) => r.text.length <= ROW_CHARS)).toBe(true);
    expect(model.maxCols).toBe(ROW_CHARS);
  });

  it('reads lines with or without a final newline, empty ones included', () => {
    const rows = (p: string) => {
      const m = buildPatchModel(p);
      return Array.from({ length: m.rowCount }, (_, i) => patchRow(m, i).text);
    };
    expect(rows('')).toEqual([]);
    expect(rows('+a')).toEqual(['+a']);
    expect(rows('+a\n\n-b\r\n')).toEqual(['+a', '', '-b\r']);
    expect(rows('\n')).toEqual(['']);
  });

  it('unquotes git C-quoted paths, and refuses malformed quoting', () => {
    expect(unquoteGitPath('"a/caf\\303\\251" rest')).toEqual({ value: 'a/café', end: 15 });
    expect(unquoteGitPath('"a/x\\342\\200\\256y"')?.value).toBe('a/x\u202ey');
    expect(unquoteGitPath('"a/t\\tb\\"q\\\\"')?.value).toBe('a/t\tb"q\\');
    // Bytes that are not UTF-8 stay distinct (U+DC80+byte, as the host names them), never U+FFFD.
    expect(unquoteGitPath('"a\\377"')?.value).toBe('a\udcff');
    expect(unquoteGitPath('"a\\376"')?.value).toBe('a\udcfe');
    expect(unquoteGitPath('"\\355\\240\\200x"')?.value).toBe('\udced\udca0\udc80x'); // an encoded surrogate is not UTF-8
    expect(unquoteGitPath('"unterminated')).toBeUndefined();
    expect(unquoteGitPath('"bad \\q escape"')).toBeUndefined();
  });

  it('splits a line into plain runs and escapes for hidden and control characters', () => {
    expect(segments('plain')).toEqual([{ text: 'plain', escape: false }]);
    expect(segments('a\u202eb\x00')).toEqual([
      { text: 'a', escape: false },
      { text: '\\u{202e}', escape: true },
      { text: 'b', escape: false },
      { text: '\\x00', escape: true },
    ]);
    expect(segments('tab\tstays')).toEqual([{ text: 'tab\tstays', escape: false }]);
  });
});
