// `factory hooks install|uninstall` against real settings files on disk: the
// user's own hooks and settings survive, installing twice changes nothing,
// uninstall takes back exactly what install added, and a file that is not
// JSON (or not in Claude Code's shape) is refused by name and left untouched.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FLAG_NOTE, MARK, installHooks, settingsPath, uninstallHooks } from '../../../main/cli/hooks/settings-file.js';

let dir: string;
let file: string;
const read = () => JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, any>;

const USERS = {
  model: 'opus',
  permissions: { allow: ['Bash(npm test)'] },
  hooks: {
    SessionStart: [{ matcher: 'startup', hooks: [{ type: 'command', command: 'echo mine' }] }],
    Stop: [{ hooks: [{ type: 'command', command: 'notify-send done', timeout: 5 }] }],
    PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: './guard.sh' }] }],
  },
};

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-settings-'));
  file = path.join(dir, '.claude', 'settings.json');
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('factory hooks install', () => {
  it('creates .claude/settings.json with the six command hooks in Claude Code\'s shape', async () => {
    expect(await installHooks(file, 'factory')).toEqual({ changed: true });
    const s = read();
    // Every tool call goes through the PreToolUse hook; any failure of it becomes Claude Code's blocking status 2.
    expect(s.hooks.PreToolUse).toEqual([{ matcher: '*', hooks: [{ type: 'command', command: `factory hook pre-tool-use --via factory || exit 2 ${MARK}`, timeout: 120 }] }]);
    expect(s.hooks.SessionStart).toEqual([{ hooks: [{ type: 'command', command: `factory hook session-start ${FLAG_NOTE} ${MARK}`, timeout: 900 }] }]);
    expect(s.hooks.Stop[0].hooks[0].command).toBe(`factory hook stop ${MARK}`);
    expect(s.hooks.SessionEnd[0].hooks[0].command).toBe(`factory hook session-end ${MARK}`);
    expect(s.hooks.SubagentStart[0].hooks[0].command).toBe(`factory hook subagent-start ${MARK}`);
    expect(s.hooks.SubagentStop[0].hooks[0].command).toBe(`factory hook subagent-stop ${MARK}`);
    // The `!` lines of slash commands and skills would run here with no tool call to route.
    expect(s.disableSkillShellExecution).toBe(true);
  });

  it("keeps the user's other hooks and settings, and a second install changes nothing", async () => {
    fs.mkdirSync(path.dirname(file));
    fs.writeFileSync(file, JSON.stringify(USERS));
    await installHooks(file, 'factory');
    const once = fs.readFileSync(file, 'utf8');
    const s = read();
    expect(s.model).toBe('opus');
    expect(s.permissions).toEqual(USERS.permissions);
    expect(s.hooks.PreToolUse[0]).toEqual(USERS.hooks.PreToolUse[0]);
    expect(s.hooks.PreToolUse).toHaveLength(2);
    expect(s.hooks.SessionStart[0]).toEqual(USERS.hooks.SessionStart[0]);
    expect(s.hooks.SessionStart).toHaveLength(2);
    expect(s.hooks.Stop[0]).toEqual(USERS.hooks.Stop[0]);
    const mtime = fs.statSync(file).mtimeMs;
    expect(await installHooks(file, 'factory')).toEqual({ changed: false });
    expect(fs.readFileSync(file, 'utf8')).toBe(once);
    expect(fs.statSync(file).mtimeMs).toBe(mtime);
  });

  it('an install with another command path replaces its own entries instead of adding a second set', async () => {
    await installHooks(file, 'factory');
    await installHooks(file, '/opt/factory/bin/factory');
    const s = read();
    for (const e of ['SessionStart', 'PreToolUse', 'SubagentStart', 'SubagentStop', 'Stop', 'SessionEnd']) {
      expect(s.hooks[e]).toHaveLength(1);
      expect(s.hooks[e][0].hooks[0].command).toMatch(/^\/opt\/factory\/bin\/factory hook /);
    }
  });

  it('uninstall removes exactly what install added, even when the user moved ours next to theirs', async () => {
    fs.mkdirSync(path.dirname(file));
    fs.writeFileSync(file, JSON.stringify(USERS));
    await installHooks(file, 'factory');
    // The user edits the file: our Stop command now shares a group with one of theirs.
    const s = read();
    s.hooks.Stop[0].hooks.push(s.hooks.Stop[1].hooks[0]);
    s.hooks.Stop.pop();
    fs.writeFileSync(file, JSON.stringify(s));
    expect(await uninstallHooks(file)).toEqual({ removed: 6 });
    expect(read()).toEqual(USERS);
    expect(await uninstallHooks(file)).toEqual({ removed: 0 });
  });

  it("a user's own disableSkillShellExecution survives install and uninstall; the one install set goes", async () => {
    fs.mkdirSync(path.dirname(file));
    fs.writeFileSync(file, JSON.stringify({ ...USERS, disableSkillShellExecution: true }));
    await installHooks(file, 'factory');
    expect(read().hooks.SessionStart[1].hooks[0].command).toBe(`factory hook session-start ${MARK}`);
    await installHooks(file, '/opt/factory/bin/factory');
    await uninstallHooks(file);
    expect(read()).toEqual({ ...USERS, disableSkillShellExecution: true });
    // Off before: install turns it on, a second install (another path) still knows it did, uninstall turns it off.
    fs.writeFileSync(file, JSON.stringify(USERS));
    await installHooks(file, 'factory');
    await installHooks(file, '/opt/factory/bin/factory');
    expect(read().disableSkillShellExecution).toBe(true);
    await uninstallHooks(file);
    expect(read()).toEqual(USERS);
  });

  it('an event we do not install, in a shape of its own, is left as it is by install and uninstall', async () => {
    fs.mkdirSync(path.dirname(file));
    const theirs = { hooks: { Notification: [{ command: 'notify-send hi' }] } };
    fs.writeFileSync(file, JSON.stringify(theirs));
    await installHooks(file, 'factory');
    expect(read().hooks.Notification).toEqual(theirs.hooks.Notification);
    expect(await uninstallHooks(file)).toEqual({ removed: 6 });
    expect(read()).toEqual(theirs);
  });

  it('uninstall of a file we created leaves no empty hooks object behind', async () => {
    fs.mkdirSync(path.dirname(file));
    fs.writeFileSync(file, JSON.stringify({ model: 'sonnet' }));
    await installHooks(file, 'factory');
    await uninstallHooks(file);
    expect(read()).toEqual({ model: 'sonnet' });
  });

  it('a hook of the user that merely mentions "factory hook" is not ours and stays', async () => {
    fs.mkdirSync(path.dirname(file));
    const theirs = { hooks: { SessionEnd: [{ hooks: [{ type: 'command', command: 'factory hook session-end # my own wrapper' }] }] } };
    fs.writeFileSync(file, JSON.stringify(theirs));
    await installHooks(file, 'factory');
    await uninstallHooks(file);
    expect(read()).toEqual(theirs);
  });

  it.each([
    ['a trailing comma', '{"hooks": {},}', /not valid JSON/],
    ['JSON with comments', '// mine\n{"hooks": {}}', /not valid JSON/],
    ['an array', '[]', /not a JSON object/],
    ['hooks as a list', '{"hooks": []}', /"hooks" is not an object/],
    ['an event that is not a list', '{"hooks": {"Stop": {"hooks": []}}}', /"hooks.Stop" is not an array/],
    ['a group without hooks', '{"hooks": {"SessionEnd": [{"command": "x"}]}}', /"hooks.SessionEnd\[0\]" is not an object/],
  ])('refuses a settings file with %s, names the problem and leaves it untouched', async (_what, text, message) => {
    fs.mkdirSync(path.dirname(file));
    fs.writeFileSync(file, text);
    await expect(installHooks(file, 'factory')).rejects.toMatchObject({ name: 'HookSettingsInvalid', message: expect.stringMatching(message) });
    await expect(uninstallHooks(file)).rejects.toMatchObject({ name: 'HookSettingsInvalid' });
    expect(fs.readFileSync(file, 'utf8')).toBe(text);
  });

  it('writes through a symlinked settings.json to the file it points at', async () => {
    const real = path.join(dir, 'dotfiles-settings.json');
    fs.writeFileSync(real, JSON.stringify({ model: 'opus' }));
    fs.mkdirSync(path.dirname(file));
    fs.symlinkSync(real, file);
    await installHooks(file, 'factory');
    expect(fs.lstatSync(file).isSymbolicLink()).toBe(true);
    expect(JSON.parse(fs.readFileSync(real, 'utf8')).hooks.SessionStart).toHaveLength(1);
  });

  it('project scope is the repository at cwd; user scope follows HOME', () => {
    expect(settingsPath('project', '/r/repo', '/h')).toBe('/r/repo/.claude/settings.json');
    expect(settingsPath('user', '/r/repo', '/h')).toBe('/h/.claude/settings.json');
  });
});

describe('factory hooks install in a repository whose .claude leads outside it', () => {
  let outside: string;
  beforeEach(() => {
    outside = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-outside-'));
  });
  afterEach(() => fs.rmSync(outside, { recursive: true, force: true }));

  it('refuses a settings.json that links to a file outside the repository, naming both, and leaves that file as it was', async () => {
    const victim = path.join(outside, 'settings.json');
    const text = JSON.stringify({ model: 'the user elsewhere' });
    fs.writeFileSync(victim, text);
    fs.mkdirSync(path.dirname(file));
    fs.symlinkSync(victim, file);
    for (const run of [() => installHooks(file, 'factory', dir), () => uninstallHooks(file, dir)]) {
      await expect(run()).rejects.toMatchObject({ name: 'HookSettingsOutside', message: expect.stringContaining(`${file} is a symlink to ${JSON.stringify(victim)}`) });
    }
    expect(fs.readFileSync(victim, 'utf8')).toBe(text);
    expect(fs.lstatSync(file).isSymbolicLink()).toBe(true);
  });

  it('refuses a .claude that links to a folder outside the repository, and writes nothing there', async () => {
    const victim = path.join(outside, 'settings.json');
    const text = JSON.stringify({ hooks: {} });
    fs.writeFileSync(victim, text);
    fs.symlinkSync(outside, path.join(dir, '.claude'));
    await expect(installHooks(file, 'factory', dir)).rejects.toMatchObject({ name: 'HookSettingsOutside', message: expect.stringContaining(`${path.join(dir, '.claude')} is a symlink to ${JSON.stringify(outside)}`) });
    expect(fs.readFileSync(victim, 'utf8')).toBe(text);
    expect(fs.readdirSync(outside)).toEqual(['settings.json']);
    // Nor when the folder outside has no settings.json yet.
    fs.rmSync(victim);
    await expect(installHooks(file, 'factory', dir)).rejects.toMatchObject({ name: 'HookSettingsOutside' });
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('follows a link that stays inside the repository, replacing the file it points at', async () => {
    const real = path.join(dir, 'config', 'claude-settings.json');
    fs.mkdirSync(path.dirname(real));
    fs.writeFileSync(real, JSON.stringify({ model: 'opus' }));
    fs.mkdirSync(path.dirname(file));
    fs.symlinkSync('../config/claude-settings.json', file);
    expect(await installHooks(file, 'factory', dir)).toEqual({ changed: true });
    expect(fs.lstatSync(file).isSymbolicLink()).toBe(true);
    expect(JSON.parse(fs.readFileSync(real, 'utf8')).hooks.Stop).toHaveLength(1);
  });
});
