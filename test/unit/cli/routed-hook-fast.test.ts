// The hooks on every routed command's path, as Claude Code runs them: the real
// `factory` program in a process of its own, against the app's real socket host
// (its API a recording double: this test is about the CLI's path, not the
// sandbox). PreToolUse and `hook run` must answer without loading the whole CLI
// (no command table, no schema library): a module loader records what the
// process loaded. With no app on the socket they go the whole CLI's way, which
// names the problem and blocks the call.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FactoryApi } from '../../../common/contract.js';
import { FactoryError } from '../../../common/errors.js';
import { routedHookCall } from '../../../main/cli/main.js';
import { parseRoutedCommand } from '../../../main/sessions/tool-policy.js';
import { startSocketHost, type SocketHost } from '../../../main/host/socket/socket-host.js';
import { runCli } from '../../support/cli.js';

let dir: string;
let host: SocketHost | undefined;
let calls: Array<{ method: string; input: unknown }>;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'routed-hook-'));
  calls = [];
});
afterEach(async () => {
  await host?.close();
  host = undefined;
  fs.rmSync(dir, { recursive: true, force: true });
});

async function startApp(repoPath: string): Promise<void> {
  const api = {
    'sessions.info': async (input: { sessionId: string }) => {
      calls.push({ method: 'sessions.info', input });
      if (input.sessionId !== 's1') throw new FactoryError('SessionNotFound', `no session ${input.sessionId}`);
      return { taskId: 't1', repoPath };
    },
    'sessions.subagentStart': async (input: { sessionId: string }) => {
      calls.push({ method: 'sessions.subagentStart', input });
      if (input.sessionId === 'broken') throw new FactoryError('SandboxBootFailed', 'the fork did not boot');
      if (input.sessionId !== 's1') throw new FactoryError('SessionNotFound', `no session ${input.sessionId}`);
      return { task: { id: 't2', baseCommit: 'abcdef0123456789' }, parentTaskId: 't1' };
    },
    'sessions.run': async (input: unknown) => {
      calls.push({ method: 'sessions.run', input });
      return { exitCode: 7, stdout: Buffer.from('out from the sandbox\n').toString('base64'), stderr: Buffer.from('err\n').toString('base64'), stdoutTruncated: false, stderrTruncated: false, timedOut: false, sync: { files: 0, bytes: 0 } };
    },
  } as unknown as FactoryApi;
  host = await startSocketHost({ api, onEvent: () => () => {}, onTerminalData: () => () => {} }, { dataDir: path.join(dir, 'data') });
}

/** Runs the program with a loader that writes every module it loads to a file; returns the result and those modules. */
async function runRecorded(args: string[], stdin = '') {
  const log = path.join(dir, 'loaded.txt');
  const loader = path.join(dir, 'loader.mjs');
  fs.writeFileSync(loader, `import fs from 'node:fs';\nexport async function resolve(s, c, next) { const r = await next(s, c); fs.appendFileSync(${JSON.stringify(log)}, r.url + '\\n'); return r; }\n`);
  const register = path.join(dir, 'register.mjs');
  fs.writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(loader).href)});\n`);
  fs.rmSync(log, { force: true });
  const r = await runCli(path.join(dir, 'data'), args, { stdin, env: { NODE_OPTIONS: `--import ${pathToFileURL(register).href}`, FACTORY_WARM_POOL: '0' }, timeoutMs: 60_000 });
  const loaded = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
  return { ...r, loaded };
}

const heavy = (loaded: string[]) => loaded.filter((u) => /\/cli\/run-cli\.|\/cli\/args\.|\/common\/contract\.|\/node_modules\/zod\//.test(u));

describe('the hooks on a routed command’s path', () => {
  it('PreToolUse routes Bash from the app’s answer without loading the whole CLI', async () => {
    const repo = path.join(dir, 'repo');
    fs.mkdirSync(repo);
    await startApp(repo);
    const input = { session_id: 's1', cwd: repo, hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'touch marker; hostname' } };
    const r = await runRecorded(['hook', 'pre-tool-use', '--via', 'factory'], JSON.stringify(input));
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout).hookSpecificOutput;
    expect(out.permissionDecision).toBe('allow');
    const word = /^factory hook run (\S+)$/.exec(out.updatedInput.command)?.[1];
    expect(parseRoutedCommand(word!)).toMatchObject({ s: 's1', c: 'touch marker; hostname' });
    expect(calls).toEqual([{ method: 'sessions.info', input: { sessionId: 's1' } }]);
    expect(r.loaded.some((u) => u.includes('/cli/hooks/routed-hooks.'))).toBe(true);
    expect(heavy(r.loaded)).toEqual([]);
  });

  it("Codex's PreToolUse routes its shell call the same lean way", async () => {
    const repo = path.join(dir, 'repo');
    fs.mkdirSync(repo);
    await startApp(repo);
    const input = { session_id: 's1', cwd: repo, hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'touch marker; hostname' } };
    const r = await runRecorded(['hook', 'pre-tool-use', '--agent', 'codex', '--via', 'factory'], JSON.stringify(input));
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout).hookSpecificOutput;
    expect(out.permissionDecision).toBe('allow');
    const word = /^factory hook run (\S+)$/.exec(out.updatedInput.command)?.[1];
    // Codex puts no limit on a command: a routed one gets 30 minutes.
    expect(parseRoutedCommand(word!)).toMatchObject({ s: 's1', c: 'touch marker; hostname', t: 1800 });
    expect(r.loaded.some((u) => u.includes('/cli/hooks/codex-hooks.'))).toBe(true);
    expect(heavy(r.loaded)).toEqual([]);
  });

  it('`hook run` passes the sandbox’s output and status through without loading the whole CLI', async () => {
    await startApp(dir);
    const word = Buffer.from(JSON.stringify({ s: 's1', c: 'npm test', d: '.' })).toString('base64url');
    const r = await runRecorded(['hook', 'run', word]);
    expect(r.code).toBe(7);
    expect(r.stdout).toBe('out from the sandbox\n');
    expect(r.stderr).toBe('err\n');
    expect(calls).toEqual([{ method: 'sessions.run', input: { sessionId: 's1', command: 'npm test', dir: '.' } }]);
    expect(heavy(r.loaded)).toEqual([]);
  });

  it('SubagentStart gives the subagent its sandbox without loading the whole CLI', async () => {
    await startApp(dir);
    const input = { session_id: 's1', cwd: dir, hook_event_name: 'SubagentStart', agent_id: 'a1', agent_type: 'Explore' };
    const r = await runRecorded(['hook', 'subagent-start'], JSON.stringify(input));
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout).hookSpecificOutput;
    expect(out.hookEventName).toBe('SubagentStart');
    expect(out.additionalContext).toMatch(/sandbox of its own: .*\(task t2\)/);
    expect(out.additionalContext).toContain('branch factory/s1/a1');
    expect(calls).toEqual([{ method: 'sessions.subagentStart', input: { sessionId: 's1', agentId: 'a1', agentType: 'Explore' } }]);
    expect(r.loaded.some((u) => u.includes('/cli/hooks/subagent-start-hook.'))).toBe(true);
    expect(heavy(r.loaded)).toEqual([]);
  });

  it('SubagentStart on the lean path fails closed as the whole CLI does: the app’s error, a bad field, no agent_id', async () => {
    await startApp(dir);
    const broken = await runRecorded(['hook', 'subagent-start', '--agent', 'codex'], JSON.stringify({ session_id: 'broken', cwd: dir, agent_id: 'a1' }));
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/the subagent-start hook could not give this session its sandbox: SandboxBootFailed: the fork did not boot/);
    expect(calls).toEqual([{ method: 'sessions.subagentStart', input: { sessionId: 'broken', agentId: 'a1', agent: 'codex' } }]);
    calls.length = 0;
    const badId = await runRecorded(['hook', 'subagent-start'], JSON.stringify({ session_id: 's1', cwd: dir, agent_id: 'a/../b' }));
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/HookInputInvalid: the hook input's agent_id: must be 1 to 128/);
    const noAgent = await runRecorded(['hook', 'subagent-start'], JSON.stringify({ session_id: 's1', cwd: dir }));
    expect(noAgent.code).toBe(2);
    expect(noAgent.stderr).toMatch(/the SubagentStart input has no agent_id/);
    const notJson = await runRecorded(['hook', 'subagent-start'], '{"session_id":');
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/HookInputInvalid: the hook input on stdin is not JSON/);
    expect(calls).toEqual([]);
    // A session the app does not know gets no sandbox, and the subagent goes on (as before the hooks).
    const unknown = await runRecorded(['hook', 'subagent-start'], JSON.stringify({ session_id: 'other', cwd: dir, agent_id: 'a1' }));
    expect(unknown.code).toBe(0);
    expect(unknown.stdout).toBe('');
  });

  it('bad input on the lean path still blocks the call and names the field', async () => {
    await startApp(dir);
    const r = await runRecorded(['hook', 'pre-tool-use', '--via', 'factory'], JSON.stringify({ session_id: '../x', cwd: dir, tool_name: 'Bash', tool_input: {} }));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/call is blocked: HookInputInvalid: the hook input's session_id/);
    expect(r.stdout).toBe('');
    expect(calls).toEqual([]);
  });

  it('with no app on the socket, `hook run` goes the whole CLI’s way', async () => {
    const word = Buffer.from(JSON.stringify({ s: 's1', c: 'true', d: '.' })).toString('base64url');
    // --no-start is not a lean form: the whole CLI says no app runs, and the hook blocks.
    const r = await runRecorded(['--no-start', 'hook', 'run', word]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/could not be reached|no Factory in a Box app runs/);
    expect(heavy(r.loaded).length).toBeGreaterThan(0);
  });
});

describe('which command lines take the lean path', () => {
  it.each([
    [['hook', 'pre-tool-use', '--via', 'factory'], { which: 'pre-tool-use', arg: 'factory' }],
    [['--data-dir', '/d', 'hook', 'run', 'abc'], { dataDir: '/d', which: 'run', arg: 'abc' }],
    [['--data-dir=/d', 'hook', 'run', 'abc'], { dataDir: '/d', which: 'run', arg: 'abc' }],
    [['--data-dir', '/d', 'hook', 'pre-tool-use', '--agent', 'codex', '--via', 'f'], { dataDir: '/d', which: 'codex-pre-tool-use', arg: 'f' }],
    [['hook', 'subagent-start'], { which: 'subagent-start', arg: 'claude' }],
    [['--data-dir', '/d', 'hook', 'subagent-start', '--agent', 'codex'], { dataDir: '/d', which: 'subagent-start', arg: 'codex' }],
  ])('%j', (argv, want) => expect(routedHookCall(argv)).toEqual(want));

  it.each([[['hook', 'run']], [['hook', 'run', '--help']], [['hook', 'run', 'a', 'b']], [['--json', 'hook', 'run', 'a']], [['hook', 'stop']], [['hook', 'pre-tool-use']], [['hook', 'pre-tool-use', '--agent', 'claude', '--via', 'f']], [['--data-dir=', 'hook', 'run', 'a']], [['hook', 'subagent-start', '--agent', 'claude']], [['hook', 'subagent-start', '--agent', 'gemini']], [['hook', 'subagent-start', 'x']], [['exec', 't1', '--', 'true']]])('%j goes to the whole CLI', (argv) => {
    expect(routedHookCall(argv)).toBeUndefined();
  });
});
