// `factory hooks install|uninstall` as a user types it: the real CLI in its own
// process (no app is needed or started), HOME and the working folder of the
// test's choosing, exit statuses and messages as the terminal shows them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FLAG_NOTE, MARK } from '../../../main/cli/hooks/settings-file.js';
import { cliArgs } from '../../support/cli.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function factory(args: string[], opts: { cwd: string; home: string; input?: string; env?: NodeJS.ProcessEnv }) {
  // --data-dir: a folder that must stay empty, since these commands never reach an app.
  const dataDir = path.join(opts.home, 'data');
  const r = spawnSync(process.execPath, cliArgs('--data-dir', dataDir, ...args), { cwd: opts.cwd, env: { ...process.env, HOME: opts.home, ...opts.env }, encoding: 'utf8', input: opts.input ?? '' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, dataDir };
}

describe('factory hooks', () => {
  it('--user installs into ~/.claude/settings.json beside the user\'s own settings, and uninstall takes back exactly that', () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-home-'));
    dirs.push(home);
    const file = path.join(home, '.claude', 'settings.json');
    fs.mkdirSync(path.dirname(file));
    const mine = { model: 'opus', hooks: { Stop: [{ hooks: [{ type: 'command', command: 'notify-send done' }] }] } };
    fs.writeFileSync(file, JSON.stringify(mine));
    const install = factory(['hooks', 'install', '--user'], { cwd: os.tmpdir(), home });
    expect(install.code, install.stderr).toBe(0);
    expect(install.stdout).toContain(`installed SessionStart, PreToolUse, SubagentStart, SubagentStop, Stop, SessionEnd hooks in ${file}`);
    const s = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(s.model).toBe('opus');
    expect(s.hooks.Stop).toHaveLength(2);
    // The data folder given to install goes into the commands, so the hooks reach the same app.
    expect(s.hooks.SessionStart[0].hooks[0].command).toBe(`factory --data-dir ${install.dataDir} hook session-start ${FLAG_NOTE} ${MARK}`);
    expect(factory(['hooks', 'install', '--user'], { cwd: os.tmpdir(), home }).stdout).toContain('already installed');
    const un = factory(['hooks', 'uninstall', '--user', '--json'], { cwd: os.tmpdir(), home });
    expect(un.code, un.stderr).toBe(0);
    expect(JSON.parse(un.stdout)).toEqual({ file, removed: 6 });
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual(mine);
    // No app was started for any of it.
    expect(fs.existsSync(install.dataDir)).toBe(false);
  });

  it('refuses an npm run command without -s: its banner on stdout would hide the hooks\' answers from Claude Code', () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-home-'));
    dirs.push(home);
    const r = factory(['hooks', 'install', '--user', '--command', 'npm run --prefix /opt/fiab factory --'], { cwd: home, home });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('add -s');
    expect(fs.existsSync(path.join(home, '.claude'))).toBe(false);
    expect(factory(['hooks', 'install', '--user', '--command', 'npm run -s --prefix /opt/fiab factory --'], { cwd: home, home }).code).toBe(0);
  });

  it('the PreToolUse hook blocks the call when the app does not answer in time (an app that never finishes starting)', () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-home-'));
    dirs.push(home);
    // A lock held by a live process that is no app: the CLI waits for an app that never comes.
    fs.mkdirSync(path.join(home, 'data'), { recursive: true });
    fs.writeFileSync(path.join(home, 'data', 'factory.lock'), `${process.pid}\n`);
    const input = JSON.stringify({ session_id: 's1', cwd: home, hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'touch marker' } });
    const t0 = Date.now();
    const r = factory(['hook', 'pre-tool-use', '--via', 'factory'], { cwd: home, home, input, env: { FACTORY_PRE_TOOL_USE_LIMIT_SEC: '3' } });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('no answer within 3 s, so the call is blocked');
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(fs.existsSync(path.join(home, 'marker'))).toBe(false);
  }, 30_000);

  it('refuses --project outside a repository, and --project with --user, by name', () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-home-'));
    dirs.push(home);
    const outside = factory(['hooks', 'install', '--project'], { cwd: home, home });
    expect(outside.code).toBe(1);
    expect(outside.stderr).toContain(`${home} is not inside a git repository; run this in the repository Claude Code works in, or use --user`);
    const both = factory(['hooks', 'install', '--project', '--user'], { cwd: home, home });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--project and --user exclude each other');
    expect(fs.existsSync(path.join(home, '.claude'))).toBe(false);
  });

  it('refuses a repository whose .claude/settings.json links outside it, naming where it points, and leaves that file alone', () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-home-'));
    dirs.push(home);
    const repo = path.join(home, 'repo');
    fs.mkdirSync(path.join(repo, '.claude'), { recursive: true });
    spawnSync('git', ['init', '-q', repo]);
    const victim = path.join(home, 'elsewhere.json');
    fs.writeFileSync(victim, '{"model":"opus"}\n');
    fs.symlinkSync(victim, path.join(repo, '.claude', 'settings.json'));
    const r = factory(['hooks', 'install'], { cwd: repo, home });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`.claude/settings.json is a symlink to ${JSON.stringify(victim)}`);
    expect(r.stderr).toContain('outside the repository');
    expect(fs.readFileSync(victim, 'utf8')).toBe('{"model":"opus"}\n');
  });
});
