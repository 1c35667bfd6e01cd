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
import { attachInteractive, terminalSize } from './tty-attach.js';

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
