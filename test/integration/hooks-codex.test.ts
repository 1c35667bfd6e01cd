// The Codex session hooks with the real Codex CLI (the pinned version) on this
// host, headless (`codex exec`), against the Responses API stub (the one
// double: no model API exists here), and the real app with a real sandbox
// under QEMU. A user runs `factory hooks install --agent codex` in a
// repository, then Codex: the session start gives the session a sandbox; the
// model's shell call (exec_command from code mode, which reaches the hook as
// "Bash") is rewritten by the PreToolUse hook into a routed command, so
// `touch <marker>; cat /etc/machine-id` leaves no marker on this computer and
// prints the sandbox's machine id; a file apply_patch wrote here reaches the
// sandbox before the next command; a patch into .codex is refused with the
// reason shown to the model; the Stop hook's leak check passes; and
// once Codex has ended, its sandbox is gone (Codex gives SessionEnd 3 s, the
// app finishes the teardown). Codex runs in its own default sandbox
// (workspace-write), from which only the rule install writes lets the routed
// command reach the app. Codex asks the user to trust hooks from a file:
// here --dangerously-bypass-hook-trust stands for that answer, and the
// repository is marked trusted in Codex's own config as its prompt would.
// Then a subagent (Codex's spawn_agent, a function tool of its collaboration
// namespace; its requests carry `x-openai-subagent: collab_spawn`): its shell
// command runs in a sandbox of its own, forked from the session's, and its
// commit arrives in the session's sandbox as a branch once it stops.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import { FactoryClient } from '../../main/cli/client.js';
import { CODEX_QUIET_CONFIG } from '../../main/pipeline/agents/codex.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { runCli, stopApp } from '../support/cli.js';
import { factoryCalls, killStarted, waitFor, writeFactoryWrapper } from '../support/factory-wrapper.js';
import { codexBinary } from '../support/codex-host.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { addFilePatch, codeModeJs, ResponsesStub, toolResultsOf, type RecordedResponsesRequest, type ResponsesReply } from '../support/responses-stub.js';

const GRACE_SEC = 5;
const API_KEY = 'fiab-placeholder-codex-hooks';

let binary: string | undefined;
let dataDir: string;
let root: string;
let repo: FixtureRepo;
let stub: ResponsesStub;
let client: FactoryClient;
let wrapperLog: string;
let factoryBin: string;
const started: ChildProcess[] = [];
/** The model's turns, by the number of tool results in the request: the session's, and a subagent's. */
let plan: ResponsesReply[] = [];
let subPlan: ResponsesReply[] = [];

function reply(req: RecordedResponsesRequest): ResponsesReply {
  const results = toolResultsOf(req).length;
  if (req.headers['x-openai-subagent'] === 'collab_spawn') return subPlan[results] ?? { text: 'Subagent done.' };
  return plan[results] ?? { text: 'Done in the sandbox.' };
}

/** A code-mode turn running one shell command. */
const shell = (cmd: string): ResponsesReply => ({ toolCalls: [{ input: codeModeJs({ commands: [cmd] }) }] });
/** A turn calling one of Codex's collaboration tools (a function tool, not code mode's). */
const collaboration = (name: string, args: Record<string, unknown>): ResponsesReply => ({
  toolCalls: [{ kind: 'function', namespace: 'collaboration', name, input: JSON.stringify(args) }],
});

/** Every `factory` invocation (the hooks and the routed commands), with its status and stderr. */
const calls = () => factoryCalls(wrapperLog).map((c) => ({ ...c, args: c.args.replace(/^(--data-dir \S+ )+/, '') }));

const sessionTasks = async () => (await client.call('tasks.list', {})).filter((t: Task) => t.agent === 'claude-session');

function runCodex(): Promise<{ code: number | null; out: string; pid: number }> {
  const codexHome = path.join(root, 'codex-home');
  const args = [
    // Codex's own default sandbox on this computer: the routed command reaches the app only through the rule install writes.
    'exec', '--json', '--skip-git-repo-check', '--sandbox', 'workspace-write', '--dangerously-bypass-hook-trust', '--cd', repo.dir,
    '-c', 'model_provider=stub', '-c', 'model_providers.stub.name=stub', '-c', `model_providers.stub.base_url="${stub.url}/v1"`,
    '-c', 'model_providers.stub.env_key=OPENAI_API_KEY', '-c', 'model_providers.stub.wire_api=responses',
    ...CODEX_QUIET_CONFIG.flatMap((kv) => ['-c', kv]), '-',
  ];
  const child = spawn(binary!, args, {
    cwd: repo.dir,
    env: { HOME: path.join(root, 'home'), CODEX_HOME: codexHome, PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', OPENAI_API_KEY: API_KEY },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  started.push(child);
  child.stdin!.end('Work in the sandbox.');
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, pid: child.pid! })));
}

beforeAll(async () => {
  binary = await codexBinary({ allowFetch: process.env.FACTORY_OFFLINE !== '1' });
  if (!binary) return;
  await testImage();
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-codex-'));
  dataDir = path.join(root, 'data');
  wrapperLog = path.join(root, 'factory-calls.log');
  for (const d of ['home', 'bin', 'codex-home']) fs.mkdirSync(path.join(root, d));
  repo = await makeRepo({ files: { 'README.md': '# Fixture\n' } });
  // The repository is trusted, as the user's answer to Codex's folder prompt would record it.
  fs.writeFileSync(path.join(root, 'codex-home', 'config.toml'), `[projects.${JSON.stringify(repo.dir)}]\ntrust_level = "trusted"\n`);
  // `factory`, as the package's bin would be, logging each call's status and stderr for the test.
  factoryBin = path.join(root, 'bin', 'factory');
  writeFactoryWrapper(factoryBin, { dataDir, log: wrapperLog });
  stub = await ResponsesStub.start({ apiKey: API_KEY, script: reply });
  const ls = await runCli(dataDir, ['ls'], { env: { FACTORY_SESSION_GRACE_SEC: String(GRACE_SEC) } });
  expect(ls.code, ls.stderr).toBe(0);
  client = await FactoryClient.connect(path.join(dataDir, 'factory.sock'));
}, 10 * 60_000);

afterAll(async () => {
  killStarted(started);
  client?.close();
  if (dataDir) await stopApp(dataDir);
  await stub?.close();
  repo?.cleanup();
  if (root && process.env.FACTORY_KEEP_TEST_DIR !== '1') fs.rmSync(root, { recursive: true, force: true });
});

describe.skipIf(process.platform !== 'linux')('Codex session hooks, real CLI and a real sandbox', () => {
  it("a Codex session gets a sandbox; its shell command runs there, not here; apply_patch's file reaches it; the sandbox is gone after the session", async (ctx) => {
    if (!binary) ctx.skip(); // offline and not cached: FACTORY_OFFLINE=1 without a fetched CLI
    // The absolute command: Codex runs the model's commands in a login shell, whose PATH need not hold the test's bin folder.
    const install = await new Promise<number | null>((resolve) =>
      spawn(factoryBin, ['hooks', 'install', '--agent', 'codex', '--command', factoryBin], { cwd: repo.dir, stdio: 'ignore' }).on('exit', resolve),
    );
    expect(install).toBe(0);
    expect(Object.keys(JSON.parse(fs.readFileSync(path.join(repo.dir, '.codex', 'hooks.json'), 'utf8')).hooks)).toHaveLength(6);
    expect(fs.readFileSync(path.join(repo.dir, '.codex', 'rules', 'factory-in-a-box.rules'), 'utf8')).toContain(`pattern = ${JSON.stringify([factoryBin, '--data-dir', dataDir, 'hook', 'run'])}`);
    const marker = path.join(root, 'MARKER-must-not-appear-here');
    const hostMachineId = fs.existsSync('/etc/machine-id') ? fs.readFileSync('/etc/machine-id', 'utf8').trim() : 'no-machine-id-here';
    let cell = codeModeJs({ patches: [addFilePatch('notes/from-host.txt', 'written by apply_patch on the host')], commands: [`touch ${marker}; cat /etc/machine-id; pwd; cat notes/from-host.txt`] });
    // Then a patch the hook must refuse (Codex's own hooks folder), the refusal caught so the model reads it.
    cell += `\ntry { await tools.apply_patch(${JSON.stringify(addFilePatch('.codex/planted.txt', 'x'))}); text('APPLIED'); } catch (e) { text('REFUSED: ' + String(e)); }`;
    // One code-mode cell as the model's first turn; then it is done.
    plan = [{ toolCalls: [{ input: cell }] }];
    const t0 = Date.now();
    const { code, out, pid } = await runCodex();
    expect(code, out.slice(-3000)).toBe(0);
    const byArgs = (s: string) => calls().filter((c) => c.args.startsWith(s));
    expect(byArgs('hook session-start').map((c) => c.status), byArgs('hook session-start')[0]?.stderr).toEqual([0]);
    // Three tool calls went through the hook (apply_patch, the shell command, the refused patch); the shell command ran as a routed one.
    expect(byArgs('hook pre-tool-use').map((c) => c.status)).toEqual([0, 0, 0]);
    expect(byArgs('hook run').map((c) => c.status)).toEqual([0]);
    const [task] = await sessionTasks();
    expect(task).toBeDefined();
    // Its card names Codex, not Claude Code.
    expect(task!.title).toMatch(/^Codex session /);
    expect(task!.session?.agent).toBe('codex');
    // The app watches the Codex process itself, not the shell or the factory script between it and the hook.
    const records = JSON.parse(fs.readFileSync(path.join(dataDir, 'sessions.json'), 'utf8')) as { sessions: Array<{ taskId: string; pid: number }> };
    const record = records.sessions.find((s) => s.taskId === task!.id);
    if (record) expect(record.pid).toBe(pid);
    // Nothing ran here: no marker; the machine id and the folder are the sandbox's.
    expect(fs.existsSync(marker)).toBe(false);
    const result = stub.responseRequests().flatMap((r) => toolResultsOf(r)).join('\n');
    const ids = result.match(/\b[0-9a-f]{32}\b/g) ?? [];
    expect(ids.length, result.slice(0, 2000)).toBeGreaterThan(0);
    expect(ids).not.toContain(hostMachineId);
    expect(result).toContain('/work/repo');
    // apply_patch wrote here, on the user's working tree, and the routed command saw the file in the sandbox.
    expect(fs.readFileSync(path.join(repo.dir, 'notes', 'from-host.txt'), 'utf8')).toBe('written by apply_patch on the host\n');
    expect(result).toContain('written by apply_patch on the host');
    // The refused patch: not applied here, and the model was told why.
    expect(fs.existsSync(path.join(repo.dir, '.codex', 'planted.txt'))).toBe(false);
    expect(result).not.toContain('APPLIED');
    expect(result).toMatch(/REFUSED: .*inside \.codex/);
    // The session start told the model about its sandbox, in Codex's terms.
    expect(stub.responseRequests().some((r) => r.rawBody.includes('This session has its own sandbox') && r.rawBody.includes('exec_command'))).toBe(true);
    const stop = byArgs('hook stop');
    expect(stop.map((c) => c.status), stop[0]?.stderr).toEqual([0]);
    // Codex gives SessionEnd 3 s: the app finishes the check and the teardown (or reaps the session once Codex is gone).
    await waitFor('the session sandbox to be destroyed', async () => (await client.call('tasks.get', { taskId: task!.id })).sandbox.status === 'destroyed', 5 * 60_000, 500);
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
    const report = await client.call('leakcheck.get', { taskId: task!.id });
    expect(report?.verdict).toBe('clean');
    console.log(`codex session with hooks, from start to a destroyed sandbox: ${Date.now() - t0} ms; session-end hook: ${JSON.stringify(byArgs('hook session-end').map((c) => [c.status, c.stderr.slice(0, 200)]))}`);
  }, 10 * 60_000);

  it("a Codex subagent gets a sandbox of its own, forked from the session's: its command runs there, not here, and its commit arrives in the session's sandbox as a branch", async (ctx) => {
    if (!binary) ctx.skip();
    fs.writeFileSync(wrapperLog, '');
    const marker = path.join(root, 'SUBAGENT-MARKER-must-not-appear-here');
    const machineId = /\b[0-9a-f]{32}\b/;
    plan = [
      // A file only the session's sandbox has: a subagent forked from it has it too.
      shell('echo SESSION-ID $(cat /etc/machine-id); echo made-in-the-session > ~/fork-marker'),
      collaboration('spawn_agent', { task_name: 'commit_in_sandbox', message: 'Commit a file in your sandbox.', fork_turns: 'none' }),
      collaboration('wait_agent', { timeout_ms: 600_000 }),
      shell("git branch --list 'factory/*' && git log --all --format=%s | sort -u && ls"),
    ];
    subPlan = [
      shell(`touch ${marker}; echo SUB-ID $(cat /etc/machine-id) FORK=$(cat ~/fork-marker 2>/dev/null || echo none) && echo from-the-subagent > sub.txt && git add sub.txt && git commit -qm "work of the subagent" && echo committed`),
    ];
    const peak: { qemu: number; seen: string[] } = { qemu: 0, seen: [] };
    const watch = setInterval(() => {
      const now = qemuProcessesUnder(dataDir);
      if (now.length > peak.qemu) Object.assign(peak, { qemu: now.length, seen: now.map((q) => q.cmdline.replaceAll(dataDir, '<data>').slice(0, 400)) });
    }, 500);
    const before = stub.responseRequests().length;
    let run: Awaited<ReturnType<typeof runCodex>>;
    try {
      run = await runCodex();
    } finally {
      clearInterval(watch);
    }
    expect(run.code, run.out.slice(-3000)).toBe(0);
    const requests = stub.responseRequests().slice(before);
    // The subagent asked the model as a subagent, and the session's wait ended with it.
    expect(requests.filter((r) => r.headers['x-openai-subagent'] === 'collab_spawn').length).toBeGreaterThan(0);
    const all = requests.map((r) => toolResultsOf(r).join('\n')).join('\n');
    const sessionId = /SESSION-ID ([0-9a-f]{32})/.exec(all)?.[1];
    const subId = /SUB-ID ([0-9a-f]{32})/.exec(all)?.[1];
    expect(sessionId, `the session printed its machine id: ${all.slice(0, 1500)}`).toMatch(machineId);
    expect(subId, `the subagent printed its machine id: ${all.slice(0, 1500)}`).toMatch(machineId);
    // Nothing of the subagent ran here; its command ran on a machine of its own, forked from the session's.
    expect(fs.existsSync(marker)).toBe(false);
    expect(subId).not.toBe(sessionId);
    expect(subId).not.toBe(fs.existsSync('/etc/machine-id') ? fs.readFileSync('/etc/machine-id', 'utf8').trim() : '');
    expect(/SUB-ID [0-9a-f]{32} FORK=([a-z-]+)/.exec(all)?.[1]).toBe('made-in-the-session');
    const byArgs = (s: string) => calls().filter((c) => c.args.startsWith(s));
    expect(byArgs('hook subagent-start').map((c) => c.status), byArgs('hook subagent-start')[0]?.stderr).toEqual([0]);
    expect(byArgs('hook subagent-stop').map((c) => c.status), byArgs('hook subagent-stop')[0]?.stderr).toEqual([0]);
    // Three shell commands, each routed: the session's two and the subagent's one.
    expect(byArgs('hook run').map((c) => c.status)).toEqual([0, 0, 0]);
    expect(peak.qemu, `seen at once:\n${peak.seen.join('\n')}`).toBe(2);
    // The subagent's commit is in the session's sandbox as its branch, not in the working tree here.
    const last = toolResultsOf(requests.filter((r) => r.headers['x-openai-subagent'] !== 'collab_spawn').at(-1)!).at(-1) ?? '';
    expect(last).toMatch(/factory\/[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+/);
    expect(last).toContain('work of the subagent');
    expect(last).not.toContain('sub.txt');
    expect(fs.existsSync(path.join(repo.dir, 'sub.txt'))).toBe(false);
    // After the session: every sandbox is gone, the subagent's with the rest.
    const subTasks = (await sessionTasks()).filter((t) => t.title.includes('subagent'));
    expect(subTasks).toHaveLength(1);
    expect(subTasks[0]!.title).toMatch(/^Codex subagent /);
    expect(subTasks[0]!.setup?.summary).toMatch(/^forked from the sandbox of task /);
    await waitFor('every sandbox of the session to be destroyed', async () => (await sessionTasks()).every((t) => t.sandbox.status === 'destroyed'), 5 * 60_000, 500);
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
  }, 10 * 60_000);
});
