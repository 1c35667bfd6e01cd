// `factory sandbox [repo] [--keep]`: a quick sandbox (the same API method as the
// tray and the UI's button), its shell in this terminal once it runs (or sooner:
// a sandbox restored from a snapshot may open its shell while it still boots);
// when the shell ends the app destroys the sandbox, unless --keep.
import path from 'node:path';
import type { Task } from '../../common/domain.js';
import { FactoryError } from '../../common/errors.js';
import type { FactoryClient } from './client.js';
import { plain, printJson, type Io } from './output.js';
import { cmdShell } from './terminal-commands.js';

const BOOTING = new Set(['creating', 'provisioning', 'seeding']);

export async function cmdSandbox(client: FactoryClient, io: Io, a: { repo?: string; keep: boolean }): Promise<number> {
  await client.watch();
  let id: string | undefined;
  const latest = new Map<string, Task>();
  // Tasks a shell opened for: a restored sandbox's opens while it boots, and terminal.openShell then hands that one out.
  const shells = new Set<string>();
  let wake: () => void = () => {};
  client.events.add((e) => {
    if (e.type === 'terminal.opened' && e.info.kind === 'shell' && e.info.taskId) {
      shells.add(e.info.taskId);
      if (e.info.taskId === id) wake();
    }
    if (e.type !== 'task.updated') return;
    latest.set(e.task.id, e.task);
    if (e.task.id === id) wake();
  });
  // A relative path means this terminal's folder, not the app's.
  const created = await client.call('sandboxes.quick', { ...(a.repo !== undefined ? { repoPath: path.resolve(a.repo) } : {}), ...(a.keep ? { keep: true } : {}) });
  id = created.id;
  io.stderr.write(`quick sandbox ${created.id}: booting${created.repoPath ? ` with ${plain(created.repoPath)}` : ''}…\n`);
  let t: Task = latest.get(id) ?? created;
  while (!shells.has(id) && (BOOTING.has(t.phase) || (t.phase === 'running' && t.sandbox.status !== 'running'))) {
    await new Promise<void>((r) => {
      const timer = setTimeout(r, 5000);
      wake = () => {
        clearTimeout(timer);
        r();
      };
    });
    t = latest.get(id) ?? (await client.call('tasks.get', { taskId: id }));
  }
  if (t.phase !== 'running' && !BOOTING.has(t.phase)) {
    const msg = `the quick sandbox ${id} ended before its shell opened (${t.phase})${t.error ? `: ${t.error.message}` : ''}`;
    throw t.error ? FactoryError.carried(t.error.name, msg, t.error.detail) : new FactoryError('SandboxStopped', msg);
  }
  if (!io.json) {
    const then = `exit the shell to ${a.keep ? 'leave it running' : 'destroy it'}`;
    if (t.phase === 'running' && t.sandbox.status === 'running') {
      io.stderr.write(`sandbox running${t.sandbox.bootMs !== undefined ? ` (booted in ${(t.sandbox.bootMs / 1000).toFixed(1)} s)` : ''}; ${then}\n`);
    } else io.stderr.write(`shell ready; the sandbox is still starting; ${then}\n`);
    if (t.sandbox.coldBootReason) io.stderr.write(`${t.sandbox.coldBootReason}\n`);
  }
  const code = await cmdShell(client, { ...io, json: false }, { task: id });
  const after = await client.call('tasks.get', { taskId: id });
  if (io.json) printJson(io, { taskId: id, exitCode: code, kept: a.keep, phase: after.phase, sandbox: after.sandbox.status });
  else if (a.keep) io.stderr.write(`sandbox ${id} kept; \`factory destroy ${id}\` ends it\n`);
  return code;
}
