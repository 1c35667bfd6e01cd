// `factory claude|codex [repo] [--with-changes] [-- <agent args>]`: the agent's
// own TUI in a fresh sandbox, in this terminal (the same API method as the UI's
// button, sandboxes.agent). When the agent exits, its work goes to review like a
// task's. `--resume <task>` attaches to a session that runs (its terminal was
// closed: the session waits a grace period for its user, agent-session.ts).
import path from 'node:path';
import type { Task, TerminalInfo } from '../../common/domain.js';
import { isAgentTerminal } from '../../common/agent-session.js';
import { FactoryError } from '../../common/contract.js';
import type { FactoryClient } from './client.js';
import { plain, printJson, type Io } from './output.js';
import { resolveTask } from './task-commands.js';

export type SessionAgent = 'claude-code' | 'codex';

const STARTING = new Set(['creating', 'provisioning', 'seeding']);
const SETTLED = new Set(['review', 'approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed']);

export async function cmdAgentSession(
  client: FactoryClient,
  io: Io,
  a: { agent: SessionAgent; repo?: string; withChanges: boolean; args: string[]; resume?: string },
): Promise<number> {
  await client.watch();
  const latest = new Map<string, Task>();
  const terminals = new Map<string, TerminalInfo>();
  let wake: () => void = () => {};
  client.events.add((e) => {
    if (e.type === 'task.updated') latest.set(e.task.id, e.task);
    else if ((e.type === 'terminal.opened' || e.type === 'terminal.status') && isAgentTerminal(e.info)) terminals.set(e.info.id, e.info);
    else return;
    wake();
  });
  const sleep = (ms: number) =>
    new Promise<void>((r) => {
      const timer = setTimeout(r, ms);
      wake = () => {
        clearTimeout(timer);
        r();
      };
    });
  const liveTerminal = (taskId: string) => [...terminals.values()].find((t) => t.taskId === taskId && t.status === 'live');

  let id: string;
  if (a.resume !== undefined) {
    const t = await resolveTask(client, a.resume);
    id = t.id;
    for (const info of await client.call('terminal.list', { taskId: id })) if (isAgentTerminal(info)) terminals.set(info.id, info);
    if (t.kind !== 'agent' || !liveTerminal(id)) throw new FactoryError('NotFound', `task ${id} has no agent session running to resume (it is ${t.phase})`);
  } else {
    const size = terminalSize();
    // A relative path means this terminal's folder, not the app's.
    const created = await client.call('sandboxes.agent', {
      agent: a.agent,
      repoPath: path.resolve(a.repo ?? '.'),
      ...(a.withChanges ? { includeUncommitted: true } : {}),
      ...(a.args.length ? { args: a.args } : {}),
      ...size,
    });
    id = created.id;
    io.stderr.write(`agent session ${id}: booting a sandbox with ${plain(created.repoPath)}${a.withChanges ? ' and its uncommitted changes' : ''}…\n`);
    let t: Task = created;
    while (!liveTerminal(id) && (STARTING.has(t.phase) || t.phase === 'running')) {
      await sleep(5000);
      t = latest.get(id) ?? (await client.call('tasks.get', { taskId: id }));
      if (!liveTerminal(id) && t.phase === 'running') {
        for (const info of await client.call('terminal.list', { taskId: id })) if (isAgentTerminal(info)) terminals.set(info.id, info);
      }
    }
    if (!liveTerminal(id)) {
      const msg = `the agent session ${id} ended before its agent started (${t.phase})${t.error ? `: ${t.error.message}` : ''}`;
      throw t.error ? FactoryError.carried(t.error.name, msg, t.error.detail) : new FactoryError('SandboxStopped', msg);
    }
  }
  const session = liveTerminal(id)!;
  if (!io.json) io.stderr.write(`${session.title.replace(/^agent: /, '')} runs in sandbox ${id}; exit it to send its work to review\n`);
  const exitCode = await attachInteractive(client, session.id);

  // The work is committed and pulled back once the agent exited: wait for the review (or the end it came to).
  let t = latest.get(id) ?? (await client.call('tasks.get', { taskId: id }));
  while (!SETTLED.has(t.phase)) {
    await sleep(5000);
    t = latest.get(id) ?? (await client.call('tasks.get', { taskId: id }));
  }
  if (io.json) printJson(io, { taskId: id, sessionId: session.id, exitCode, phase: t.phase });
  else if (t.phase === 'review') io.stderr.write(`agent session ${id} is in review: \`factory diff ${id}\` shows it, \`factory approve ${id}\` makes branch ${t.branch}\n`);
  else io.stderr.write(`agent session ${id} ended ${t.phase}${t.error ? `: ${t.error.message}` : ''}\n`);
  return t.phase === 'review' ? 0 : 1;
}

function terminalSize(): { cols: number; rows: number } {
  return { cols: Math.max(2, process.stdout.columns || 80), rows: Math.max(1, process.stdout.rows || 24) };
}

/** This terminal in raw mode on the session: keys to it, its bytes here, SIGWINCH → resize; until it ends. */
async function attachInteractive(client: FactoryClient, sessionId: string): Promise<number | null> {
  const stdin = process.stdin;
  const stdout = process.stdout;
  let exitCode: number | null | undefined;
  let ended: () => void = () => {};
  const over = new Promise<void>((r) => (ended = r));
  const offData = client.terminal.add((c) => {
    if (c.sessionId !== sessionId) return;
    stdout.write(c.data, () => void client.call('terminal.ack', { sessionId, bytes: c.data.length }).catch(() => {}));
  });
  const offEvents = client.events.add((e) => {
    if (e.type === 'terminal.status' && e.info.id === sessionId && e.info.status !== 'live') {
      exitCode = e.info.exitCode;
      ended();
    }
  });
  // At this terminal's size before the replay, so the agent redraws for it.
  await client.call('terminal.resize', { sessionId, ...terminalSize() }).catch(() => {});
  const { info, scrollback } = await client.call('terminal.attach', { sessionId });
  stdout.write(Buffer.from(scrollback, 'base64'));
  if (info.status !== 'live') ended();
  const raw = stdin.isTTY;
  if (raw) stdin.setRawMode(true);
  // Keys in order: one write at a time.
  let chain = Promise.resolve();
  const onKey = (d: Buffer) => {
    const data = d.toString('utf8');
    chain = chain.then(() => client.call('terminal.write', { sessionId, data })).catch(() => {});
  };
  const onResize = () => void client.call('terminal.resize', { sessionId, ...terminalSize() }).catch(() => {});
  stdin.on('data', onKey);
  stdin.resume();
  process.on('SIGWINCH', onResize);
  stdout.on('resize', onResize);
  try {
    await over;
  } finally {
    process.off('SIGWINCH', onResize);
    stdout.off('resize', onResize);
    stdin.off('data', onKey);
    if (raw) stdin.setRawMode(false);
    stdin.pause();
    offData();
    offEvents();
  }
  return exitCode ?? info.exitCode ?? null;
}
