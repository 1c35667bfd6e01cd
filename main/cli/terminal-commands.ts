// The commands that carry a sandbox's bytes: logs (a stage's terminal, live with
// --follow), exec (one command, streams and exit status passed through) and
// shell (interactive, the user's terminal in raw mode, resize followed).
import type { StageName } from '../../common/domain.js';
import { FactoryError } from '../../common/errors.js';
import type { FactoryClient } from './client.js';
import { printJson, type Io } from './output.js';
import { resolveTask } from './task-commands.js';
import { attachInteractive, terminalSize } from './tty-attach.js';

export async function cmdLogs(client: FactoryClient, io: Io, a: { task: string; stage?: StageName; follow: boolean }): Promise<number> {
  const t = await resolveTask(client, a.task);
  const stages = t.stages.filter((s) => s.sessionId && (!a.stage || s.name === a.stage));
  if (!a.follow) {
    if (a.stage && stages.length === 0) throw new FactoryError('NotFound', `stage ${a.stage} of task ${t.id} has no terminal (it has not run)`);
    const out: Array<{ stage: string; text: string }> = [];
    for (const s of stages) {
      const { scrollback } = await client.call('terminal.attach', { sessionId: s.sessionId! });
      out.push({ stage: s.name, text: Buffer.from(scrollback, 'base64').toString('utf8') });
    }
    if (io.json) printJson(io, out);
    else for (const o of out) io.stdout.write((a.stage ? '' : `==> ${o.stage} <==\n`) + o.text + (a.stage || o.text.endsWith('\n') ? '' : '\n'));
    return 0;
  }
  await followTask(client, io, t.id, a.stage);
  return 0;
}

const FINISHED = new Set(['review', 'approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed']);

/**
 * Follow: each stage's terminal in turn (or the named stage's), from its scrollback
 * on and live while it runs, waiting for stages that have not started, until the
 * task is done (or the named stage has ended).
 */
async function followTask(client: FactoryClient, io: Io, taskId: string, stage?: StageName): Promise<void> {
  let wake: () => void = () => {};
  client.events.add((e) => {
    if (e.type === 'task.updated' && e.task.id === taskId) wake();
  });
  await client.watch();
  const printed = new Set<string>();
  for (;;) {
    const t = await client.call('tasks.get', { taskId });
    const next = t.stages.find((s) => s.sessionId && !printed.has(s.sessionId) && (!stage || s.name === stage));
    if (next?.sessionId) {
      printed.add(next.sessionId);
      if (!stage && !io.json) io.stdout.write(`==> ${next.name} <==\n`);
      await followSession(client, io, next.sessionId);
      if (stage) return;
      continue;
    }
    if (FINISHED.has(t.phase)) {
      if (stage && printed.size === 0) throw new FactoryError('NotFound', `stage ${stage} of task ${t.id} did not run`);
      return;
    }
    // Nothing to show yet: wait for the task to move (or look again in a while).
    await new Promise<void>((r) => {
      const timer = setTimeout(r, 5000);
      wake = () => {
        clearTimeout(timer);
        r();
      };
    });
  }
}

/** Prints a session's scrollback, then its live bytes (acknowledged as written) until it ends. */
async function followSession(client: FactoryClient, io: Io, sessionId: string): Promise<void> {
  let attached = false;
  let ended: () => void = () => {};
  const over = new Promise<void>((r) => (ended = r));
  const offData = client.terminal.add((c) => {
    if (c.sessionId !== sessionId || !attached) return;
    io.stdout.write(c.data, () => void client.call('terminal.ack', { sessionId, bytes: c.data.length }).catch(() => {})); // fails when the session or the app is gone, which ends this command anyway
  });
  const offEvents = client.events.add((e) => {
    if ((e.type === 'terminal.status' || e.type === 'terminal.opened') && e.info.id === sessionId && e.info.status !== 'live') ended();
  });
  try {
    const { info, scrollback } = await client.call('terminal.attach', { sessionId });
    attached = true;
    io.stdout.write(Buffer.from(scrollback, 'base64'));
    if (info.status === 'live') await over;
  } finally {
    offData();
    offEvents();
  }
}

export async function cmdExec(client: FactoryClient, io: Io, a: { task: string; argv: string[]; stdin?: Buffer; timeoutSec?: number }): Promise<number> {
  const t = await resolveTask(client, a.task);
  const r = await client.call('tasks.exec', {
    taskId: t.id,
    argv: a.argv,
    ...(a.stdin?.length ? { stdin: a.stdin.toString('base64') } : {}),
    ...(a.timeoutSec ? { timeoutSec: a.timeoutSec } : {}),
  });
  const status = r.exitCode ?? 128 + signalNumber(r.signal);
  if (io.json) {
    printJson(io, r);
    return status;
  }
  await write(io.stdout, Buffer.from(r.stdout, 'base64'));
  await write(io.stderr, Buffer.from(r.stderr, 'base64'));
  if (r.stdoutTruncated || r.stderrTruncated) io.stderr.write('factory: the output was cut at its cap (16 MiB per stream)\n');
  if (r.timedOut) io.stderr.write('factory: the command was killed at its time limit\n');
  return status;
}

function signalNumber(sig: string | undefined): number {
  const table: Record<string, number> = { HUP: 1, INT: 2, QUIT: 3, KILL: 9, SEGV: 11, PIPE: 13, ALRM: 14, TERM: 15 };
  return (sig && table[sig.replace(/^SIG/, '')]) || 1;
}

function write(stream: NodeJS.WritableStream, data: Buffer): Promise<void> {
  if (data.length === 0) return Promise.resolve();
  return new Promise((r) => stream.write(data, () => r()));
}

/** Interactive shell: raw mode on a TTY, keys to the sandbox's pty, its bytes to ours, SIGWINCH → resize. */
export async function cmdShell(client: FactoryClient, io: Io, a: { task: string }): Promise<number> {
  const t = await resolveTask(client, a.task);
  await client.watch();
  const info = await client.call('terminal.openShell', { taskId: t.id, ...terminalSize() });
  const exitCode = await attachInteractive(client, info.id);
  if (io.json) printJson(io, { sessionId: info.id, exitCode });
  return exitCode ?? 0;
}
