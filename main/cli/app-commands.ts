// `factory status` and `factory quit`: what the app runs, and ending it.
import type { FactoryClient } from './client.js';
import { plain, printJson, type Io } from './output.js';

export async function cmdStatus(client: FactoryClient, io: Io): Promise<number> {
  const a = await client.call('system.activity', {});
  if (io.json) {
    printJson(io, a);
    return 0;
  }
  const lines = [`app: ${a.host === 'web' ? 'web host' : 'desktop app'}, pid ${a.pid}`];
  if (a.idleExit) {
    const left = Math.max(0, a.idleExit.afterSec - a.idleExit.idleForSec);
    lines.push(
      a.running.length
        ? `started by the CLI: ends by itself ${minutes(a.idleExit.afterSec)} after nothing runs (factory quit ends it now)`
        : `started by the CLI: nothing runs; it ends by itself in ${minutes(left)} (factory quit ends it now)`,
    );
  }
  if (a.pool) lines.push(`warm pool: ${a.pool.ready} of ${a.pool.target} sandboxes ready${a.pool.spares ? `; ${a.pool.spares} spare fork${a.pool.spares === 1 ? '' : 's'} of session sandboxes for their subagents` : ''}`);
  if (!a.running.length) lines.push('running: nothing');
  else {
    lines.push(`running: ${a.running.length}`);
    for (const t of a.running) lines.push(`  ${t.id}  ${t.phase.padEnd(12)} sandbox ${t.sandbox.padEnd(9)} ${plain(t.agent).slice(0, 16).padEnd(16)} ${plain(t.title).slice(0, 60)}`);
  }
  io.stdout.write(lines.join('\n') + '\n');
  return 0;
}

export async function cmdQuit(client: FactoryClient, io: Io): Promise<number> {
  const before = await client.call('system.activity', {});
  await client.call('system.quit', {});
  io.stdout.write(`the app (pid ${before.pid}) is ending${before.running.length ? `; ${before.running.length} running task(s) and their sandboxes are torn down` : ''}\n`);
  return 0;
}

function minutes(sec: number): string {
  return sec >= 120 ? `${Math.round(sec / 60)} min` : `${sec} s`;
}
