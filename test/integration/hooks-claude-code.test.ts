// The Claude Code session hooks with the real Claude Code CLI on this host, in
// headless mode (-p), against the local model stub (the one double: no model
// API exists here), and the real app with real sandboxes under QEMU. A user
// runs `factory hooks install --project` in a repository, then Claude Code:
// the session start gives the session a sandbox (QEMU running, task listed)
// and tells the model about it; every Bash call of the model is routed into
// the sandbox by the PreToolUse hook (nothing runs on this computer: a marker
// it touches does not appear here, and it prints the sandbox's machine id), a
// file the Write tool made here reaches the sandbox before the next command,
// a tool that would run here (WebFetch) is denied with the reason shown
// to the model, and neither a git-ignored .env nor .git/config is read or found
// by a Grep; the session end runs the leak check and leaves no QEMU
// process and no overlay. A session that copies
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
import { runCli, stopApp } from '../support/cli.js';
import { factoryCalls, killStarted, waitFor, writeFactoryWrapper } from '../support/factory-wrapper.js';
import { testImage } from '../support/image.js';
import { gitIn, makeRepo, type FixtureRepo } from '../support/repo.js';

const LEAK_VALUE = 'sk-ant-api03-hooktest-Zq8wPl2xVn4';
/** In the repository's git-ignored .env, on this computer only: the model must never see it. */
const IGNORED_SECRET = 'HOOK_SECRET=sk-ignored-Rt5mQ2wXc8';
const GRACE_SEC = 5;

let binary: string | undefined;
let dataDir: string;
let root: string;
let repo: FixtureRepo;
let stub: AnthropicStub;
let client: FactoryClient;
let credentialId: string;
let wrapperLog: string;
let firstTurnHeld: Promise<void> | undefined;
/** Claude Code processes started here: a failed test must not leave one running. */
const started: ChildProcess[] = [];

/** Every `factory` invocation (hooks and the model's Bash calls), as the wrapper logged it. */
const calls = () => factoryCalls(wrapperLog);

const hookCalls = (which: string) => calls().filter((c) => c.args.replace(/^--data-dir \S+ /, '') === `hook ${which}`);

/** What the model does in the current session, turn by turn, once the session start told it about its sandbox. */
let plan: StubReply[] = [];
/** What a subagent does, turn by turn: a request whose first message is the Agent tool's prompt is the subagent's. */
let subPlan: StubReply[] = [];
const SUBAGENT_PROMPT = 'SUBAGENT-WORK: commit a file in your sandbox.';

function model(req: RecordedRequest, ctx: { assistantTurns: number }): StubReply {
  const first = (req.body as { messages?: Array<{ content?: unknown }> }).messages?.[0];
  if (JSON.stringify(first?.content ?? '').includes('SUBAGENT-WORK')) return subPlan[ctx.assistantTurns] ?? { text: 'Subagent done.' };
  if (!req.rawBody.includes('This session has its own sandbox')) return { text: 'NO-SANDBOX-CONTEXT' };
  const reply = plan[ctx.assistantTurns] ?? { text: 'Done in the sandbox.' };
  return firstTurnHeld && ctx.assistantTurns === 0 ? { ...reply, hold: firstTurnHeld } : reply;
}

const bash = (command: string): StubReply => ({ toolUses: [{ name: 'Bash', input: { command, description: 'Run in the sandbox' } }] });

/** The tool results the model received, in order (text only). */
function toolResults(): string[] {
  const last = [...stub.requests].reverse().find((r) => r.rawBody.includes('"tool_result"'));
  if (!last) return [];
  const body = last.body as { messages?: Array<{ content?: unknown }> };
  const out: string[] = [];
  for (const m of body.messages ?? []) {
    if (!Array.isArray(m.content)) continue;
    for (const c of m.content as Array<{ type?: string; content?: unknown }>) {
      if (c.type !== 'tool_result') continue;
      out.push(typeof c.content === 'string' ? c.content : JSON.stringify(c.content));
    }
  }
  return out;
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
  // WebFetch, Read and Grep are allowed too, so that a refusal or a change can only come from the hook.
  const child = spawn(binary!, ['-p', 'Work in the sandbox.', '--output-format', 'stream-json', '--verbose', '--allowedTools', 'Bash,Write,WebFetch,Read,Grep'], {
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
  repo = await makeRepo({ files: { 'README.md': '# Fixture\nHOOK_SECRET goes in .env\n', '.gitignore': '.env\n' } });
  fs.writeFileSync(path.join(repo.dir, '.env'), `${IGNORED_SECRET}\n`);
  // And in the repository's git config, which Claude Code's Grep leaves out only until a glob of the model's matches it.
  gitIn(repo.dir, ['config', 'hooktest.note', 'HOOK_SECRET=sk-gitconfig-Wq3nV7']);
  // `factory` on Claude Code's PATH, as the package's bin would be; it logs each call's status and stderr for the test.
  writeFactoryWrapper(path.join(root, 'bin', 'factory'), { dataDir, log: wrapperLog });
  stub = await AnthropicStub.start({ script: (req, ctx) => model(req, ctx), sideReply: { text: 'ok' } });
  // The app, started by the CLI with a short grace period; the credential every sandbox could use.
  const ls = await runCli(dataDir, ['ls'], { env: { FACTORY_SESSION_GRACE_SEC: String(GRACE_SEC) } });
  expect(ls.code, ls.stderr).toBe(0);
  client = await FactoryClient.connect(path.join(dataDir, 'factory.sock'));
  credentialId = (await client.call('credentials.set', { kind: 'anthropic', label: 'Anthropic', value: LEAK_VALUE, target: { upstream: 'https://api.anthropic.com' } })).id;
}, 10 * 60_000);

afterAll(async () => {
  killStarted(started);
  client?.close();
  if (dataDir) await stopApp(dataDir);
  await stub?.close();
  repo?.cleanup();
  if (root && process.env.FACTORY_KEEP_TEST_DIR !== '1') fs.rmSync(root, { recursive: true, force: true });
});

describe.skipIf(process.platform !== 'linux')('Claude Code session hooks, real CLI and real sandboxes', () => {
  it('hooks install --project writes its six hooks into the repository\'s .claude/settings.json', async (ctx) => {
    if (!binary) ctx.skip(); // offline and not cached: FACTORY_OFFLINE=1 without a fetched CLI
    const r = await new Promise<number | null>((resolve) => spawn(path.join(root, 'bin', 'factory'), ['hooks', 'install', '--project'], { cwd: repo.dir, stdio: 'ignore' }).on('exit', resolve));
    expect(r).toBe(0);
    const settings = JSON.parse(fs.readFileSync(path.join(repo.dir, '.claude', 'settings.json'), 'utf8'));
    expect(Object.keys(settings.hooks).sort()).toEqual(['PreToolUse', 'SessionEnd', 'SessionStart', 'Stop', 'SubagentStart', 'SubagentStop']);
    expect(settings.hooks.SessionStart[0].hooks[0].command).toMatch(/^factory (--data-dir \S+ )?hook session-start # set disableSkillShellExecution # added by factory hooks install$/);
  });

  it('a session gets a sandbox; every command runs there, edits made here reach it, a tool that would run here is denied; the end checks and destroys it', async (ctx) => {
    if (!binary) ctx.skip();
    const marker = path.join(root, 'MARKER-must-not-appear-here');
    const hostMachineId = fs.existsSync('/etc/machine-id') ? fs.readFileSync('/etc/machine-id', 'utf8').trim() : 'no-machine-id-here';
    plan = [
      bash(`touch ${marker}; hostname; cat /etc/machine-id; pwd`),
      { toolUses: [{ name: 'Write', input: { file_path: path.join(repo.dir, 'notes', 'from-host.txt'), content: 'written with the Write tool on the host\n' } }] },
      // A `cd` of its own, as models do: the next command runs there, as with Claude Code's own Bash tool.
      bash('cd notes'),
      bash('pwd && cat from-host.txt && cd .. && git status --short'),
      { toolUses: [{ name: 'WebFetch', input: { url: 'https://example.com/', prompt: 'summarise' } }] },
      // The git-ignored .env, read directly, and searched with a glob that overrides ripgrep's ignore rules.
      { toolUses: [{ name: 'Read', input: { file_path: path.join(repo.dir, '.env') } }] },
      { toolUses: [{ name: 'Grep', input: { pattern: 'HOOK_SECRET', glob: '*', output_mode: 'content' } }] },
    ];
    let release!: () => void;
    firstTurnHeld = new Promise<void>((r) => (release = r));
    const t0 = Date.now();
    const claude = startClaude();
    // The model's first turn comes after SessionStart: the sandbox is up and listed by then.
    await waitFor('the first model request', () => stub.requests.find((r) => r.rawBody.includes('This session has its own sandbox')), 5 * 60_000);
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
    const byArgs = (s: string) => calls().filter((c) => c.args.replace(/^(--data-dir \S+ )+/, '').startsWith(s));
    expect(byArgs('hook session-start').map((c) => c.status)).toEqual([0]);
    // Every tool call went through the hook; the three Bash calls ran as routed commands.
    expect(byArgs('hook pre-tool-use').map((c) => c.status)).toEqual([0, 0, 0, 0, 0, 0, 0]);
    expect(byArgs('hook run').map((c) => c.status)).toEqual([0, 0, 0]);
    const results = toolResults();
    // 1. Nothing ran here: no marker; the hostname and machine id are the sandbox's, the folder is the sandbox's copy.
    expect(fs.existsSync(marker)).toBe(false);
    const [first] = results;
    expect(first).toMatch(/\b[0-9a-f]{32}\b/);
    expect(first).not.toContain(hostMachineId);
    expect(first).not.toContain(os.hostname());
    expect(first).toContain('/work/repo');
    // 2. The Write tool wrote here, on the user's working tree…
    expect(fs.readFileSync(path.join(repo.dir, 'notes', 'from-host.txt'), 'utf8')).toBe('written with the Write tool on the host\n');
    // …and the next routed commands saw the file in the sandbox, in the folder the `cd` before them left.
    expect(results[3]).toContain('/work/repo/notes\n');
    expect(results[3]).toContain('written with the Write tool on the host');
    expect(results[3]).toContain('?? notes/');
    // 3. WebFetch was denied by the hook, and the model was told why and what to do instead.
    expect(results[4]).toMatch(/not run on this computer.*curl through the Bash tool/s);
    // 4. The ignored .env was neither read nor searched: the Read refused, the Grep found the tracked line only
    //    (not .git/config either).
    expect(results[5]).toContain('git ignores ".env", so it stays out of the sandbox');
    expect(results[6]).toContain('README.md:2:HOOK_SECRET goes in .env');
    expect(results[6]).not.toContain('.git');
    expect(stub.requests.filter((r) => r.rawBody.includes('sk-ignored-') || r.rawBody.includes('sk-gitconfig-'))).toEqual([]);
    expect(byArgs('hook stop').map((c) => c.status)).toEqual([0]);
    const end = byArgs('hook session-end');
    expect(end.map((c) => c.status), end[0]?.stderr).toEqual([0]);
    expect(end[0]!.stderr).toContain(`session sandbox ${task!.id} destroyed`);
    const report = await client.call('leakcheck.get', { taskId: task!.id });
    expect(report?.verdict).toBe('clean');
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
    expect(overlays()).toEqual([]);
    expect((await client.call('tasks.get', { taskId: task!.id })).sandbox.status).toBe('destroyed');
    // The file the agent wrote here came back through the review too (the sandbox had it).
    const diff = await runCli(dataDir, ['diff', task!.id]);
    expect(diff.stdout).toContain('notes/from-host.txt');
    console.log(`session start → first model turn: ${startMs} ms; whole session incl. leak check and teardown: ${totalMs} ms`);
  }, 8 * 60_000);

  it('a subagent gets a sandbox of its own: its command runs on another machine, its commit arrives in the session sandbox as a branch, and its sandbox is gone after it stops', async (ctx) => {
    if (!binary) ctx.skip();
    fs.writeFileSync(wrapperLog, '');
    const machineId = /\b[0-9a-f]{32}\b/;
    plan = [
      // A file only the session's sandbox has: a subagent forked from it has it too.
      bash('echo SESSION-ID $(cat /etc/machine-id); echo made-in-the-session > ~/fork-marker'),
      { toolUses: [{ name: 'Agent', input: { description: 'Commit in a sandbox', prompt: SUBAGENT_PROMPT, subagent_type: 'general-purpose', run_in_background: false } }] },
      bash("git branch --list 'factory/*' && git log --all --format=%s | sort -u && ls"),
    ];
    subPlan = [bash('echo SUB-ID $(cat /etc/machine-id) FORK=$(cat ~/fork-marker 2>/dev/null || echo none) && echo from-the-subagent > sub.txt && git add sub.txt && git commit -qm "work of the subagent" && echo committed')];
    // The most QEMUs seen at once, with their command lines (to tell which one was too many).
    const peak: { qemu: number; seen: string[] } = { qemu: 0, seen: [] };
    const watch = setInterval(() => {
      const now = qemuProcessesUnder(dataDir);
      if (now.length > peak.qemu) Object.assign(peak, { qemu: now.length, seen: now.map((q) => q.cmdline.replaceAll(dataDir, '<data>').slice(0, 400)) });
    }, 500);
    let out = '';
    try {
      const r = await startClaude().done;
      out = r.out;
      expect(r.code, out.slice(-2000)).toBe(0);
    } finally {
      clearInterval(watch);
    }
    const all = stub.requests.map((q) => q.rawBody).join('\n');
    const sessionId = /SESSION-ID ([0-9a-f]{32})/.exec(all)?.[1];
    const subId = /SUB-ID ([0-9a-f]{32})/.exec(all)?.[1];
    expect(sessionId, 'the session printed its machine id').toMatch(machineId);
    expect(subId, 'the subagent printed its machine id').toMatch(machineId);
    // Two machines: the subagent's command did not run in the session's sandbox (nor here).
    expect(subId).not.toBe(sessionId);
    // Forked from the session's sandbox as it was: its file is there, without a seed or a setup of its own.
    expect(/SUB-ID [0-9a-f]{32} FORK=([a-z-]+)/.exec(all)?.[1]).toBe('made-in-the-session');
    const byArgs = (s: string) => calls().filter((c) => c.args.replace(/^(--data-dir \S+ )+/, '').startsWith(s));
    expect(byArgs('hook subagent-start').map((c) => c.status)).toEqual([0]);
    const stop = byArgs('hook subagent-stop');
    expect(stop.map((c) => c.status), stop[0]?.stderr).toEqual([0]);
    // Two machines at once, no more: the session's and its subagent's.
    expect(peak.qemu, `seen at once:\n${peak.seen.join('\n')}`).toBe(2);
    // The subagent's commit is in the session's sandbox as its branch (the session's next command saw it).
    const results = toolResults();
    const last = results[results.length - 1]!;
    expect(last).toMatch(/factory\/[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+/);
    expect(last).toContain('work of the subagent');
    // …but not in the session's working tree: it is a branch, not a change to the session's own files.
    expect(last).not.toContain('sub.txt');
    expect(fs.existsSync(path.join(repo.dir, 'sub.txt'))).toBe(false);
    // After the session: every sandbox is gone, the subagent's with the rest.
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
    const subTasks = (await sessionTasks()).filter((t) => t.title.includes('subagent'));
    expect(subTasks).toHaveLength(1);
    expect(subTasks[0]!.sandbox.status).toBe('destroyed');
    expect(subTasks[0]!.setup?.summary).toMatch(/^forked from the sandbox of task /);
  }, 10 * 60_000);

  it('a session that copies the credential into its sandbox: the hooks exit 2 naming it, and the sandbox is kept', async (ctx) => {
    if (!binary) ctx.skip();
    fs.writeFileSync(wrapperLog, '');
    plan = [bash(`echo ${LEAK_VALUE} > leaked.txt && sync`)];
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
    plan = [bash('sleep 1')];
    let release!: () => void;
    firstTurnHeld = new Promise<void>((r) => (release = r));
    const before = stub.requests.length;
    const claude = startClaude();
    await waitFor('the first model request', () => stub.requests.slice(before).find((r) => r.rawBody.includes('This session has its own sandbox')), 5 * 60_000);
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
