// `factory codex` as a developer types it in a terminal (a real pty through
// node-pty): the real CLI talks to the real app over its socket; the app boots
// one real sandbox under QEMU with the fixture repository seeded and runs the
// pinned Codex TUI there as the agent user, on the proxy provider with its
// housekeeping off. The key is in the real keychain; the model API is the
// scripted Responses API stub over HTTPS, behind the credential proxy. The user:
//  1. passes Codex its own arguments after `--`, sees its TUI draw and types a
//     prompt: it reaches the stub with the real key (the placeholder never leaves
//     the sandbox), and the scripted reply, in code mode as Codex's default model
//     works, writes a file through `tools.apply_patch`;
//  2. quits Codex with its quit key once the turn is over (Ctrl-C, once, at an
//     idle prompt in 0.171; during a turn Ctrl-C interrupts the turn instead):
//     the CLI says the work is in review and exits 0;
//  3. finds the file in the review; `factory approve` makes the branch that has
//     it, and no QEMU process is left.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import { startSocketHost, type SocketHost } from '../../main/host/socket/socket-host.js';
import { startCodexAgentApp, waitForTask, type AgentApp } from '../support/agent-app.js';
import { runCli } from '../support/cli.js';
import { cliInPty } from '../support/cli-pty.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { addFilePatch, codeModeJs, type RecordedResponsesRequest, type ResponsesReply, type ResponsesStub } from '../support/responses-stub.js';

const PROMPT = 'please add hello.txt';
const CONTENT = 'hello from the codex session\n';

/** Codex asks the model for a short title of the thread beside the turn itself: a request whose answer has a JSON schema. */
function isTitleRequest(req: RecordedResponsesRequest): boolean {
  return !!(req.body as { text?: { format?: unknown } } | undefined)?.text?.format;
}

/** The turn: write the file through code mode's apply_patch, then say so. */
function reply(req: RecordedResponsesRequest, toolResults: number): ResponsesReply {
  if (isTitleRequest(req)) return { text: JSON.stringify({ title: 'Add hello.txt' }) };
  if (toolResults === 0 && req.rawBody.includes(PROMPT)) return { text: 'Writing it.', toolCalls: [{ input: codeModeJs({ patches: [addFilePatch('hello.txt', CONTENT)] }) }] };
  return { text: 'Wrote hello.txt for you.' };
}

let env: AgentApp<ResponsesStub>;
let socket: SocketHost;
let repo: FixtureRepo;

beforeAll(async () => {
  await testImage();
  env = await startCodexAgentApp({ stub: { script: (req, { toolResults }) => reply(req, toolResults) } });
  // The app the CLI reaches: this one, on its data folder's socket.
  socket = await startSocketHost(env.app, { dataDir: env.paths.data });
  repo = await makeRepo({ files: { 'README.md': '# Fixture\n' } });
}, 15 * 60_000);

afterAll(async () => {
  await socket?.close();
  const dataDir = env?.paths.data;
  await env?.dispose();
  repo?.cleanup();
  if (dataDir) expect(qemuProcessesUnder(dataDir)).toEqual([]);
});

describe('factory codex: Codex in a sandbox, in this terminal', () => {
  let taskId = '';

  it('draws the TUI; a typed prompt reaches the stub with the real key and writes a file; Ctrl-C quits and the work goes to review', async () => {
    const started = Date.now();
    // The user's own arguments for Codex come after `--`: the VM is the sandbox, so no approvals and no sandbox of Codex's own.
    const s = cliInPty({
      dataDir: env.paths.data,
      cwd: path.dirname(repo.dir),
      args: ['codex', path.basename(repo.dir), '--', '--dangerously-bypass-approvals-and-sandbox'],
      context: () => `(${env.stub.requests.length} model API requests so far)`,
    });
    try {
      await s.waitFor(/agent session (\w+): booting a sandbox/);
      taskId = /agent session (\w+): booting/.exec(s.text())![1]!;
      await s.waitFor(/Codex runs in sandbox/, 10 * 60_000);
      // Codex's own screen: its banner with the pinned version, and its prompt.
      await s.waitFor(/OpenAI Codex \(v0\.171\.0\)[\s\S]*Ask Codex to do anything/, 3 * 60_000);
      const drawn = Date.now();
      s.term.write(PROMPT);
      await s.waitFor(new RegExp(PROMPT));
      s.term.write('\r');
      // The reply, then the turn's end: Ctrl-C while a turn runs interrupts it, and quits only at an idle prompt.
      await s.waitFor(/Wrote\s*hello\.txt\s*for\s*you\.[\s\S]*Worked\s*for/, 5 * 60_000);
      const answered = Date.now();
      // Codex 0.171 quits on one Ctrl-C at an idle prompt, and says how to resume the thread.
      s.term.write('\x03');
      await s.waitFor(/To continue this session, run/, 60_000);
      await s.waitFor(new RegExp(`agent session ${taskId} is in review`), 3 * 60_000);
      expect(await s.exited).toBe(0);
      console.log(
        `agent-session-codex: TUI drawn ${((drawn - started) / 1000).toFixed(1)} s after the command, ` +
          `answered ${((answered - drawn) / 1000).toFixed(1)} s after the prompt, in review ${((Date.now() - answered) / 1000).toFixed(1)} s after Ctrl-C`,
      );
      // Nothing on the user's screen carries the real key.
      expect(s.text()).not.toContain(env.apiKey);
    } finally {
      s.term.kill();
    }
    const turns = env.stub.responseRequests().filter((r) => !isTitleRequest(r) && r.rawBody.includes(PROMPT));
    // The prompt, then the apply_patch result handed back.
    expect(turns.length).toBeGreaterThanOrEqual(2);
    expect(turns.some((r) => r.rawBody.includes('custom_tool_call_output'))).toBe(true);
    // The proxy put the real key in; the guest's placeholder never left the sandbox.
    expect(new Set(env.stub.requests.map((r) => r.headers.authorization))).toEqual(new Set([`Bearer ${env.apiKey}`]));
    for (const r of env.stub.requests) {
      expect(JSON.stringify(r.headers)).not.toContain('fiab-placeholder-');
      expect(r.rawBody).not.toContain('fiab-placeholder-');
      expect(r.rawBody).not.toContain(env.apiKey);
    }
  }, 15 * 60_000);

  it('the work is in review with the file, factory approve makes the branch that has it, and no QEMU is left', async () => {
    const t: Task = await waitForTask(env.app, taskId, (x) => x.phase !== 'running' && x.phase !== 'pulling-back', 60_000);
    expect(t.phase, JSON.stringify(t.error)).toBe('review');
    expect(t).toMatchObject({ kind: 'agent', agent: 'codex' });
    const review = await env.app.api['tasks.review']({ taskId });
    expect(review.files.map((f) => f.path)).toEqual(['hello.txt']);
    expect(review.patch).toContain(`+${CONTENT.trim()}`);
    const approved = await runCli(env.paths.data, ['approve', taskId, '--no-start', '--json']);
    expect(approved.code, approved.stderr).toBe(0);
    expect(repo.git('show', `factory/${taskId}:hello.txt`)).toBe(CONTENT);
    // The user's own working tree is as it was.
    expect(fs.existsSync(path.join(repo.dir, 'hello.txt'))).toBe(false);
    await expect.poll(() => qemuProcessesUnder(env.paths.data), { timeout: 60_000 }).toEqual([]);
  });
});
