// `factory run --ways N [--agent a,b,c]` (a task run N ways from one preparation)
// and `factory ways <group> [--approve N [--confirm KINDS] | --reject-all]`.
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { MAX_WAYS, type FanoutComparison, type WayComparison } from '../../common/fanout.js';
import { ReviewConfirmationKind } from '../../common/review.js';
import type { FactoryClient } from './client.js';
import { egressApproval } from './task-commands.js';
import { UsageError, plain, printJson, type Io } from './output.js';

const WAY_ENDED = new Set(['review', 'approved', 'rejected', 'failed', 'cancelled']);

/** --ways as given: a whole number from 1 to 8. */
export function parseWays(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > MAX_WAYS) throw new UsageError(`--ways ${plain(text).slice(0, 20)}: must be a whole number from 1 to ${MAX_WAYS}`);
  return n;
}

/** --agent a,b,c: one name for all ways, or one per way. */
export function parseAgents(text: string | undefined, ways: number): string[] | undefined {
  if (text === undefined) return undefined;
  const agents = text.split(',').map((a) => a.trim());
  if (agents.some((a) => !a)) throw new UsageError(`--agent ${plain(text).slice(0, 200)}: an agent name is empty`);
  if (agents.length !== 1 && agents.length !== ways) throw new UsageError(`--agent names ${agents.length} agents for ${ways} ways: name one for every way, or one for all`);
  return agents;
}

export function wayLine(w: WayComparison): string {
  const tests = w.tests ? `${w.tests.passed} passed, ${w.tests.failed} failed` : 'no test counts';
  const change = w.change ? `+${w.change.added} -${w.change.removed} in ${w.change.files} file${w.change.files === 1 ? '' : 's'}` : '';
  const review = w.reviewVerdict ? `review ${w.reviewVerdict.status}` : '';
  const error = w.error ? `${w.error.name}: ${plain(w.error.message).slice(0, 120)}` : '';
  return [`way ${w.way}`, w.taskId, (w.agent ?? '(default)').padEnd(12), w.state.padEnd(9), tests, review, change, w.leakCheck ? `leak check ${w.leakCheck}` : '', error].filter(Boolean).join('  ');
}

export function describeComparison(c: FanoutComparison): string {
  return [`fan-out ${c.group}: ${plain(c.title).split('\n')[0]!.slice(0, 60)}`, ...c.ways.map(wayLine)].join('\n');
}

export async function cmdRunWays(client: FactoryClient, io: Io, a: { repo: string; task: string; ways: string; agent?: string; base?: string; wait: boolean; allowEgress: string[] }): Promise<number> {
  const ways = parseWays(a.ways);
  const agents = parseAgents(a.agent, ways);
  // A relative path means the user's folder, not the app's.
  const repoPath = path.resolve(a.repo);
  const approval = await egressApproval(client, io, { repoPath, allowEgress: a.allowEgress, ...(a.base ? { base: a.base } : {}) });
  const created = await client.call('fanout.create', {
    repoPath,
    title: a.task,
    ways,
    ...(agents ? { agents } : {}),
    ...(a.base ? { baseRef: a.base } : {}),
    ...(approval ? { egressApproval: approval } : {}),
  });
  if (!a.wait) {
    if (io.json) printJson(io, created);
    else io.stdout.write(`${created.group}\n`);
    return 0;
  }
  io.stderr.write(describeComparison(created) + '\n');
  await client.watch();
  const states = new Map(created.ways.map((w) => [w.taskId, w.state as string]));
  let moved = false;
  let wake: () => void = () => undefined;
  const off = client.events.add((e) => {
    if (e.type !== 'task.updated' || e.task.fanout?.group !== created.group) return;
    moved = true;
    wake();
  });
  let last = created;
  try {
    for (;;) {
      moved = false;
      last = await client.call('fanout.compare', { group: created.group });
      for (const w of last.ways) {
        if (states.get(w.taskId) !== w.state) io.stderr.write(wayLine(w) + '\n');
        states.set(w.taskId, w.state);
      }
      if (last.ways.every((w) => WAY_ENDED.has(w.state))) break;
      // An update that came while comparing is not waited for again.
      if (!moved) await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    off();
  }
  if (io.json) printJson(io, last);
  else io.stdout.write(`${describeComparison(last)}\n`);
  return last.ways.some((w) => w.state === 'review') ? 0 : 1;
}

export async function cmdWays(client: FactoryClient, io: Io, a: { group: string; approve?: string; confirm: string[]; rejectAll: boolean }): Promise<number> {
  if (a.approve !== undefined && a.rejectAll) throw new UsageError('--approve and --reject-all exclude each other');
  const confirm = a.confirm.flatMap((c) => c.split(',')).map((c) => {
    const parsed = ReviewConfirmationKind.safeParse(c.trim());
    if (!parsed.success) throw new UsageError(`--confirm ${plain(c).slice(0, 40)}: not a confirmation kind (${ReviewConfirmationKind.options.join(', ')})`);
    return parsed.data;
  });
  let result: FanoutComparison;
  if (a.approve !== undefined) {
    const way = Number(a.approve);
    if (!/^\d+$/.test(a.approve) || way < 1 || way > MAX_WAYS) throw new UsageError(`--approve ${plain(a.approve).slice(0, 20)}: must be a way number from 1 to ${MAX_WAYS}`);
    try {
      result = await client.call('fanout.approve', { group: a.group, way, ...(confirm.length ? { confirm } : {}) });
    } catch (err) {
      if (err instanceof FactoryError && err.name === 'ApproveNeedsConfirmation') {
        throw new FactoryError(err.name, `${err.message}; review it with factory diff <task> and add --confirm KINDS`);
      }
      throw err;
    }
  } else if (a.rejectAll) result = await client.call('fanout.rejectAll', { group: a.group });
  else result = await client.call('fanout.compare', { group: a.group });
  if (io.json) printJson(io, result);
  else io.stdout.write(describeComparison(result) + '\n');
  return 0;
}
