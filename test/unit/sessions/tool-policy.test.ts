// The PreToolUse decision, as an attacker would try it: a command must never
// reach a shell on this computer, a file tool must not leave the repository or
// touch what tools here run by themselves, and what is unknown is refused.
// The routed line is run by a real bash here to prove no part of the model's
// command is expanded by it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideToolUse, parseRoutedCommand, routedCommandLine, type Decision, type ToolCall } from '../../../main/sessions/tool-policy.js';

let root: string;
let repo: string;
let outside: string;
const via = "factory --data-dir '/tmp/a b'";

beforeAll(() => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'tool-policy-')));
  repo = path.join(root, 'repo');
  outside = path.join(root, 'outside');
  fs.mkdirSync(path.join(repo, 'src'), { recursive: true });
  fs.mkdirSync(path.join(repo, '.git', 'hooks'), { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(repo, 'src', 'a.ts'), 'x');
  fs.writeFileSync(path.join(outside, 'secret'), 'k');
  fs.symlinkSync(outside, path.join(repo, 'link-out'));
  fs.symlinkSync(path.join(outside, 'not-yet'), path.join(repo, 'dangling'));
  fs.symlinkSync(path.join(repo, 'src'), path.join(repo, 'link-in'));
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function decide(tool: string, input: Record<string, unknown>, extra: Partial<ToolCall> = {}): Decision {
  return decideToolUse({ tool_name: tool, tool_input: input, cwd: repo, ...extra }, { repoTop: repo, via, sessionId: 'sess-1' });
}

const denied = (d: Decision) => (d.kind === 'deny' ? d.reason : undefined);

describe('Bash is routed to the sandbox', () => {
  it('replaces the command with one CLI call carrying the original, keeping the other fields', () => {
    const d = decide('Bash', { command: 'npm test', description: 'Run tests', timeout: 300000, run_in_background: false });
    expect(d.kind).toBe('route');
    if (d.kind !== 'route') return;
    expect(d.updatedInput.description).toBe('Run tests');
    expect(d.updatedInput.timeout).toBe(300000);
    const line = d.updatedInput.command as string;
    expect(line.startsWith(`${via} hook run `)).toBe(true);
    const routed = parseRoutedCommand(line.slice(`${via} hook run `.length));
    expect(routed).toEqual({ s: 'sess-1', c: 'npm test', d: '', t: 300 });
  });

  it.each([
    ['a command substitution', 'echo $(touch MARK)'],
    ['backticks', 'echo `touch MARK`'],
    ['a second command', 'true; touch MARK'],
    ['a newline', 'true\ntouch MARK'],
    ['quotes that try to close', `'"; touch MARK; echo "'`],
    ['a NUL and control characters', 'true\u0000; touch MARK\u001b[2J'],
    ['a 60 KiB command', `${'x'.repeat(60 * 1024)}; touch MARK`],
  ])('%s never runs on this computer: a real bash runs the routed line and nothing else', (_what, command) => {
    const d = decide('Bash', { command });
    expect(d.kind).toBe('route');
    if (d.kind !== 'route') return;
    const marker = path.join(root, 'MARK');
    const bin = path.join(root, 'bin');
    fs.mkdirSync(bin, { recursive: true });
    // `factory` here only prints its arguments, one per line.
    fs.writeFileSync(path.join(bin, 'factory'), '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n', { mode: 0o755 });
    const out = execFileSync('bash', ['-c', d.updatedInput.command as string], { cwd: root, env: { PATH: `${bin}:/usr/bin:/bin` }, encoding: 'utf8' });
    expect(fs.existsSync(marker)).toBe(false);
    const args = out.trim().split('\n');
    expect(args.slice(0, 4)).toEqual(['--data-dir', '/tmp/a b', 'hook', 'run']);
    expect(args).toHaveLength(5);
    expect(parseRoutedCommand(args[4]!).c).toBe(command);
  });

  it('runs in the matching folder of the repository, and at its top from outside it', () => {
    const inSrc = decideToolUse({ tool_name: 'Bash', tool_input: { command: 'ls' }, cwd: path.join(repo, 'src') }, { repoTop: repo, via, sessionId: 's' });
    const outsideCwd = decideToolUse({ tool_name: 'Bash', tool_input: { command: 'ls' }, cwd: outside }, { repoTop: repo, via, sessionId: 's' });
    const dirOf = (d: Decision) => (d.kind === 'route' ? parseRoutedCommand((d.updatedInput.command as string).split(' ').pop()!).d : undefined);
    expect(dirOf(inSrc)).toBe('src');
    expect(dirOf(outsideCwd)).toBe('');
  });

  it('carries the subagent that asked, and a background command gets the longer default time', () => {
    const d = decide('Bash', { command: 'sleep 1', run_in_background: true }, { agent_id: 'a5727ece4c9c2a930' });
    expect(d.kind === 'route' && parseRoutedCommand((d.updatedInput.command as string).split(' ').pop()!)).toMatchObject({ a: 'a5727ece4c9c2a930', t: 600 });
  });

  it('refuses a call without a command, and a command over the limit', () => {
    expect(denied(decide('Bash', {}))).toMatch(/has no command/);
    // One argument of a shell holds at most 128 KiB: a longer command is refused with what to do instead.
    expect(denied(decide('Bash', { command: 'x'.repeat(100 * 1024) }))).toMatch(/too long.*script file/);
  });

  it('a routed word that was tampered with is refused, never run', () => {
    const word = (s: object) => Buffer.from(JSON.stringify(s)).toString('base64url');
    expect(() => parseRoutedCommand('abc def')).toThrow(/one base64url word/);
    expect(() => parseRoutedCommand(word({ s: 'x', c: 'ls', d: '../..' }))).toThrow(/leaves the repository/);
    expect(() => parseRoutedCommand(word({ s: 'x', c: 'ls', d: '/etc' }))).toThrow(/leaves the repository/);
    expect(() => parseRoutedCommand(word({ s: 'x', c: 'ls', d: '', t: -1 }))).toThrow(/timeout/);
    expect(routedCommandLine('factory', { s: 'x', c: 'ls', d: '' })).toMatch(/^factory hook run [A-Za-z0-9_-]+$/);
  });
});

describe('file tools act on the working tree, inside the repository only', () => {
  it('allows reading and writing the repository\'s files (Claude Code\'s own prompts then decide)', () => {
    expect(decide('Read', { file_path: path.join(repo, 'src', 'a.ts') })).toEqual({ kind: 'allow' });
    expect(decide('Write', { file_path: path.join(repo, 'src', 'new.ts'), content: 'y' })).toEqual({ kind: 'allow' });
    expect(decide('Edit', { file_path: path.join(repo, 'link-in', 'a.ts') })).toEqual({ kind: 'allow' });
    expect(decide('Write', { file_path: path.join(repo, 'new', 'deep', 'file.ts') })).toEqual({ kind: 'allow' });
  });

  it.each([
    ['a file outside', () => path.join(outside, 'secret')],
    ['a walk out with ..', () => path.join(repo, 'src', '..', '..', 'outside', 'secret')],
    ['a link inside that leads outside', () => path.join(repo, 'link-out', 'secret')],
    ['a link that leads nowhere (a write would create its target)', () => path.join(repo, 'dangling')],
    ['the home folder', () => path.join(os.homedir(), '.bashrc')],
    ['a relative path that climbs', () => '../outside/secret'],
  ])('refuses %s, naming the repository', (_what, p) => {
    for (const tool of ['Read', 'Write', 'Edit']) expect(denied(decide(tool, { file_path: p() }))).toMatch(/outside the repository/);
  });

  it.each(['.git/config', '.git/hooks/pre-commit', 'sub/.git/config'])('refuses %s for reading and writing: git on this computer obeys it', (rel) => {
    expect(denied(decide('Read', { file_path: path.join(repo, rel) }))).toMatch(/inside \.git/);
    expect(denied(decide('Write', { file_path: path.join(repo, rel) }))).toMatch(/inside \.git/);
  });

  it.each(['.claude/settings.json', '.codex/hooks.json', '.codex/config.toml', '.mcp.json', '.husky/pre-commit', '.envrc', '.vscode/tasks.json'])('refuses writing %s (run or obeyed here by itself), allows reading it', (rel) => {
    expect(denied(decide('Write', { file_path: path.join(repo, rel) }))).toMatch(/by themselves/);
    expect(decide('Read', { file_path: path.join(repo, rel) })).toEqual({ kind: 'allow' });
  });

  it.each(['.GIT/hooks/pre-commit', '.Git/config', '.git./config', '.g\u200bit/config', 'a/.GIT/HEAD'])('refuses %s: a case-insensitive disk makes it .git', (rel) => {
    expect(denied(decide('Write', { file_path: path.join(repo, rel) }))).toMatch(/inside \.git/);
  });

  it.each(['.Claude/settings.json', '.yarnrc.yml', '.npmrc', '.pre-commit-config.yaml', 'lefthook.yml', '.gitmodules', '.devcontainer/devcontainer.json', '.cargo/config.toml', '.config/git/config', '.pnp.cjs', 'sub/.ZSHRC'])(
    'refuses writing %s: a tool on this computer obeys it by itself',
    (rel) => expect(denied(decide('Write', { file_path: path.join(repo, rel) }))).toMatch(/by themselves/),
  );

  it('refuses planting a git repository that git here would obey, allows an ordinary config file', () => {
    const sub = path.join(repo, 'planted');
    fs.mkdirSync(sub, { recursive: true });
    fs.writeFileSync(path.join(sub, 'HEAD'), 'ref: refs/heads/main\n');
    expect(denied(decide('Write', { file_path: path.join(sub, 'config') }))).toMatch(/git repository/);
    fs.writeFileSync(path.join(sub, 'config'), '[core]\n');
    expect(denied(decide('Write', { file_path: path.join(sub, 'objects', 'ab', 'cdef') }))).toMatch(/git repository/);
    expect(decide('Write', { file_path: path.join(repo, 'src', 'config') })).toEqual({ kind: 'allow' });
    expect(decide('Write', { file_path: path.join(repo, 'config', 'app.json') })).toEqual({ kind: 'allow' });
  });

  it('escapes control and bidi characters of a path in the reason', () => {
    const reason = denied(decide('Read', { file_path: '/etc/\u202eevil\u001b[31m' }))!;
    expect(reason).not.toMatch(/[\u202e\u001b]/);
    expect(reason).toContain('\\u{202e}');
  });

  it('refuses a path that is not a string or holds a NUL', () => {
    expect(denied(decide('Write', { file_path: 42 }))).toMatch(/not a path/);
    expect(denied(decide('Write', { file_path: `${repo}/a\u0000b` }))).toMatch(/not a path/);
  });
});

describe('every other tool: allowed when it runs nothing here, else refused with what to do', () => {
  it.each(['Agent', 'ListAgents', 'ToolSearch', 'TaskStop', 'WebSearch', 'ScheduleWakeup', 'ReportFindings', 'CronCreate'])('%s runs nothing on this computer: allowed', (tool) => {
    expect(decide(tool, {})).toEqual({ kind: 'allow' });
  });

  it.each([
    ['WebFetch', /curl through the Bash tool/],
    ['Monitor', /run_in_background/],
    ['Skill', /Read tool/],
    ['Workflow', /script on this computer/],
    ['EnterWorktree', /use git there/],
    ['SendMessage', /without a sandbox/],
    ['mcp__github__create_issue', /MCP server runs on this computer/],
    ['SomeFutureTool', /does not know whether SomeFutureTool runs anything/],
  ])('%s is refused with a reason that says what to do instead', (tool, reason) => {
    expect(denied(decide(tool, {}))).toMatch(reason);
  });

  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty'])('%s (a name every object has) is an unknown tool: refused', (tool) => {
    expect(denied(decide(tool, {}))).toMatch(/does not know/);
  });

  it('an Agent asked for a worktree on this computer is refused', () => {
    expect(denied(decide('Agent', { prompt: 'x', isolation: 'worktree' }))).toMatch(/worktree on this computer/);
  });
});
