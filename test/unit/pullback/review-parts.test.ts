// The review's parts on their own: names decoded from git's bytes, escapes,
// masking of the sandbox's credential values, the patch-section count, and the
// parser of added lines against hostile content.
import { describe, expect, it } from 'vitest';
import { escapeBytes, escapeName, isUnsafeName } from '../../../common/review-text.js';
import { parseAddedLines } from '../../../main/pullback/review/added-lines.js';
import { decodeGitName, encodeGitName, isArgvSafe } from '../../../main/pullback/review/git-names.js';
import { firstIncompleteFile } from '../../../main/pullback/review/listing.js';
import { maskValuesInBytes, maskValuesInText } from '../../../main/pullback/review/mask-values.js';
import { classifySubmoduleUrl } from '../../../main/pullback/review/submodules.js';
import { highEntropyAssignments } from '../../../main/pullback/review/secret-scan.js';
import { symlinkVerdict } from '../../../main/pullback/review/flags.js';

describe('git names', () => {
  it('decodes bytes that are not UTF-8 one to one, and back', () => {
    const names = [
      Buffer.from('plain.txt'),
      Buffer.from('caf\u00e9/\u{1F600}.md'),
      Buffer.from([0x61, 0xff]),
      Buffer.from([0x61, 0xfe]),
      Buffer.from([0x61, 0xc3]), // a cut sequence
      Buffer.from([0x61, 0xed, 0xa0, 0x80]), // an encoded surrogate is not UTF-8
      Buffer.from([0x61, 0xc0, 0xaf]), // overlong '/'
    ];
    const decoded = names.map(decodeGitName);
    expect(new Set(decoded).size).toBe(names.length);
    for (let i = 0; i < names.length; i++) expect(encodeGitName(decoded[i]!).equals(names[i]!)).toBe(true);
    expect(decoded.slice(2).map(escapeName)).toEqual(['a\\xff', 'a\\xfe', 'a\\xc3', 'a\\xed\\xa0\\x80', 'a\\xc0\\xaf']);
    expect(isArgvSafe(decoded[1]!)).toBe(true);
    expect(isArgvSafe(decoded[2]!)).toBe(false);
  });

  it('escapes a byte and a character of the same number differently, and trailing blanks of any kind', () => {
    expect(escapeName('a\u0085')).toBe('a\\u{85}');
    expect(escapeName(decodeGitName(Buffer.from([0x61, 0x85])))).toBe('a\\x85');
    expect(escapeName('report.pdf\u00a0')).toBe('report.pdf\\u{a0}');
    expect(escapeName('notes \u3000')).toBe('notes\\x20\\u{3000}');
    expect(isUnsafeName('a b.txt')).toBe(false);
    expect(isUnsafeName('a\\b.txt')).toBe(false);
    expect(escapeBytes(Buffer.from([0x23, 0x21, 0x00, 0xff, 0x5c, 0x0a]))).toBe('#!\\x00\\xff\\\\\\n');
  });
});

describe('masking the sandbox credential values', () => {
  const values = [{ id: 'anthropic-1', value: 'sk-ant-0123456789abcdef' }];
  it('replaces every occurrence, and a value cut at the end of a capped text', () => {
    expect(maskValuesInText('a sk-ant-0123456789abcdef b sk-ant-0123456789abcdef', values)).toBe('a [value of credential "anthropic-1"] b [value of credential "anthropic-1"]');
    expect(maskValuesInText('+KEY=sk-ant-0123', values, true)).toBe('+KEY=[value of credential "anthropic-1"]');
    expect(maskValuesInText('+KEY=sk-ant-0123', values, false)).toBe('+KEY=sk-ant-0123');
    expect(maskValuesInBytes(Buffer.from('x=sk-ant-0123456789abcdef;'), values).toString()).toBe(`x=${'*'.repeat(23)};`);
  });
});

describe('the patch', () => {
  const file = { oldMode: 'file', newMode: 'file' } as const;
  const typeChange = { oldMode: 'file', newMode: 'symlink' } as const;
  it('counts a type change as two sections when finding the first file a cut patch does not show', () => {
    const patch = 'diff --git a/a b/a\n+x\ndiff --git a/l b/l\ndeleted\ndiff --git a/l b/l\nnew\ndiff --git a/z b/z\n+partial';
    expect(firstIncompleteFile([file, typeChange, file], patch, true)).toBe(2);
    expect(firstIncompleteFile([file, typeChange, file], patch.slice(0, patch.indexOf('diff --git a/z')), true)).toBe(1);
    expect(firstIncompleteFile([file, typeChange, file], patch, false)).toBe(3);
    expect(firstIncompleteFile([file], '', true)).toBe(0);
  });

  it('takes lines that look like headers inside a hunk for content', () => {
    const patch = [
      'diff --git x x', 'new file mode 100644', '--- /dev/null', '+++ x', '@@ -0,0 +1,3 @@',
      '+diff --git y y', '++++ z', '+@@ -1 +1 @@', '\\ No newline at end of file',
      'diff --git w w', '--- w', '+++ w', '@@ -5,2 +5 @@', '-old', '-old2', '+new', '',
    ].join('\n');
    const parsed = parseAddedLines([file, file], patch, false);
    expect(parsed.byFile.get(0)).toEqual({ lines: [1, 2, 3], texts: ['diff --git y y', '+++ z', '@@ -1 +1 @@'] });
    expect(parsed.byFile.get(1)).toEqual({ lines: [5], texts: ['new'] });
    expect(parsed.firstUnread).toBe(2);
  });
});

describe('judgements', () => {
  it('resolves symlinks against their own folder', () => {
    expect(symlinkVerdict('a/b/link', '../../x')).toMatchObject({ resolved: 'x', outside: false });
    expect(symlinkVerdict('a/link', '../../x')).toMatchObject({ outside: true });
    expect(symlinkVerdict('link', 'sub/../../x')).toMatchObject({ outside: true });
    expect(symlinkVerdict('a/link', '../.GIT/config')).toMatchObject({ intoGit: true });
  });

  it('calls out submodule URLs that run or read something on this machine', () => {
    expect(classifySubmoduleUrl('ext::ssh -oProxyCommand=evil host')).toMatchObject({ severity: 'danger' });
    expect(classifySubmoduleUrl('FILE::/etc')).toMatchObject({ severity: 'danger' });
    expect(classifySubmoduleUrl('fd::3')).toMatchObject({ severity: 'danger' });
    expect(classifySubmoduleUrl('persistent-https::example.com/x')).toMatchObject({ severity: 'danger', note: 'persistent-https:: runs the remote helper git-remote-persistent-https' });
    expect(classifySubmoduleUrl('file:///home/me/secrets')).toMatchObject({ severity: 'danger' });
    expect(classifySubmoduleUrl('/home/me/secrets')).toMatchObject({ severity: 'danger' });
    expect(classifySubmoduleUrl('--upload-pack=touch /tmp/x')).toMatchObject({ severity: 'danger' });
    expect(classifySubmoduleUrl('https://example.com/a.git\nhost=evil')).toMatchObject({ severity: 'danger' });
    expect(classifySubmoduleUrl('../sibling.git')).toMatchObject({ severity: 'warning' });
    expect(classifySubmoduleUrl('git@github.com:o/r.git')).toMatchObject({ severity: 'warning', note: 'fetched over ssh' });
  });

  it('finds random values assigned to secret-sounding names, not references or words', () => {
    expect(highEntropyAssignments('const apiKey = "Zx8Kq2mN7vR4tY1pL9sW3eD6";')).toHaveLength(1);
    expect(highEntropyAssignments('Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abc123XYZ')).toHaveLength(1);
    expect(highEntropyAssignments('const apiKey = process.env.API_KEY_FOR_SERVICE_1;')).toEqual([]);
    expect(highEntropyAssignments('password = "correcthorsebatterystaple"')).toEqual([]);
    expect(highEntropyAssignments('token_count = 12345678901234567890123')).toEqual([]);
  });

  it('stays linear on long lines built to make the assignment check backtrack', () => {
    const started = Date.now();
    // A minified line with no keyword: an unbounded name pattern took 15 s on 50,000 characters (quadratic).
    expect(highEntropyAssignments(`x${'a'.repeat(50_000)} token`)).toEqual([]);
    expect(highEntropyAssignments('token='.repeat(170_000))).toEqual([]);
    expect(highEntropyAssignments(`api_key: ${'a1'.repeat(500_000)}`)).toEqual([]);
    expect(Date.now() - started).toBeLessThan(3000);
  });
});
