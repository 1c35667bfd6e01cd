// What git ignores stays out of a hooks session, tried as a model would try to
// get at a git-ignored `.env` through the file tools on this computer: read it,
// through a tracked link, inside an ignored folder, Grep it by name or with a
// glob that overrides ripgrep's ignore rules, or hide it behind a name a glob
// cannot write. Real git repositories; the real Claude Code running the
// rewritten Grep is in test/integration/hooks-claude-code.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withholdIgnored } from '../../../main/sessions/ignored-files.js';
import { decideToolUse, type Decision } from '../../../main/sessions/tool-policy.js';
import { gitIn, makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';

let repo: FixtureRepo;
let top: string;

beforeAll(async () => {
  repo = await makeRepo({
    files: {
      '.gitignore': '.env\nbuild/\n*.log\n',
      'src/a.ts': 'export const KEY = process.env.KEY;\n',
      'pkg/index.ts': 'export {};\n',
    },
  });
  top = fs.realpathSync(repo.dir);
  // Tracked although the pattern matches: the sandbox has it, so the tools may touch it.
  fs.mkdirSync(path.join(top, 'fixtures'));
  fs.writeFileSync(path.join(top, 'fixtures', 'kept.log'), 'tracked log\n');
  gitIn(top, ['add', '--force', 'fixtures/kept.log']);
  gitIn(top, ['commit', '-q', '-m', 'a log kept on purpose']);
  fs.writeFileSync(path.join(top, '.env'), 'KEY=sk-secret\n');
  fs.writeFileSync(path.join(top, 'pkg', '.env'), 'KEY=sk-secret-2\n');
  fs.mkdirSync(path.join(top, 'build'));
  fs.writeFileSync(path.join(top, 'build', 'out.js'), 'KEY\n');
  fs.writeFileSync(path.join(top, 'notes.md'), 'untracked, not ignored\n');
  fs.symlinkSync('.env', path.join(top, 'env-link'));
});
afterAll(() => repo.cleanup());

async function decide(tool: string, input: Record<string, unknown>, repoTop = top): Promise<Decision> {
  const call = { tool_name: tool, tool_input: input, cwd: repoTop };
  const ctx = { repoTop, via: 'factory', sessionId: 's1' };
  return withholdIgnored(call, ctx, decideToolUse(call, ctx));
}

const VCS = ['!**/.git', '!**/.svn', '!**/.hg', '!**/.bzr', '!**/.jj', '!**/.sl'];

const reason = (d: Decision) => (d.kind === 'deny' ? d.reason : '');

describe('a file git ignores is neither read nor written here', () => {
  it.each([
    ['Read', { file_path: '.env' }, '".env"'],
    ['Read', { file_path: 'pkg/.env' }, '"pkg/.env"'],
    ['Read', { file_path: 'build/out.js' }, '"build/out.js"'],
    ['Read (through a link that is not ignored itself)', { file_path: 'env-link' }, '".env"'],
    ['Grep', { pattern: 'KEY', path: '.env' }, '".env"'],
  ])('%s %j is refused, naming the file', async (tool, input, named) => {
    const d = await decide(tool.split(' ')[0]!, input);
    expect(reason(d)).toContain(`git ignores ${named}`);
    expect(reason(d)).toContain('stays out of the sandbox');
  });

  it.each(['Write', 'Edit'])('%s of an ignored file is refused: it would never reach the sandbox', async (tool) => {
    const d = await decide(tool, { file_path: path.join(top, 'build', 'new.js'), content: 'x', old_string: 'a', new_string: 'b' });
    expect(reason(d)).toMatch(/git ignores "build\/new\.js", so a file written here never reaches the sandbox/);
  });

  it.each([
    ['Read', { file_path: 'src/a.ts' }],
    ['Read', { file_path: 'fixtures/kept.log' }],
    ['Read', { file_path: 'notes.md' }],
    ['Write', { file_path: 'src/b.ts', content: 'x' }],
    ['Glob', { pattern: '**/*' }],
  ])('%s %j goes on: tracked, untracked but not ignored, or names only', async (tool, input) => {
    expect(await decide(tool, input)).toEqual({ kind: 'allow' });
  });

  it('a folder git cannot answer for refuses the call (fail closed)', async () => {
    const notRepo = fs.realpathSync(tempDir());
    try {
      fs.writeFileSync(path.join(notRepo, 'a.txt'), 'a');
      expect(reason(await decide('Read', { file_path: 'a.txt' }, notRepo))).toMatch(/git could not tell whether it ignores "a\.txt".*so the call is not run/s);
    } finally {
      fs.rmSync(notRepo, { recursive: true, force: true });
    }
  });
});

describe('Grep over a folder leaves out what git ignores', () => {
  it('after the model\'s own glob, every ignored entry under the folder is excluded by name', async () => {
    const d = await decide('Grep', { pattern: 'KEY', glob: '*', output_mode: 'content' });
    expect(d).toMatchObject({ kind: 'rewrite', updatedInput: { pattern: 'KEY', output_mode: 'content' } });
    if (d.kind !== 'rewrite') return;
    // Claude Code splits the glob at white space; the model's comes first, the exclusions win after it,
    // version-control folders too (Claude Code's own exclusions of them come before the model's glob).
    expect((d.updatedInput.glob as string).split(/\s+/)).toEqual(['*', '!**/.env', '!**/build/', '!**/pkg/.env', ...VCS]);
  });

  it('a glob of the model\'s gets version-control folders left out even where git ignores nothing', async () => {
    expect(await decide('Grep', { pattern: 'KEY', path: 'src', glob: '*' })).toMatchObject({
      kind: 'rewrite',
      updatedInput: { glob: ['*', ...VCS].join(' ') },
      why: 'version-control folders left out of the search by Factory in a Box',
    });
  });

  it('without a glob of its own too (ripgrep would leave them out, but one rule for both), and only the folder\'s', async () => {
    const d = await decide('Grep', { pattern: 'KEY', path: 'pkg' });
    expect(d).toMatchObject({ kind: 'rewrite', updatedInput: { glob: '!**/pkg/.env' }, why: '1 path git ignores or does not enter left out of the search by Factory in a Box' });
    expect(await decide('Grep', { pattern: 'KEY', path: 'src' })).toEqual({ kind: 'allow' });
  });

  it('a repository nested in the working tree is left out whole: ripgrep would obey only its own ignore rules', async () => {
    const nested = path.join(top, 'vendor', 'lib');
    fs.mkdirSync(nested, { recursive: true });
    gitIn(nested, ['init', '-q']);
    fs.writeFileSync(path.join(nested, '.gitignore'), 'secrets.txt\n');
    fs.writeFileSync(path.join(nested, 'secrets.txt'), 'KEY=nested\n');
    try {
      const d = await decide('Grep', { pattern: 'KEY', path: 'vendor' });
      expect(d).toMatchObject({ kind: 'rewrite', updatedInput: { glob: '!**/vendor/lib/' } });
      // Searched from inside it, no exclusion written above it would hold: refused.
      expect(reason(await decide('Grep', { pattern: 'KEY', path: 'vendor/lib', glob: '*' }))).toContain('"vendor/lib" is in "vendor/lib/", a repository nested in the working tree');
      // Its own ignored file is refused by name, as git reads the nested .gitignore too.
      expect(reason(await decide('Read', { file_path: 'vendor/lib/secrets.txt' }))).toContain('git ignores "vendor/lib/secrets.txt"');
    } finally {
      fs.rmSync(path.join(top, 'vendor'), { recursive: true, force: true });
    }
  });

  it.each([
    ['white space', 'my secrets.log'],
    ['a comma', 'a,b.log'],
    ['glob syntax', 'key[1].log'],
    ['a newline', 'line\nbreak.log'],
  ])('an ignored name with %s cannot be written into the glob: the Grep is refused, naming it', async (_what, name) => {
    const dir = path.join(top, 'odd');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, name), 'KEY=x\n');
    try {
      const d = await decide('Grep', { pattern: 'KEY', path: 'odd' });
      expect(reason(d)).toContain('whose name a Grep glob cannot leave out');
      // Named as the review names files: a control character escaped.
      expect(reason(d)).toContain(`odd/${name.replace('\n', '\\\\n')}`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an ignored name that is not UTF-8 refuses the Grep', async () => {
    const dir = path.join(top, 'latin1');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(Buffer.concat([Buffer.from(`${dir}/caf`), Buffer.from([0xe9]), Buffer.from('.log')]), 'KEY=x\n');
    try {
      expect(reason(await decide('Grep', { pattern: 'KEY', path: 'latin1' }))).toContain('not UTF-8');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
