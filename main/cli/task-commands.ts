// The task commands: run, ls, show, diff, approve, reject, destroy, leakcheck.
import path from 'node:path';
import type { Task } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import { FactoryError } from '../../common/contract.js';
import type { ReviewConfirmationKind } from '../../common/review.js';
import { shellWord } from '../../common/shell-quote.js';
import type { FactoryClient } from './client.js';
import { plain, printJson, type Io } from './output.js';

/** A task by id, or by a prefix of exactly one task's id. */
export async function resolveTask(client: FactoryClient, ref: string): Promise<Task> {
  const tasks = await client.call('tasks.list', {});
  const exact = tasks.find((t) => t.id === ref);
  if (exact) return exact;
  const matches = tasks.filter((t) => t.id.startsWith(ref));
  if (matches.length === 1) return matches[0]!;
  if (matches.length > 1) throw new FactoryError('InvalidInput', `${JSON.stringify(ref)} matches ${matches.length} tasks: ${matches.map((t) => t.id).join(', ')}`);
  throw new FactoryError('TaskNotFound', `no task has the id ${JSON.stringify(ref)}`);
}

const DONE = new Set(['review', 'approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed']);
const OK = new Set(['review', 'approved', 'rejected']);

export function taskLine(t: Task): string {
  const stage = t.stages.find((s) => s.status === 'running')?.name ?? '';
  return `${t.id}  ${t.phase.padEnd(12)} ${stage.padEnd(8)} ${plain(t.title).split('\n')[0]!.slice(0, 60)}`;
}

export function describeTask(t: Task): string {
  const lines = [
    `task     ${t.id}`,
    `title    ${plain(t.title).split('\n')[0]}`,
    `repo     ${plain(t.repoPath)}`,
    `base     ${plain(t.baseRef)} (${t.baseCommit.slice(0, 12)})`,
    `branch   ${t.branch}`,
    `phase    ${t.phase}`,
    `sandbox  ${t.sandbox.status}${t.sandbox.accel ? ` (${t.sandbox.accel})` : ''}`,
    `agent    ${t.agent ?? '(default)'}`,
  ];
  if (t.setup) lines.push(`setup    ${t.setup.status}${t.setup.summary ? `  ${plain(t.setup.summary)}` : ''}`);
  for (const s of t.stages) {
    const d = s.durationMs !== undefined ? ` ${(s.durationMs / 1000).toFixed(1)} s` : '';
    lines.push(`  ${s.name.padEnd(9)} ${s.status.padEnd(10)}${d}${s.summary ? `  ${plain(s.summary).slice(0, 100)}` : ''}`);
  }
  if (t.error) lines.push(`error    ${t.error.name}: ${plain(t.error.message)}`);
  if (t.decision) lines.push(`decision ${t.decision.kind}${t.decision.branch ? ` → ${t.decision.branch}` : ''}`);
  return lines.join('\n');
}

/** A destination as the CLI prints and takes it: scheme://host:port. */
function destination(rule: Pick<EgressRule, 'scheme' | 'host' | 'port'>): string {
  return `${rule.scheme}://${rule.host}:${rule.port}`;
}

/**
 * What the repository's environment asks its sandbox to reach and the user has
 * not allowed always for this repository (tasks.preflight, as the New task form
 * shows it). Each must be named with --allow-egress: then it is approved for this
 * task only; anything the repository asks for and the user did not name stops the
 * run before anything starts, listing the flags to add. Naming each one (not one
 * switch for "whatever it asks") means a repository changed since the user looked
 * cannot slip in another destination.
 */
async function egressApproval(client: FactoryClient, io: Io, a: { repoPath: string; base?: string; allowEgress: string[] }): Promise<{ rules: EgressRule[]; remember: false } | undefined> {
  const preflight = await client.call('tasks.preflight', { repoPath: a.repoPath, ...(a.base ? { baseRef: a.base } : {}) });
  const asked = preflight.egressRequests.filter((r) => !r.allowedAlways).map((r) => r.rule);
  const named = new Set(a.allowEgress.map((d) => d.trim().toLowerCase()));
  const unasked = [...named].filter((d) => !preflight.egressRequests.some((r) => destination(r.rule) === d));
  if (unasked.length) {
    const all = preflight.egressRequests.map((r) => destination(r.rule));
    throw new FactoryError('Usage', `--allow-egress ${plain(unasked[0]!).slice(0, 200)}: the repository does not ask for it${all.length ? ` (it asks for ${all.join(', ')})` : ''}; --allow-egress only grants what the repository asks for`);
  }
  const missing = asked.filter((r) => !named.has(destination(r)));
  if (missing.length) {
    throw new FactoryError(
      'EgressNotApproved',
      `the repository asks its sandbox to reach ${missing.map(destination).join(', ')}, not allowed always for this repository; nothing was started. ` +
        `To let this task reach ${missing.length === 1 ? 'it' : 'them'}, add ${missing.map((r) => `--allow-egress ${shellWord(destination(r))}`).join(' ')}, or start the task in the app and choose there`,
    );
  }
  if (!asked.length) return undefined;
  io.stderr.write(`allowing this task to reach: ${asked.map(destination).join(', ')}\n`);
  return { rules: asked, remember: false };
}

export async function cmdRun(client: FactoryClient, io: Io, a: { repo: string; task: string; agent?: string; base?: string; wait: boolean; allowEgress: string[] }): Promise<number> {
  // A relative path means the user's folder, not the app's.
  const repoPath = path.resolve(a.repo);
  const approval = await egressApproval(client, io, { repoPath, allowEgress: a.allowEgress, ...(a.base ? { base: a.base } : {}) });
  if (a.wait) await client.watch();
  const seen = new Map<string, string>();
  let done: ((t: Task) => void) | undefined;
  const finished = new Promise<Task>((resolve) => (done = resolve));
  let id: string | undefined;
  const early: Task[] = [];
  const onTask = (t: Task) => {
    for (const s of t.stages) {
      const key = `${s.status}/${s.attempt ?? 1}`;
      if (seen.get(s.name) === key || s.status === 'pending') continue;
      seen.set(s.name, key);
      io.stderr.write(`  ${s.name.padEnd(9)} ${s.status}${s.summary && s.status !== 'running' ? `  ${plain(s.summary).slice(0, 100)}` : ''}\n`);
    }
    if (DONE.has(t.phase)) done!(t);
  };
  client.events.add((e) => {
    if (e.type !== 'task.updated') return;
    if (id === undefined) early.push(e.task);
    else if (e.task.id === id) onTask(e.task);
  });
  const created = await client.call('tasks.create', {
    repoPath,
    title: a.task,
    ...(approval ? { egressApproval: approval } : {}),
    ...(a.agent ? { agent: a.agent } : {}),
    ...(a.base ? { baseRef: a.base } : {}),
  });
  id = created.id;
  if (!a.wait) {
    if (io.json) printJson(io, created);
    else io.stdout.write(`${created.id}\n`);
    return 0;
  }
  io.stderr.write(`task ${created.id}: ${created.phase}\n`);
  for (const t of early.filter((t) => t.id === id)) onTask(t);
  // The task may have moved on between create and the first event.
  onTask(await client.call('tasks.get', { taskId: created.id }));
  const end = await finished;
  if (io.json) printJson(io, end);
  else {
    io.stderr.write(`task ${end.id}: ${end.phase}${end.error ? ` (${end.error.name}: ${plain(end.error.message)})` : ''}\n`);
    io.stdout.write(`${end.id}\n`);
  }
  return OK.has(end.phase) ? 0 : 1;
}

export async function cmdList(client: FactoryClient, io: Io): Promise<number> {
  const tasks = await client.call('tasks.list', {});
  if (io.json) printJson(io, tasks);
  else for (const t of tasks) io.stdout.write(taskLine(t) + '\n');
  return 0;
}

export async function cmdShow(client: FactoryClient, io: Io, ref: string): Promise<number> {
  const t = await resolveTask(client, ref);
  if (io.json) printJson(io, t);
  else io.stdout.write(describeTask(t) + '\n');
  return 0;
}

export async function cmdDiff(client: FactoryClient, io: Io, ref: string): Promise<number> {
  const t = await resolveTask(client, ref);
  const review = await client.call('tasks.review', { taskId: t.id });
  if (io.json) return printJson(io, review), 0;
  // The patch is the guest's bytes: the user's terminal gets it without control characters.
  io.stdout.write(review.patch.replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g, (c) => `^${String.fromCharCode(c.charCodeAt(0) ^ 0x40)}`));
  if (review.patchTruncated) io.stderr.write('factory: the patch was cut at its cap; see the review in the app for the rest\n');
  for (const c of review.confirmations) io.stderr.write(`factory: to confirm before approving (${c.kind}): ${plain(c.message)}\n`);
  return 0;
}

export async function cmdDecide(client: FactoryClient, io: Io, kind: 'approve' | 'reject' | 'destroy', ref: string, confirm: string[] = []): Promise<number> {
  const t = await resolveTask(client, ref);
  const after =
    kind === 'approve'
      ? await client.call('tasks.approve', { taskId: t.id, ...(confirm.length ? { confirm: confirm as ReviewConfirmationKind[] } : {}) })
      : kind === 'reject'
        ? await client.call('tasks.reject', { taskId: t.id })
        : await client.call('tasks.destroy', { taskId: t.id });
  if (io.json) printJson(io, after);
  else if (kind === 'approve') io.stdout.write(`approved: branch ${after.decision?.branch ?? after.branch} in ${plain(after.repoPath)}\n`);
  else io.stdout.write(`${after.id}: ${kind === 'destroy' ? `sandbox ${after.sandbox.status}` : after.phase}\n`);
  return 0;
}

export async function cmdLeakcheck(client: FactoryClient, io: Io, ref: string): Promise<number> {
  const t = await resolveTask(client, ref);
  const report = await client.call('leakcheck.run', { taskId: t.id });
  if (io.json) printJson(io, report);
  else {
    io.stdout.write(`leak check of ${t.id}: ${report.verdict}\n`);
    for (const h of report.hits) io.stdout.write(`  found credential ${h.credentialId} (${plain(h.encoding)})\n`);
    for (const s of report.scanned) if (s.error) io.stdout.write(`  not fully scanned: ${plain(s.source)}: ${plain(s.error)}\n`);
  }
  return report.verdict === 'clean' ? 0 : 1;
}
