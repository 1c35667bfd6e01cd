// The task commands: run, ls, show, diff, approve, reject, destroy, leakcheck.
import path from 'node:path';
import type { Task } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import { FactoryError } from '../../common/errors.js';
import { ReviewConfirmationKind, type PullbackReview, type ReviewConfirmation } from '../../common/review.js';
import { escapeName, escapeTerminalLine } from '../../common/review-text.js';
import { shellWord } from '../../common/shell-quote.js';
import { requiredConfirmations } from '../pullback/review/confirmations.js';
import type { FactoryClient } from './client.js';
import { UsageError, plain, printJson, type Io } from './output.js';

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
export async function egressApproval(client: FactoryClient, io: Io, a: { repoPath: string; base?: string; allowEgress: string[] }): Promise<{ rules: EgressRule[]; remember: false } | undefined> {
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

/** The confirmations the CLI asks for: the host's, and, as the app's Approve does, possible secrets even when the host listed none. */
export function cliConfirmations(review: PullbackReview): ReviewConfirmation[] {
  const list = requiredConfirmations(review);
  if (review.secrets.length && !list.some((c) => c.kind === 'secrets')) {
    list.push({ kind: 'secrets', message: `${review.secrets.length} possible secret${review.secrets.length === 1 ? '' : 's'} in the returned work` });
  }
  return list;
}

/** The exact approve command that confirms every kind in `kinds`. */
function approveWith(taskId: string, kinds: readonly ReviewConfirmationKind[]): string {
  return `factory approve ${taskId} --confirm ${[...new Set(kinds)].join(',')}`;
}

const FILES_LISTED = 100;

/**
 * What the review says before the patch: the files, the flags, the possible
 * secrets and what Approve needs confirmed. Every name and message is escaped
 * (common/review-text.ts, as the app shows them), so nothing in it acts on the terminal.
 */
export function reviewHeader(taskId: string, review: PullbackReview): string {
  const line = escapeTerminalLine;
  const total = review.files.length + review.filesOmitted;
  const out = [`review of task ${taskId}: ${total} file${total === 1 ? '' : 's'} changed, +${review.added} -${review.removed}`];
  for (const f of review.files.slice(0, FILES_LISTED)) {
    const notes = [
      f.oldPath !== undefined ? `from ${escapeName(f.oldPath)}` : '',
      f.linkTarget !== undefined ? `symlink to ${escapeName(f.linkTarget)}` : '',
      f.notText ? `not shown as text (${f.notText})` : '',
      f.oldMode && f.newMode && f.oldMode !== f.newMode && f.oldMode !== 'none' && f.newMode !== 'none' ? `mode ${f.oldMode} -> ${f.newMode}` : '',
    ].filter(Boolean);
    out.push(`  ${f.status.padEnd(12)} ${escapeName(f.path)}  +${f.added} -${f.removed}${notes.length ? `  (${notes.join('; ')})` : ''}`);
  }
  const unlisted = total - Math.min(review.files.length, FILES_LISTED);
  if (unlisted > 0) out.push(`  and ${unlisted} more file${unlisted === 1 ? '' : 's'} (factory diff --json lists what the review holds)`);
  if (review.flags.length) {
    out.push(`flags (${review.flags.length}):`);
    for (const f of review.flags) out.push(`  ${f.severity.toUpperCase().padEnd(7)} ${f.kind.padEnd(12)} ${escapeName(f.path)}${f.line !== undefined ? `:${f.line}` : ''}  ${line(f.message)}`);
  }
  if (review.secrets.length) {
    out.push(`possible secrets (${review.secrets.length}, values masked):`);
    for (const s of review.secrets) out.push(`  ${escapeName(s.path)}:${s.line}  ${line(s.rule)}  ${line(s.masked)}`);
  }
  const confirmations = cliConfirmations(review);
  if (confirmations.length) {
    out.push('to confirm before approving:');
    for (const c of confirmations) out.push(`  ${c.kind}: ${line(c.message)}`);
    out.push(`  approve with: ${approveWith(taskId, confirmations.map((c) => c.kind))}`);
  }
  out.push(review.patchTruncated ? 'patch (cut at its size limit):' : 'patch:');
  return out.join('\n') + '\n';
}

export async function cmdDiff(client: FactoryClient, io: Io, ref: string): Promise<number> {
  const t = await resolveTask(client, ref);
  const review = await client.call('tasks.review', { taskId: t.id });
  if (io.json) return printJson(io, review), 0;
  // The patch is the guest's bytes: what the review says comes first, and every line is escaped for the terminal.
  io.stdout.write(reviewHeader(t.id, review));
  const patch = review.patch.endsWith('\n') ? review.patch.slice(0, -1) : review.patch;
  if (patch) io.stdout.write(patch.split('\n').map(escapeTerminalLine).join('\n') + '\n');
  if (review.patchTruncated) io.stderr.write('factory: the patch was cut at its cap; see the review in the app for the rest\n');
  const confirmations = cliConfirmations(review);
  if (confirmations.length) io.stderr.write(`factory: to approve, confirm ${confirmations.map((c) => c.kind).join(' and ')} (listed above the patch): ${approveWith(t.id, confirmations.map((c) => c.kind))}\n`);
  return 0;
}

/** --confirm values: a comma list, the flag repeated, or both; each must be a kind of confirmation. */
export function parseConfirm(values: readonly string[]): ReviewConfirmationKind[] {
  const out: ReviewConfirmationKind[] = [];
  for (const word of values.flatMap((v) => v.split(',')).map((w) => w.trim())) {
    if (!word) continue;
    const kind = ReviewConfirmationKind.safeParse(word);
    if (!kind.success) throw new UsageError(`--confirm: ${JSON.stringify(plain(word).slice(0, 100))} is not a confirmation; the confirmations are ${ReviewConfirmationKind.options.join(', ')}`);
    if (!out.includes(kind.data)) out.push(kind.data);
  }
  return out;
}

function needsConfirmation(taskId: string, missing: readonly ReviewConfirmation[], all: readonly ReviewConfirmationKind[]): FactoryError {
  return new FactoryError(
    'ApproveNeedsConfirmation',
    `not approved: the review has ${missing.length === 1 ? 'something' : 'things'} to confirm first. ` +
      missing.map((c) => `${c.kind}: ${escapeTerminalLine(c.message)}`).join('; ') +
      `. Look at them (factory diff ${taskId}), then to approve anyway: ${approveWith(taskId, all)}`,
  );
}

export async function cmdDecide(client: FactoryClient, io: Io, kind: 'approve' | 'reject' | 'destroy', ref: string, confirmWords: string[] = []): Promise<number> {
  const confirm = kind === 'approve' ? parseConfirm(confirmWords) : [];
  const t = await resolveTask(client, ref);
  if (kind === 'approve' && t.phase === 'review') {
    // The app's second step: each confirmation the review has is named, or nothing is approved.
    const required = cliConfirmations(await client.call('tasks.review', { taskId: t.id }));
    const missing = required.filter((c) => !confirm.includes(c.kind));
    if (missing.length) throw needsConfirmation(t.id, missing, [...confirm.filter((k) => required.some((c) => c.kind === k)), ...missing.map((c) => c.kind)]);
  }
  let after;
  try {
    after =
      kind === 'approve'
        ? await client.call('tasks.approve', { taskId: t.id, ...(confirm.length ? { confirm } : {}) })
        : kind === 'reject'
          ? await client.call('tasks.reject', { taskId: t.id })
          : await client.call('tasks.destroy', { taskId: t.id });
  } catch (err) {
    // The review changed since it was read: the app's refusal, with the flag to pass.
    if (err instanceof Error && err.name === 'ApproveNeedsConfirmation') {
      const named = /confirm: (.*)$/.exec(String((err as { detail?: unknown }).detail ?? ''))?.[1] ?? '';
      const kinds = parseConfirm([named]);
      throw new FactoryError('ApproveNeedsConfirmation', `${escapeTerminalLine(err.message)} To approve anyway: ${approveWith(t.id, [...confirm, ...kinds])}`);
    }
    throw err;
  }
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
