// A task's result from the pull-back on: the verified review (kept with the
// state so it stays readable after the decision or a restart, cached in memory),
// one file of it while it is in quarantine, the agents' scratch files copied out
// of the sandbox, and the decision (approve, reject). Phase changes go through
// the task book like every other (task-life.ts).
import fsp from 'node:fs/promises';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { PullbackReview, type Task } from '../../common/domain.js';
import type { ReviewConfirmationKind, ReviewFileDetail } from '../../common/review.js';
import { collectArtifacts } from '../pipeline/artifacts.js';
import { landingMessage } from '../pullback/landing.js';
import type { PullbackQuarantine } from '../pullback/quarantine.js';
import { assertConfirmed } from '../pullback/review/confirmations.js';
import type { Logger } from '../log/logger.js';
import type { AppPaths } from '../state/paths.js';
import { writeFileAtomic, type TaskRecord } from '../state/state-store.js';
import { pullBack } from './pull-back.js';
import type { SandboxSshPort } from '../sandbox/sandbox-ports.js';
import type { TaskBook } from './task-book.js';

export interface TaskReviewsDeps {
  paths: AppPaths;
  book: TaskBook;
  quarantine: PullbackQuarantine;
  log: Pick<Logger, 'warn'>;
  /** After Approve or Reject: the sandbox goes now or is kept until a deadline (sandbox-lifetime.ts). */
  afterDecision: (task: Task) => Promise<void>;
}

export class TaskReviews {
  private readonly cache = new Map<string, PullbackReview>();

  constructor(private readonly deps: TaskReviewsDeps) {}

  /** The pipeline passed: the result into quarantine, its review saved, the task in review. */
  async pullBack(record: TaskRecord, ssh: SandboxSshPort): Promise<void> {
    const taskId = record.task.id;
    const result = await pullBack(this.deps.quarantine, ssh, record.task);
    await writeFileAtomic(this.reviewJsonPath(taskId), JSON.stringify(result.review));
    this.cache.set(taskId, result.review);
    await this.deps.book.transition(record, 'pulledBack', {}, { pullback: result.pullback });
  }

  async review(record: TaskRecord): Promise<PullbackReview> {
    const taskId = record.task.id;
    const cached = this.cache.get(taskId);
    if (cached) return cached;
    if (!record.pullback || !['review', 'approved', 'rejected'].includes(record.task.phase)) {
      throw new FactoryError('NoReview', `task ${taskId} has no result to review (it is ${record.task.phase})`);
    }
    const file = this.reviewJsonPath(taskId);
    try {
      const review = PullbackReview.parse(JSON.parse(await fsp.readFile(file, 'utf8')));
      this.cache.set(taskId, review);
      return review;
    } catch {
      throw new FactoryError('NoReview', `the review of task ${taskId} could not be read from ${file}`);
    }
  }

  /** One file of a result in review, while it is in quarantine: its own patch and leading bytes. */
  async file(record: TaskRecord, filePath: string): Promise<ReviewFileDetail> {
    const review = await this.review(record);
    const taskId = record.task.id;
    if (record.task.phase !== 'review' || !record.pullback) {
      throw new FactoryError('NotInReview', `task ${taskId} is ${record.task.phase}; its files can be opened only while it is in review`);
    }
    // Listed or not (past the listing cap), the quarantine decides whether the file is part of the result.
    return this.deps.quarantine.fileDetail({ taskId, baseCommit: review.baseCommit, headCommit: record.pullback.headCommit, path: filePath });
  }

  /** The diff from one result in review to another (two ways of one task), while both are in quarantine. */
  async diffBetween(from: TaskRecord, to: TaskRecord): Promise<{ patch: string; patchTruncated: boolean }> {
    for (const r of [from, to]) {
      if (r.task.phase !== 'review' || !r.pullback) throw new FactoryError('NotInReview', `task ${r.task.id} is ${r.task.phase}; results can be compared only while both are in review`);
    }
    return this.deps.quarantine.diffBetween({ taskId: from.task.id, headCommit: from.pullback!.headCommit }, { taskId: to.task.id, headCommit: to.pullback!.headCommit });
  }

  /**
   * Creates the branch: one new commit with the reviewed tree on the base.
   * When the review could not show or check everything (its confirmations),
   * `confirm` must name every kind of them: the user's deliberate second step;
   * otherwise ApproveNeedsConfirmation names what was not shown.
   */
  async approve(record: TaskRecord, opts: { confirm?: readonly ReviewConfirmationKind[] } = {}): Promise<Task> {
    const taskId = record.task.id;
    if (record.task.phase !== 'review' || !record.pullback) {
      throw new FactoryError('NotInReview', `task ${taskId} is ${record.task.phase}; only a task in review can be approved`);
    }
    if (record.pullback.empty) {
      throw new FactoryError('NothingToApprove', 'the sandbox brought back no change; there is nothing to approve (reject it instead)');
    }
    const review = await this.review(record);
    assertConfirmed(review, opts.confirm);
    // One commit of the reviewed tree lands, not the agent's history (landing.ts).
    const res = await this.deps.quarantine.approve({
      taskId,
      repoPath: record.task.repoPath,
      branch: record.task.branch,
      baseCommit: record.task.baseCommit,
      headCommit: record.pullback.headCommit,
      bundleSha256: record.pullback.bundleSha256,
      message: landingMessage(record.task, review.history?.total),
    });
    await this.deps.book.update(record, {
      phase: 'approved',
      decision: { kind: 'approved', at: new Date().toISOString(), branch: res.branch, commit: res.commit },
    });
    await this.deps.afterDecision(record.task);
    return { ...record.task };
  }

  async reject(record: TaskRecord): Promise<Task> {
    const taskId = record.task.id;
    if (record.task.phase !== 'review') {
      throw new FactoryError('NotInReview', `task ${taskId} is ${record.task.phase}; only a task in review can be rejected`);
    }
    await this.deps.quarantine.discard(taskId);
    await this.deps.book.update(record, { phase: 'rejected', decision: { kind: 'rejected', at: new Date().toISOString() } });
    await this.deps.afterDecision(record.task);
    return { ...record.task };
  }

  /** The agents' scratch files, copied out of the sandbox after its pipeline (kept until the task is removed). */
  async keepArtifacts(record: TaskRecord, ssh: SandboxSshPort): Promise<void> {
    const taskId = record.task.id;
    try {
      const dir = this.artifactsDir(taskId);
      await fsp.rm(dir, { recursive: true, force: true });
      const artifacts = await collectArtifacts(ssh, dir, {
        onRefused: (a) => this.deps.log.warn('an artifact was refused', { taskId, name: a.name, reason: a.reason }),
      });
      await this.deps.book.update(record, { artifacts });
    } catch (err) {
      // The run's outcome matters more than its scratch files; the log says what was lost.
      this.deps.log.warn('copying the artifacts out of the sandbox failed', { taskId, err });
    }
  }

  /** One artifact's text (names were checked when copied; checked again here). */
  async artifact(record: TaskRecord, name: string): Promise<{ name: string; text: string; truncated: boolean }> {
    const taskId = record.task.id;
    const entry = record.task.artifacts?.find((a) => a.name === name);
    if (!entry) throw new FactoryError('NotFound', `task ${taskId} has no artifact named ${JSON.stringify(name).slice(0, 140)}`);
    const text = await fsp.readFile(path.join(this.artifactsDir(taskId), entry.name), 'utf8');
    return { name: entry.name, text, truncated: entry.truncated };
  }

  /**
   * A task that can no longer be approved (it failed, was cancelled or was cut
   * before its review) keeps no quarantine: a retry pulls its work back afresh.
   */
  async dropUnreviewable(record: TaskRecord): Promise<void> {
    if (['review', 'approved'].includes(record.task.phase)) return;
    await this.deps.quarantine.discard(record.task.id);
  }

  /** The task is being removed: its quarantine, saved review and artifacts go with it. */
  async remove(taskId: string): Promise<void> {
    await this.deps.quarantine.discard(taskId);
    await fsp.rm(this.reviewJsonPath(taskId), { force: true });
    await fsp.rm(this.artifactsDir(taskId), { recursive: true, force: true });
    this.cache.delete(taskId);
  }

  private artifactsDir(taskId: string): string {
    return path.join(this.deps.paths.data, 'artifacts', taskId);
  }

  private reviewJsonPath(taskId: string): string {
    return path.join(this.deps.paths.state, 'reviews', `${taskId}.json`);
  }
}
