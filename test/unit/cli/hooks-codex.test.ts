// The Codex session hooks without Codex: `factory hooks install --agent codex`
// against real files (the user's hooks.json entries survive, uninstall takes
// back exactly ours, a .codex leading outside the repository is refused), and
// `factory hook pre-tool-use --agent codex` through the CLI with Codex's hook
// input on stdin, against a scripted app that knows one session (the only part
// that is not real: the app's answer to sessions.info). The real Codex CLI
// against real sandboxes is test/integration/hooks-codex.test.ts.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../../common/errors.js';
import type { FactoryClient } from '../../../main/cli/client.js';
import { patchFiles } from '../../../main/cli/hooks/codex-hooks.js';
import { MARK, codexRules, installHooks, settingsPath, shellWords, uninstallHooks } from '../../../main/cli/hooks/settings-file.js';
import { runCli } from '../../../main/cli/run-cli.js';
import { parseRoutedCommand } from '../../../main/sessions/tool-policy.js';

let dir: string;
let repo: string;
beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-codex-')));
  repo = path.join(dir, 'repo');
  fs.mkdirSync(repo);
  execFileSync('git', ['init', '-q', repo]);
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('factory hooks install --agent codex', () => {
  it("writes Codex's hooks.json (project: .codex/, user: CODEX_HOME or ~/.codex) beside the user's hooks; uninstall takes back only ours", async () => {
    expect(settingsPath('project', repo, dir, 'codex')).toBe(path.join(repo, '.codex', 'hooks.json'));
    expect(settingsPath('user', repo, dir, 'codex', {})).toBe(path.join(dir, '.codex', 'hooks.json'));
    expect(settingsPath('user', repo, dir, 'codex', { CODEX_HOME: '/opt/codex-home' })).toBe('/opt/codex-home/hooks.json');
    const file = settingsPath('project', repo, dir, 'codex');
    fs.mkdirSync(path.dirname(file));
    const mine = { hooks: { Stop: [{ hooks: [{ type: 'command', command: 'notify-send done', timeout: 5 }] }] } };
    fs.writeFileSync(file, JSON.stringify(mine));
    const rules = path.join(repo, '.codex', 'rules', 'factory-in-a-box.rules');
    expect(await installHooks(file, 'factory', repo, 'codex')).toEqual({ changed: true, rules });
    const s = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(Object.keys(s.hooks).sort()).toEqual(['PreToolUse', 'SessionEnd', 'SessionStart', 'Stop', 'SubagentStart', 'SubagentStop']);
    // Codex lets a call run when the hook fails or exits 2 without a reason: every failure is 2 with one.
    expect(s.hooks.PreToolUse).toEqual([
      { matcher: '*', hooks: [{ type: 'command', command: `factory hook pre-tool-use --agent codex --via factory || { echo 'factory: the PreToolUse hook failed, so the call is blocked' >&2; exit 2; } ${MARK}`, timeout: 120 }] },
    ]);
    expect(s.hooks.SessionStart[0].hooks[0]).toEqual({ type: 'command', command: `factory hook session-start --agent codex ${MARK}`, timeout: 900 });
    // Codex cuts SessionEnd hooks at 3 s: asking for more only earns a warning.
    expect(s.hooks.SessionEnd[0].hooks[0].timeout).toBe(3);
    expect(s.hooks.Stop[0]).toEqual(mine.hooks.Stop[0]);
    // Claude Code's own setting is not Codex's.
    expect(s.disableSkillShellExecution).toBeUndefined();
    // The rule that lets `factory hook run` (and nothing chained to it) out of Codex's own sandbox.
    expect(fs.readFileSync(rules, 'utf8')).toContain('prefix_rule(pattern = ["factory","hook","run"], decision = "allow"');
    expect(await installHooks(file, 'factory', repo, 'codex')).toEqual({ changed: false, rules });
    expect(await uninstallHooks(file, repo, 'codex')).toEqual({ removed: 6 });
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual(mine);
    expect(fs.existsSync(rules)).toBe(false);
  });

  it('names the command in the rule word by word, writes no rule for a line a shell would expand, and leaves a rule file it did not write', async () => {
    expect(codexRules(`/opt/my factory/bin/factory --data-dir '/srv/fiab data'`)).toContain('pattern = ["/opt/my","factory/bin/factory","--data-dir","/srv/fiab data","hook","run"]');
    expect(shellWords(`npm run -s "fac\\"tory" -- a\\ b`)).toEqual(['npm', 'run', '-s', 'fac"tory', '--', 'a b']);
    for (const line of ['factory; rm -rf ~', 'factory $(id)', 'f "$HOME"', 'f `id`', "f 'open", 'f > x']) expect(shellWords(line), line).toBeUndefined();
    const file = settingsPath('project', repo, dir, 'codex');
    expect(await installHooks(file, 'factory $(x)', repo, 'codex')).toEqual({ changed: true });
    const rules = path.join(repo, '.codex', 'rules', 'factory-in-a-box.rules');
    expect(fs.existsSync(rules)).toBe(false);
    fs.mkdirSync(path.dirname(rules), { recursive: true });
    fs.writeFileSync(rules, 'prefix_rule(pattern = ["git"], decision = "prompt")\n');
    await expect(installHooks(file, 'factory', repo, 'codex')).rejects.toThrow(/not written by factory hooks install/);
    await uninstallHooks(file, repo, 'codex');
    expect(fs.readFileSync(rules, 'utf8')).toContain('"git"');
  });

  it('refuses a .codex that links outside the repository and writes nothing there', async () => {
    const elsewhere = path.join(dir, 'elsewhere');
    fs.mkdirSync(elsewhere);
    fs.symlinkSync(elsewhere, path.join(repo, '.codex'));
    await expect(installHooks(path.join(repo, '.codex', 'hooks.json'), 'factory', repo, 'codex')).rejects.toThrow(/\.codex is a symlink to .*outside the repository/);
    expect(fs.readdirSync(elsewhere)).toEqual([]);
  });
});

function sink() {
  let text = '';
  const stream = new Writable({ write: (c: Buffer, _e, cb) => ((text += c.toString('utf8')), cb()) });
  return { stream, text: () => text };
}

/** The app as the hook reaches it: it knows session s1 (repository `repo`); `fail` makes it throw. */
function scriptedApp(fail?: Error): FactoryClient {
  return {
    call: async (method: string, input: { sessionId: string }) => {
      if (fail) throw fail;
      if (method !== 'sessions.info') throw new Error(`unexpected call ${method}`);
      if (input.sessionId !== 's1') throw new FactoryError('SessionNotFound', `no sandbox is recorded for session ${input.sessionId}`);
      return { taskId: 't1', repoPath: repo };
    },
    close: () => {},
  } as unknown as FactoryClient;
}

/** Codex runs the hook: its PreToolUse input on stdin (the fields 0.171 sends), our answer and status back. */
async function preToolUse(toolName: string, toolInput: Record<string, unknown>, opts: { session?: string; fail?: Error; cwd?: string; agentId?: string } = {}) {
  const input = {
    session_id: opts.session ?? 's1', turn_id: 'turn-1', ...(opts.agentId ? { agent_id: opts.agentId, agent_type: 'default' } : {}), transcript_path: null,
    cwd: opts.cwd ?? path.join(repo, 'src'), hook_event_name: 'PreToolUse',
    model: 'gpt-x', permission_mode: 'bypassPermissions', tool_name: toolName, tool_input: toolInput, tool_use_id: 'exec-1',
  };
  const out = sink();
  const err = sink();
  const code = await runCli(['hook', 'pre-tool-use', '--agent', 'codex', '--via', 'factory'], { stdout: out.stream, stderr: err.stream, stdin: Readable.from([Buffer.from(JSON.stringify(input))]) }, { connect: async () => scriptedApp(opts.fail) });
  return { code, answer: out.text() ? (JSON.parse(out.text()).hookSpecificOutput as Record<string, any>) : undefined, stderr: err.text() };
}

describe('factory hook pre-tool-use --agent codex', () => {
  it("routes Codex's shell call (tool_name Bash) into the sandbox by rewriting its command, in the session's folder", async () => {
    fs.mkdirSync(path.join(repo, 'src'));
    const r = await preToolUse('Bash', { command: 'touch marker; cat /etc/machine-id' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.answer!.permissionDecision).toBe('allow');
    const line = r.answer!.updatedInput.command as string;
    expect(line).toMatch(/^factory hook run [A-Za-z0-9_-]+$/);
    // Codex puts no limit on a command: 30 minutes in the sandbox, and no field Codex's shell tool lacks.
    expect(parseRoutedCommand(line.split(' ').pop()!)).toEqual({ s: 's1', c: 'touch marker; cat /etc/machine-id', d: 'src', t: 1800 });
    expect(Object.keys(r.answer!.updatedInput)).toEqual(['command']);
  });

  it("routes by the shell call's workdir (Codex sends it as cwd): outside the repository, to its top; a subagent's call carries its agent_id", async () => {
    const outside = await preToolUse('Bash', { command: 'pwd' }, { cwd: os.tmpdir() });
    expect(parseRoutedCommand((outside.answer!.updatedInput.command as string).split(' ').pop()!)).toMatchObject({ c: 'pwd', d: '' });
    const sub = await preToolUse('Bash', { command: 'pwd' }, { agentId: '01a23ab0-a82a-7c62-8199-aa0080d74b60' });
    expect(parseRoutedCommand((sub.answer!.updatedInput.command as string).split(' ').pop()!)).toMatchObject({ a: '01a23ab0-a82a-7c62-8199-aa0080d74b60' });
  });

  it('lets the subagent and goal tools go on undecided (namespace glued to the name, as 0.171 sends it) and denies the MCP resource tools', async () => {
    for (const name of ['collaborationspawn_agent', 'collaborationwait_agent', 'create_goal', 'spawn_agent']) {
      const r = await preToolUse(name, { task_name: 't', message: 'm' });
      expect(r.code, name).toBe(0);
      expect(r.answer, name).toEqual({ hookEventName: 'PreToolUse' });
    }
    const mcp = await preToolUse('read_mcp_resource', { server: 'files', uri: 'file:///etc/passwd' });
    expect(mcp.answer!.permissionDecision).toBe('deny');
    expect(mcp.answer!.permissionDecisionReason).toContain('MCP server runs on this computer');
    // A namespace alone, or a lookalike, is not let through.
    expect((await preToolUse('collaborationrm_rf', {})).answer!.permissionDecision).toBe('deny');
  });

  it('lets apply_patch change files inside the repository, and denies a patch that names a file outside it or inside .git, naming it', async () => {
    const inside = await preToolUse('apply_patch', { command: '*** Begin Patch\n*** Add File: notes/a.txt\n+hi\n*** Update File: ../README.md\n@@\n-a\n+b\n*** End Patch\n' });
    expect(inside.code, inside.stderr).toBe(0);
    // No decision: Codex's own approval rules apply as usual.
    expect(inside.answer).toEqual({ hookEventName: 'PreToolUse' });
    const outside = await preToolUse('apply_patch', { command: '*** Begin Patch\n*** Add File: notes/ok.txt\n+x\n*** Update File: ../../elsewhere.txt\n@@\n-a\n+b\n*** End Patch\n' });
    expect(outside.answer!.permissionDecision).toBe('deny');
    expect(outside.answer!.permissionDecisionReason).toMatch(/outside the repository.*checked as Write of "\.\.\/\.\.\/elsewhere\.txt"/s);
    const git = await preToolUse('apply_patch', { command: '*** Begin Patch\n*** Add File: ../.git/hooks/pre-commit\n+#!/bin/sh\n*** End Patch\n' });
    expect(git.answer!.permissionDecisionReason).toContain('inside .git');
    // Codex's own hooks and config: a changed hooks.json would switch the hooks off until the user reviews it again.
    for (const file of ['../.codex/hooks.json', '../.CODEX./config.toml']) {
      const own = await preToolUse('apply_patch', { command: `*** Begin Patch\n*** Update File: ${file}\n@@\n-a\n+b\n*** End Patch\n` });
      expect(own.answer!.permissionDecision, file).toBe('deny');
      expect(own.answer!.permissionDecisionReason).toContain('inside .codex');
    }
    const none = await preToolUse('apply_patch', { command: 'rm -rf /' });
    expect(none.answer!.permissionDecisionReason).toContain('names no file');
  });

  it('judges view_image as a read of its path, and denies a tool it does not know', async () => {
    expect((await preToolUse('view_image', { path: '/etc/shadow' })).answer!.permissionDecisionReason).toContain('outside the repository');
    expect((await preToolUse('view_image', { path: 'logo.png' })).answer).toEqual({ hookEventName: 'PreToolUse' });
    expect((await preToolUse('mcp__files__write', { path: 'x' })).answer!.permissionDecisionReason).toContain('MCP server runs on this computer');
  });

  it('a session without a sandbox gets its shell call denied with what to do; an app that fails blocks the call with status 2 and why', async () => {
    const orphan = await preToolUse('Bash', { command: 'id' }, { session: 'other' });
    expect(orphan.code).toBe(0);
    expect(orphan.answer!.permissionDecision).toBe('deny');
    expect(orphan.answer!.permissionDecisionReason).toContain('Restart Codex in this repository');
    expect(orphan.answer!.permissionDecisionReason).not.toContain('Claude Code');
    const broken = await preToolUse('Bash', { command: 'id' }, { fail: new Error('socket closed') });
    expect(broken.code).toBe(2);
    // Codex blocks on status 2 only with a reason on stderr.
    expect(broken.stderr).toContain('socket closed');
  });
});

describe('patchFiles', () => {
  it('lists every file a patch adds, updates, deletes or moves to', () => {
    expect(patchFiles('*** Begin Patch\r\n*** Add File: a b.txt\r\n+x\r\n*** Update File: c.txt\n*** Move to: d/e.txt\n*** Delete File: f\n*** End Patch')).toEqual(['a b.txt', 'c.txt', 'd/e.txt', 'f']);
  });
});
