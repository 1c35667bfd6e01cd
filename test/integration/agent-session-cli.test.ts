// `factory claude` as a developer types it in a terminal (a real pty through
// node-pty): the real CLI talks to the real app over its socket; the app boots a
// real sandbox under QEMU with the fixture repository seeded, with its
// uncommitted changes (--with-changes), and runs the real pinned Claude Code TUI
// there as the agent user. The key is in the real keychain; the model API is the
// scripted Messages API stub over HTTPS, behind the credential proxy. The user:
//  1. passes Claude Code its own arguments after `--`, sees the TUI draw, closes the terminal (the CLI is killed) and finds the
//     session still running: `factory claude --resume <id>` attaches again;
//  2. types a prompt: it reaches the stub with the real key (the placeholder
//     never leaves the sandbox) and the scripted reply writes a file through
//     the CLI's own Write tool;
//  3. quits with Ctrl-C twice: the work is in review with that file, and
//     `factory approve` makes the branch that has it.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import { startSocketHost, type SocketHost } from '../../main/host/socket/socket-host.js';
import { startAgentApp, waitForTask, type AgentApp } from '../support/agent-app.js';
import { runCli } from '../support/cli.js';
import { cliInPty as startCliInPty, type CliInPty } from '../support/cli-pty.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';

const REPO = '/work/repo';

let env: AgentApp;
let socket: SocketHost;
let repo: FixtureRepo;

beforeAll(async () => {
  await testImage();
  env = await startAgentApp({
    stub: {
      // Any agent-loop request: write the file with the CLI's own Write tool, then say so.
      script: [
        { text: 'Writing it.', toolUses: [{ name: 'Write', input: { file_path: `${REPO}/hello.txt`, content: 'hello from the agent session\n' } }] },
        { text: 'Wrote hello.txt for you.' },
      ],
    },
  });
  // The app the CLI reaches: this one, on its data folder's socket.
  socket = await startSocketHost(env.app, { dataDir: env.paths.data });
  repo = await makeRepo({ files: { 'README.md': '# Fixture\n' } });
  // Uncommitted work of the user's, which --with-changes brings along.
  fs.writeFileSync(path.join(repo.dir, 'WIP.md'), 'work in progress\n');
}, 15 * 60_000);

afterAll(async () => {
  await socket?.close();
  await env?.dispose();
  repo?.cleanup();
});

/** The real CLI in a real pty, from the repository's parent folder. */
function cliInPty(args: string[]) {
  return startCliInPty({ dataDir: env.paths.data, cwd: path.dirname(repo.dir), args, context: () => `(${env.stub.requests.length} model API requests so far)` });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Ctrl-C until Claude Code asks for a second one, then the second at once, until the agent has
 * exited (its terminal in the app is no longer running): a few rounds at most. No Ctrl-C goes to
 * the CLI itself after that, while it waits for the review.
 */
async function quitWithCtrlC(s: CliInPty, taskId: string, done: RegExp): Promise<void> {
  const agentRuns = async () => (await env.app.api['terminal.list']({ taskId })).some((t) => t.status === 'live');
  for (let round = 0; round < 8 && (await agentRuns()); round++) {
    const before = s.text().length;
    s.term.write('\x03');
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !/Ctrl-C again/.test(s.text().slice(before))) await sleep(50);
    if (/Ctrl-C again/.test(s.text().slice(before))) s.term.write('\x03');
    const settle = Date.now() + 10_000;
    while (Date.now() < settle && (await agentRuns())) await sleep(200);
  }
  await s.waitFor(done, 3 * 60_000);
}

describe('factory claude: Claude Code in a sandbox, in this terminal', () => {
  let taskId = '';

  it('boots the session and draws the TUI; a closed terminal leaves it running and --resume attaches again', async () => {
    // The user's own arguments for Claude Code come after `--`: edits without asking, so no permission classifier runs.
    const first = cliInPty(['claude', path.basename(repo.dir), '--with-changes', '--', '--permission-mode', 'acceptEdits']);
    try {
      await first.waitFor(/agent session (\w+): booting a sandbox/);
      taskId = /agent session (\w+): booting/.exec(first.text())![1]!;
      // The TUI as it draws locally: its banner and its prompt.
      await first.waitFor(/Claude Code runs in sandbox/, 10 * 60_000);
      await first.waitFor(/Claude Code[\s\S]*❯/, 3 * 60_000);
      // The terminal is closed under it: the CLI gets no chance to say goodbye.
      process.kill(first.term.pid, 'SIGKILL');
      await first.exited;
    } finally {
      first.term.kill();
    }
    await sleep(2000);
    const t = await env.app.api['tasks.get']({ taskId });
    expect(t).toMatchObject({ kind: 'agent', agent: 'claude-code', phase: 'running', sandbox: { status: 'running' } });
    expect(t.title).toContain('Agent session: Claude Code');
    const terms = await env.app.api['terminal.list']({ taskId });
    expect(terms.find((x) => x.title === 'agent: Claude Code')?.status).toBe('live');
  }, 15 * 60_000);

  it('a prompt typed after --resume reaches the stub with the real key, writes a file, and Ctrl-C twice sends the work to review', async () => {
    const requestsBefore = env.stub.requests.length;
    const s = cliInPty(['claude', '--resume', taskId]);
    try {
      await s.waitFor(/Claude Code runs in sandbox/);
      await sleep(3000); // the TUI redraws for this terminal
      s.term.write('please add hello.txt');
      await sleep(1000);
      s.term.write('\r');
      await s.waitFor(/Wrote\s*hello\.txt\s*for\s*you\./, 6 * 60_000);
      // The agent's own exit keys, as typed locally.
      // Claude Code's own exit: Ctrl-C, then Ctrl-C again while it says "Press Ctrl-C again to exit"
      // (a turn still running takes the first as an interrupt; the question lasts a moment).
      await quitWithCtrlC(s, taskId, new RegExp(`agent session ${taskId} is in review`));
      expect(await s.exited).toBe(0);
    } finally {
      s.term.kill();
    }
    const seen = env.stub.requests.slice(requestsBefore);
    const agentRequests = env.stub.agentRequests().filter((r) => seen.includes(r));
    expect(agentRequests.length).toBeGreaterThanOrEqual(2);
    // The proxy put the real key in; the guest's placeholder never left the sandbox.
    expect(new Set(env.stub.requests.map((r) => r.headers['x-api-key']))).toEqual(new Set([env.apiKey]));
    for (const r of env.stub.requests) {
      expect(JSON.stringify(r.headers)).not.toContain('fiab-placeholder-');
      expect(r.rawBody).not.toContain('fiab-placeholder-');
      expect(r.rawBody).not.toContain(env.apiKey);
    }
  }, 15 * 60_000);

  it('the work is in review with the file, and factory approve makes the branch that has it', async () => {
    const t: Task = await waitForTask(env.app, taskId, (x) => x.phase !== 'running' && x.phase !== 'pulling-back', 60_000);
    expect(t.phase, JSON.stringify(t.error)).toBe('review');
    const review = await env.app.api['tasks.review']({ taskId });
    // The seeded uncommitted file came along; the agent's file is the work.
    expect(review.files.map((f) => f.path).sort()).toEqual(['WIP.md', 'hello.txt']);
    expect(review.patch).toContain('+hello from the agent session');
    const approved = await runCli(env.paths.data, ['approve', taskId, '--no-start', '--json']);
    expect(approved.code, approved.stderr).toBe(0);
    expect(repo.git('show', `factory/${taskId}:hello.txt`)).toBe('hello from the agent session\n');
    // The user's own working tree is as it was.
    expect(fs.readFileSync(path.join(repo.dir, 'WIP.md'), 'utf8')).toBe('work in progress\n');
    expect(fs.existsSync(path.join(repo.dir, 'hello.txt'))).toBe(false);
  });
});
