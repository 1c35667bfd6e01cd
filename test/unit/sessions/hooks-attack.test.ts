// The hooks boundary (issue 27) attacked the way a hostile model could: it
// chooses tool names and inputs, the text of commands, paths, and the files it
// writes into the working tree. Each case here is one attempt that the
// boundary currently holds: the model's text never reaches a shell on this
// computer, a malformed or oversized hook input blocks the call (status 2,
// never a silent pass), a path cannot leave the repository by lookalike
// spellings, and the working-tree sync carries hostile file names as plain
// files. What Claude Code 2.1.332 does before the hook (it expands `~` in file
// paths, drops unknown Bash fields) was checked with the real CLI and is not
// repeated here.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FactoryClient } from '../../../main/cli/client.js';
import { runHook } from '../../../main/cli/hooks/hook-cli.js';
import { decideToolUse, parseRoutedCommand, routedCommandLine, type Decision } from '../../../main/sessions/tool-policy.js';
import { WorkingTreeSync } from '../../../main/sessions/working-tree-sync.js';
import { localGuest, type LocalGuest } from '../../support/local-guest.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';

let root: string;
let repo: string;
let outside: string;
const via = 'factory';

beforeAll(() => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-attack-')));
  repo = path.join(root, 'repo');
  outside = path.join(root, 'repo-evil');
  fs.mkdirSync(path.join(repo, '.git', 'hooks'), { recursive: true });
  fs.mkdirSync(path.join(repo, 'src'), { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'secret'), 'k');
  // A link inside the repository to its own .git: following it must not open .git.
  fs.symlinkSync(path.join(repo, '.git'), path.join(repo, 'innocent'));
  // A folder link that leads out, used further down a path.
  fs.symlinkSync(outside, path.join(repo, 'src', 'deep'));
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function decide(tool: string, input: Record<string, unknown>, cwd = repo): Decision {
  return decideToolUse({ tool_name: tool, tool_input: input, cwd }, { repoTop: repo, via, sessionId: 'sess-1' });
}

function routedWord(d: Decision): string {
  if (d.kind !== 'route') throw new Error(`expected a route, got ${JSON.stringify(d)}`);
  return (d.updatedInput.command as string).split(' ').pop()!;
}

describe('a command never reaches a shell on this computer', () => {
  const hostile = [
    '$(touch /tmp/x)',
    '`id`',
    "'; touch /tmp/x; '",
    'a\nb\r\nc',
    'nul\0inside',
    'lone surrogate \ud800 and emoji 😀',
    '\u202eevil\u202c',
    '${IFS}cat${IFS}/etc/passwd',
    ' --help',
  ];

  it.each(hostile)('the routed line is the CLI and one base64url word, which carries %j back exactly', (command) => {
    const d = decide('Bash', { command, description: 'x' });
    const line = (d.kind === 'route' && (d.updatedInput.command as string)) || '';
    expect(line.startsWith(`${via} hook run `)).toBe(true);
    expect(routedWord(d)).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(parseRoutedCommand(routedWord(d)).c).toBe(command);
  });

  it('a real bash given the routed line passes the word through unexpanded', () => {
    const d = decide('Bash', { command: 'echo $HOME; touch "$TMPDIR/x"' });
    const word = routedWord(d);
    const line = routedCommandLine('printf %s', parseRoutedCommand(word)).replace(' hook run ', ' ');
    expect(execFileSync('bash', ['-c', line], { encoding: 'utf8' })).toBe(word);
  });

  it('a word the model made itself (shell characters, .., an absolute folder, another session) is refused or stays a word', () => {
    const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    expect(() => parseRoutedCommand('abc;touch')).toThrow(/one base64url word/);
    expect(() => parseRoutedCommand('$(id)')).toThrow(/one base64url word/);
    expect(() => parseRoutedCommand(enc({ s: 's', c: 'true', d: 'a/../../b' }))).toThrow(/leaves the repository/);
    expect(() => parseRoutedCommand(enc({ s: 's', c: 'true', d: '/etc' }))).toThrow(/leaves the repository/);
    expect(() => parseRoutedCommand(enc({ s: 's', c: 'true', d: '', t: 1.5 }))).toThrow(/timeout/);
    expect(() => parseRoutedCommand(enc({ s: 's', c: 'true', d: '', a: 7 }))).toThrow(/agent/);
    // A Bash call whose text is itself `factory hook run <word>` is routed like any other: it runs in the sandbox, not here.
    const d = decide('Bash', { command: `factory hook run ${enc({ s: 'other-session', c: 'touch /x', d: '' })}` });
    expect(parseRoutedCommand(routedWord(d)).s).toBe('sess-1');
  });

  it('a model-chosen timeout cannot break the routed word (huge, negative, a string)', () => {
    for (const timeout of [1e308, -5, 0, '9999', Number.MAX_SAFE_INTEGER]) {
      const t = parseRoutedCommand(routedWord(decide('Bash', { command: 'true', timeout }))).t!;
      expect(Number.isInteger(t) && t >= 1).toBe(true);
    }
  });
});

describe('tool names the model spells to slip past the policy', () => {
  it.each(['bash', 'BASH', 'Bash ', 'Bаsh' /* Cyrillic a */, 'Bash\u200b', 'Read\0', 'mcp__fs__read_file', 'MCP__x', 'WebFetch', 'Skill', 'LSP', 'NoSuchTool'])(
    '%j is not routed and not allowed',
    (name) => {
      expect(decide(name, { command: 'touch /tmp/x', file_path: path.join(repo, 'src', 'a.ts') }).kind).toBe('deny');
    },
  );

  it('an Agent asking for an isolated worktree on this computer is refused, with any value', () => {
    for (const isolation of ['worktree', null, false, '']) expect(decide('Agent', { prompt: 'p', isolation }).kind).toBe('deny');
  });
});

describe('paths that try to leave the repository or reach .git', () => {
  it.each([
    ['a sibling whose name starts like the repository', () => path.join(outside, 'secret')],
    ['.. after a folder', () => path.join(repo, 'src', '..', '..', 'repo-evil', 'secret')],
    ['a relative .. from a subfolder', () => '../../repo-evil/secret'],
    ['a link further down the path', () => path.join(repo, 'src', 'deep', 'secret')],
    ['a link to .git under another name', () => path.join(repo, 'innocent', 'config')],
    ['.git reached through .. inside the repository', () => path.join(repo, 'src', '..', '.git', 'config')],
    ['.git with a trailing slash', () => `${repo}/.git/`],
    ['/proc/self/root', () => `/proc/self/root${repo}/../repo-evil/secret`],
  ])('%s is refused for Read and Write', (_what, p) => {
    for (const tool of ['Read', 'Write', 'Edit', 'NotebookEdit']) {
      const param = tool === 'NotebookEdit' ? 'notebook_path' : 'file_path';
      expect(decide(tool, { [param]: p(), content: 'x' }, path.join(repo, 'src')).kind).toBe('deny');
    }
  });

  it('what tools here run by themselves is not written, at any depth', () => {
    for (const p of ['.claude/settings.json', 'pkg/.claude/settings.local.json', '.mcp.json', 'sub/.mcp.json', '.husky/pre-commit', '.githooks/x', '.envrc', '.vscode/tasks.json', 'a/.git', '.git']) {
      expect(decide('Write', { file_path: path.join(repo, p), content: 'x' }).kind, p).toBe('deny');
    }
  });
});

describe('the PreToolUse hook blocks (status 2) whatever input it cannot read', () => {
  // The app is never asked: these inputs fail before the hook needs it.
  const noApp = { call: () => Promise.reject(new Error('the app must not be asked')) } as unknown as FactoryClient;

  async function hook(stdin: Buffer | string): Promise<{ code: number; stdout: string; stderr: string }> {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (d: Buffer) => (out += d.toString()));
    stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await runHook(noApp, { stdout, stderr, json: false, stdin: Readable.from([Buffer.from(stdin)]) }, 'pre-tool-use', { via });
    return { code, stdout: out, stderr: err };
  }
  const input = (over: Record<string, unknown>) => JSON.stringify({ session_id: 's1', cwd: repo, hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'true' }, ...over });

  it.each([
    ['not JSON', '{"tool_name": "Bash",'],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
    ['a tool_input that is not an object', input({ tool_input: 'touch /tmp/x' })],
    ['a tool_input that is an array', input({ tool_input: ['touch /tmp/x'] })],
    ['a session id with shell characters', input({ session_id: 'a;touch /tmp/x' })],
    ['a session id with a path', input({ session_id: '../../etc' })],
    ['an agent id with a NUL', input({ agent_id: 'a\u0000b' })],
    ['a tool name over 256 characters', input({ tool_name: 'B'.repeat(300) })],
    ['an empty input', ''],
    ['more than 1 MiB', input({ tool_input: { command: 'x'.repeat(1024 * 1024 + 10) } })],
  ])('%s: status 2, nothing on stdout for Claude Code to misread', async (_what, stdin) => {
    const r = await hook(stdin);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/the call is blocked/);
  });

  it('a decided call prints exactly one JSON document: Claude Code 2.1.332 runs the original call when stdout is anything else', async () => {
    const app = { call: () => Promise.resolve({ taskId: 't1', repoPath: repo }) } as unknown as FactoryClient;
    for (const [tool, tool_input, want] of [
      ['Bash', { command: 'touch /tmp/host-marker' }, 'allow'],
      ['WebFetch', { url: 'http://169.254.169.254/' }, 'deny'],
      ['Write', { file_path: path.join(repo, '.claude', 'settings.json'), content: '{}' }, 'deny'],
    ] as const) {
      const stdout = new PassThrough();
      let out = '';
      stdout.on('data', (d: Buffer) => (out += d.toString()));
      const code = await runHook(app, { stdout, stderr: new PassThrough(), json: false, stdin: Readable.from([Buffer.from(input({ tool_name: tool, tool_input }))]) }, 'pre-tool-use', { via });
      expect(code).toBe(0);
      const doc = JSON.parse(out) as { hookSpecificOutput: { permissionDecision: string; updatedInput?: { command: string } } };
      expect(doc.hookSpecificOutput.permissionDecision).toBe(want);
      if (tool === 'Bash') expect(doc.hookSpecificOutput.updatedInput!.command).toMatch(/^factory hook run [A-Za-z0-9_-]+$/);
    }
  });

  it('an app that fails the question blocks the call, with nothing on stdout', async () => {
    const broken = { call: () => Promise.reject(Object.assign(new Error('database is locked'), { name: 'Internal' })) } as unknown as FactoryClient;
    const stdout = new PassThrough();
    let out = '';
    stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await runHook(broken, { stdout, stderr: new PassThrough(), json: false, stdin: Readable.from([Buffer.from(input({}))]) }, 'pre-tool-use', { via });
    expect([code, out]).toEqual([2, '']);
  });

  it('duplicate keys: the hook reads the last, as JSON.parse in Claude Code does (it sends its own serialisation)', () => {
    const raw = '{"command":"touch /tmp/host","command":"echo sandbox"}';
    expect((JSON.parse(raw) as { command: string }).command).toBe('echo sandbox');
  });
});

describe('the working-tree sync carries hostile file names as files, nothing more', () => {
  let fixture: FixtureRepo;
  let sandbox: string;
  let guest: LocalGuest;
  const marker = () => path.join(fixture.dir, 'RAN-ON-THIS-COMPUTER');

  beforeEach(async () => {
    fixture = await makeRepo({ files: { 'README.md': '# r\n' } });
    sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-attack-sandbox-'));
    guest = await localGuest({ cwd: sandbox });
  });
  afterEach(async () => {
    await guest.close();
    fixture.cleanup();
    fs.rmSync(sandbox, { recursive: true, force: true });
  });

  it('names that are tar options (checkpoint actions, --to-command, -T) run nothing on this computer', async () => {
    fixture.write('x.sh', `touch ${JSON.stringify(marker())}\n`);
    const names = ['--checkpoint=1', '--checkpoint-action=exec=sh x.sh', '--to-command=sh x.sh', '-T', '--use-compress-program=sh x.sh', '-C'];
    for (const n of names) fixture.write(n, 'plain\n');
    const s = new WorkingTreeSync(fixture.dir, { guest: { dir: sandbox, run: (c) => c } });
    expect((await s.sync(guest.ssh)).sent).toBe(names.length + 1);
    expect(fs.existsSync(marker())).toBe(false);
    for (const n of names) expect(fs.readFileSync(path.join(sandbox, n), 'utf8')).toBe('plain\n');
  });

  it('a path the model names with .. is not a candidate: only what git lists travels', async () => {
    const s = new WorkingTreeSync(fixture.dir, { guest: { dir: sandbox, run: (c) => c } });
    fixture.write('a/b.txt', 'in\n');
    const plan = await s.plan();
    expect(plan.send.map((f) => f.path)).toEqual(['a/b.txt']);
    expect(plan.send.every((f) => !f.path.split('/').includes('..') && !path.isAbsolute(f.path))).toBe(true);
  });
});
