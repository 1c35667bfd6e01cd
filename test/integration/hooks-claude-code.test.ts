// The Claude Code session hooks with the real Claude Code CLI on this host, in
// headless mode (-p), against the local model stub (the one double: no model
// API exists here), and the real app with real sandboxes under QEMU. A user
// runs `factory hooks install --project` in a repository, then Claude Code:
// the session start gives the session a sandbox (QEMU running, task listed)
// and tells the model how to use it; the model's Bash call runs
// `factory exec <task> -- sh -c 'echo hi > file'`; the session end runs the
// leak check and leaves no QEMU process and no overlay. A session that copies
// the credential into the sandbox gets exit 2 naming it; a Claude Code killed
// mid-session loses its sandbox within the grace period.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import { FactoryClient } from '../../main/cli/client.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { AnthropicStub, type RecordedRequest, type StubReply } from '../support/anthropic-stub.js';
import { claudeCodeBinary } from '../support/claude-code-host.js';
import { CLI_ENTRY, ROOT, runCli, stopApp } from '../support/cli.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';

const LEAK_VALUE = 'sk-ant-api03-hooktest-Zq8wPl2xVn4';
const GRACE_SEC = 5;

let binary: string | undefined;
let dataDir: string;
let root: string;
let repo: FixtureRepo;
let stub: AnthropicStub;
let client: FactoryClient;
let credentialId: string;
let wrapperLog: string;
/** What the model does in the current session: the shell line it runs in the sandbox. */
let sandboxLine = '';
let firstTurnHeld: Promise<void> | undefined;
/** Claude Code processes started here: a failed test must not leave one running. */
const started: ChildProcess[] = [];

interface Call {
  args: string;
  status: number;
  stderr: string;
}

/** Every `factory` invocation (hooks and the model's Bash calls), as the wrapper logged it. */
function calls(): Call[] {
  if (!fs.existsSync(wrapperLog)) return [];
  return fs
    .readFileSync(wrapperLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [args, status, err] = l.split('\t');
      return { args: args!, status: Number(status), stderr: Buffer.from(err ?? '', 'base64').toString('utf8') };
    });
}

const hookCalls = (which: string) => calls().filter((c) => c.args.replace(/^--data-dir \S+ /, '') === `hook ${which}`);

/** The model: it reads the task id from the context SessionStart gave it, runs one Bash call in the sandbox, then stops. */
function model(req: RecordedRequest): StubReply {
  const body = req.rawBody;
  if (body.includes('"tool_result"')) return { text: 'Done in the sandbox.' };
  const m = /factory exec ([A-Za-z0-9._-]+) --/.exec(body);
  if (!m) return { text: 'NO-SANDBOX-CONTEXT' };
  const reply: StubReply = {
    toolUses: [{ name: 'Bash', input: { command: `factory exec ${m[1]} -- sh -c ${JSON.stringify(sandboxLine).replace(/"/g, "'")}`, description: 'Run in the sandbox' } }],
  };
  return firstTurnHeld ? { ...reply, hold: firstTurnHeld } : reply;
}

function startClaude(): { child: ChildProcess; done: Promise<{ code: number | null; out: string }> } {
  const env = {
    HOME: path.join(root, 'home'),
    PATH: `${path.join(root, 'bin')}:/usr/local/bin:/usr/bin:/bin`,
    LANG: 'C.UTF-8',
    ANTHROPIC_BASE_URL: stub.url,
    ANTHROPIC_API_KEY: 'fiab-placeholder-hooks',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    // Claude Code gives SessionEnd hooks at most 60 s unless told more; a leak check under emulation can take longer.
    CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS: '600000',
  };
  // Not as root with --dangerously-skip-permissions (refused): the one tool it needs is allowed instead.
  const child = spawn(binary!, ['-p', 'Create the file in the sandbox.', '--output-format', 'stream-json', '--verbose', '--allowedTools', 'Bash'], {
    cwd: repo.dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  started.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const done = new Promise<{ code: number | null; out: string }>((resolve) => child.on('close', (code) => resolve({ code, out })));
  return { child, done };
}

async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const overlays = () => (fs.existsSync(path.join(dataDir, 'sandboxes')) ? fs.readdirSync(path.join(dataDir, 'sandboxes'), { recursive: true }).map(String).filter((f) => f.endsWith('.qcow2')) : []);
const sessionTasks = async () => (await client.call('tasks.list', {})).filter((t: Task) => t.agent === 'claude-session');

beforeAll(async () => {
  binary = await claudeCodeBinary({ allowFetch: process.env.FACTORY_OFFLINE !== '1' });
  if (!binary) return;
  await testImage();
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-cc-'));
  dataDir = path.join(root, 'data');
  wrapperLog = path.join(root, 'factory-calls.log');
  fs.mkdirSync(path.join(root, 'home'));
  fs.mkdirSync(path.join(root, 'bin'));
  repo = await makeRepo({ files: { 'README.md': '# Fixture\n' } });
  // `factory` on Claude Code's PATH, as the package's bin would be; it logs each call's status and stderr for the test.
  const tsx = path.join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs');
  fs.writeFileSync(
    path.join(root, 'bin', 'factory'),
    [
      '#!/bin/bash',
      'err=$(mktemp)',
      `${JSON.stringify(process.execPath)} --import ${JSON.stringify(tsx)} ${JSON.stringify(CLI_ENTRY)} --data-dir ${JSON.stringify(dataDir)} "$@" 2>"$err"`,
      's=$?',
      'cat "$err" >&2',
      `printf '%s\\t%s\\t%s\\n' "$*" "$s" "$(base64 -w0 < "$err")" >> ${JSON.stringify(wrapperLog)}`,
      'rm -f "$err"',
      'exit $s',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  stub = await AnthropicStub.start({ script: (req) => model(req), sideReply: { text: 'ok' } });
  // The app, started by the CLI with a short grace period; the credential every sandbox could use.
  const ls = await runCli(dataDir, ['ls'], { env: { FACTORY_SESSION_GRACE_SEC: String(GRACE_SEC) } });
  expect(ls.code, ls.stderr).toBe(0);
  client = await FactoryClient.connect(path.join(dataDir, 'factory.sock'));
  credentialId = (await client.call('credentials.set', { kind: 'anthropic', label: 'Anthropic', value: LEAK_VALUE, target: { upstream: 'https://api.anthropic.com' } })).id;
}, 10 * 60_000);

afterAll(async () => {
  for (const c of started) {
    if (c.exitCode === null && c.signalCode === null) {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
  client?.close();
  if (dataDir) await stopApp(dataDir);
  await stub?.close();
  repo?.cleanup();
  if (root && process.env.FACTORY_KEEP_TEST_DIR !== '1') fs.rmSync(root, { recursive: true, force: true });
});

describe.skipIf(process.platform !== 'linux')('Claude Code session hooks, real CLI and real sandboxes', () => {
  it('hooks install --project writes the three hooks into the repository\'s .claude/settings.json', async (ctx) => {
    if (!binary) ctx.skip(); // offline and not cached: FACTORY_OFFLINE=1 without a fetched CLI
    const r = await new Promise<number | null>((resolve) => spawn(path.join(root, 'bin', 'factory'), ['hooks', 'install', '--project'], { cwd: repo.dir, stdio: 'ignore' }).on('exit', resolve));
    expect(r).toBe(0);
    const settings = JSON.parse(fs.readFileSync(path.join(repo.dir, '.claude', 'settings.json'), 'utf8'));
    expect(Object.keys(settings.hooks).sort()).toEqual(['SessionEnd', 'SessionStart', 'Stop']);
    expect(settings.hooks.SessionStart[0].hooks[0].command).toMatch(/^factory (--data-dir \S+ )?hook session-start # added by factory hooks install$/);
  });

  it('a session gets a sandbox, the model works in it through factory exec, and the session end checks and destroys it', async (ctx) => {
    if (!binary) ctx.skip();
    sandboxLine = 'echo hi > file && cat file';
    let release!: () => void;
    firstTurnHeld = new Promise<void>((r) => (release = r));
    const t0 = Date.now();
    const claude = startClaude();
    // The model's first turn comes after SessionStart: the sandbox is up and listed by then.
    await waitFor('the first model request', () => stub.requests.find((r) => r.rawBody.includes('factory exec')), 5 * 60_000);
    const startMs = Date.now() - t0;
    const [task] = await sessionTasks();
    expect(task?.sandbox.status).toBe('running');
    expect(task?.phase).toBe('running');
    expect(qemuProcessesUnder(dataDir)).toHaveLength(1);
    // The app watches the Claude Code process itself, not the shell or the factory script between it and the hook.
    const records = JSON.parse(fs.readFileSync(path.join(dataDir, 'sessions.json'), 'utf8')) as { sessions: Array<{ taskId: string; pid: number }> };
    expect(records.sessions.find((s) => s.taskId === task!.id)?.pid).toBe(claude.child.pid);
    // The session lives on past the grace period (the model is slow): the reaper must leave its sandbox alone.
    await new Promise((r) => setTimeout(r, (GRACE_SEC + 3) * 1000));
    expect((await client.call('tasks.get', { taskId: task!.id })).sandbox.status).toBe('running');
    firstTurnHeld = undefined;
    release();
    const { code, out } = await claude.done;
    const totalMs = Date.now() - t0;
    expect(code, out.slice(-2000)).toBe(0);
    const byArgs = (s: string) => calls().filter((c) => c.args.replace(/^--data-dir \S+ /, '').startsWith(s));
    expect(byArgs('hook session-start').map((c) => c.status)).toEqual([0]);
    const exec = byArgs(`exec ${task!.id}`);
    expect(exec.map((c) => c.status)).toEqual([0]);
    // The Bash call's output came back to the model from the sandbox.
    expect(stub.requests.some((r) => r.rawBody.includes('"tool_result"') && /\bhi\b/.test(r.rawBody))).toBe(true);
    expect(byArgs('hook stop').map((c) => c.status)).toEqual([0]);
    const end = byArgs('hook session-end');
    expect(end.map((c) => c.status), end[0]?.stderr).toEqual([0]);
    expect(end[0]!.stderr).toContain(`session sandbox ${task!.id} destroyed`);
    const report = await client.call('leakcheck.get', { taskId: task!.id });
    expect(report?.verdict).toBe('clean');
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
    expect(overlays()).toEqual([]);
    expect((await client.call('tasks.get', { taskId: task!.id })).sandbox.status).toBe('destroyed');
    console.log(`session start → first model turn: ${startMs} ms; whole session incl. leak check and teardown: ${totalMs} ms`);
  }, 8 * 60_000);

  it('a session that copies the credential into its sandbox: the hooks exit 2 naming it, and the sandbox is kept', async (ctx) => {
    if (!binary) ctx.skip();
    fs.writeFileSync(wrapperLog, '');
    sandboxLine = `echo ${LEAK_VALUE} > leaked.txt && sync`;
    const { code, out } = await startClaude().done;
    expect(code, out.slice(-2000)).toBe(0);
    const stop = hookCalls('stop');
    if (stop[0]?.status !== 2) {
      for (const t of await sessionTasks()) if (t.sandbox.status === 'running') await client.call('tasks.destroy', { taskId: t.id });
    }
    expect(stop[0]?.status, stop[0]?.stderr).toBe(2);
    expect(stop[0]!.stderr).toContain(`credential ${credentialId}`);
    // Claude Code fed the finding back to the model (exit 2 on Stop); told once, it was not held again.
    expect(stub.requests.some((r) => r.rawBody.includes('LEAK:'))).toBe(true);
    const end = hookCalls('session-end');
    expect(end.map((c) => c.status)).toEqual([2]);
    expect(end[0]!.stderr).toMatch(new RegExp(`LEAK:[\\s\\S]*credential ${credentialId}`));
    const [task] = (await sessionTasks()).filter((t) => t.sandbox.status === 'running');
    try {
      expect((await client.call('leakcheck.get', { taskId: task!.id }))?.verdict).toBe('leak');
    } finally {
      for (const t of await sessionTasks()) if (t.sandbox.status === 'running') await client.call('tasks.destroy', { taskId: t.id });
    }
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
  }, 8 * 60_000);

  it('a Claude Code killed mid-session loses its sandbox within the grace period', async (ctx) => {
    if (!binary) ctx.skip();
    fs.writeFileSync(wrapperLog, '');
    sandboxLine = 'sleep 1';
    let release!: () => void;
    firstTurnHeld = new Promise<void>((r) => (release = r));
    const before = stub.requests.length;
    const claude = startClaude();
    await waitFor('the first model request', () => stub.requests.slice(before).find((r) => r.rawBody.includes('factory exec')), 5 * 60_000);
    const task = (await sessionTasks()).find((t) => t.sandbox.status === 'running');
    expect(task).toBeDefined();
    process.kill(-claude.child.pid!, 'SIGKILL');
    await claude.done;
    const killedAt = Date.now();
    release();
    firstTurnHeld = undefined;
    await waitFor('the sandbox to be reaped', () => qemuProcessesUnder(dataDir).length === 0 || undefined, 90_000);
    const reapMs = Date.now() - killedAt;
    // QEMU ends before the teardown records it: the task says so a moment later.
    await expect.poll(async () => (await client.call('tasks.get', { taskId: task!.id })).sandbox.status, { timeout: 60_000, interval: 250 }).toBe('destroyed');
    expect(overlays()).toEqual([]);
    // No hook ran for the end: the app noticed on its own.
    expect(hookCalls('session-end')).toEqual([]);
    expect(reapMs).toBeGreaterThanOrEqual(GRACE_SEC * 1000 - 500);
    console.log(`killed session reaped after ${reapMs} ms (grace ${GRACE_SEC} s)`);
  }, 8 * 60_000);
});
