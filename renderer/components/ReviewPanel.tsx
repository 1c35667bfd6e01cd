import { useEffect, useMemo, useRef, useState } from 'react';
import type { Task } from '../../common/domain.js';
import { escapeName } from '../../common/review-text.js';
import { useController, useFactory } from '../state/context.js';
import { AgentHistory } from './review/AgentHistory.js';
import { ApproveBar } from './review/ApproveBar.js';
import { requiredConfirmations } from './review/confirmations.js';
import { FileDetail } from './review/FileDetail.js';
import { FileDiff } from './review/FileDiff.js';
import { FileList } from './review/FileList.js';
import { plural } from './review/format.js';
import { buildPatchModel } from './review/patch-model.js';
import { PatchView } from './review/PatchView.js';
import { ReviewFlags } from './review/ReviewFlags.js';
import type { VirtualRowsHandle } from './review/VirtualRows.js';
import { StatusIcon } from './icons.js';

/**
 * What came back from the sandbox, all of it: flags first, what Approve lands
 * and the agent's commits it does not, every file, the patch (virtualised, as
 * escaped text), what it could not show and the way to ask for it, then
 * Approve, which is a second step whenever something is unseen.
 */
function lastHeader(fileRows: Map<string, number>): string | undefined {
  let last: string | undefined;
  let at = -1;
  for (const [path, row] of fileRows) if (row > at) [last, at] = [path, row];
  return last;
}

export function ReviewPanel({ task }: { task: Task }) {
  const controller = useController();
  const review = useFactory((s) => s.reviews[task.id]);
  const fileStates = useFactory((s) => s.reviewFiles[task.id]);
  const [openPath, setOpenPath] = useState<string | undefined>();
  const [viewPath, setViewPath] = useState<string | undefined>();
  const patchView = useRef<VirtualRowsHandle>(null);
  const inReview = task.phase === 'review';

  useEffect(() => {
    if ((inReview || task.decision) && !review) void controller.loadReview(task.id);
  }, [controller, task.id, inReview, task.decision, review]);

  const model = useMemo(() => (review ? buildPatchModel(review.patch) : undefined), [review]);
  // The file the cut fell in is the one whose header comes last in a cut patch.
  const cutPath = useMemo(() => (review?.patchTruncated && model ? lastHeader(model.fileRows) : undefined), [review, model]);
  const unshown = useMemo(
    () => (review && model ? review.files.filter((f) => !model.fileRows.has(f.path) || f.path === cutPath).map((f) => f.path) : []),
    [review, model, cutPath],
  );
  const confirmations = useMemo(() => (review ? requiredConfirmations(review, review.patchTruncated ? unshown : []) : []), [review, unshown]);

  if (!review || !model) {
    return inReview ? (
      <section className="review" data-testid="review-panel">
        <p className="hint">Loading the result…</p>
      </section>
    ) : null;
  }
  const open = (path: string) => {
    setOpenPath(path);
    void controller.loadReviewFile(task.id, path);
  };
  const listed = review.files.length;
  const failedChecks = review.checks.filter((c) => !c.ok).length;
  return (
    <section className="review" data-testid="review-panel">
      <h3 data-testid="review-summary">
        Result: {plural(listed + review.filesOmitted, 'file')}, <span className="diff-add">+{review.added}</span>{' '}
        <span className="diff-del">−{review.removed}</span>
      </h3>
      <p className="muted">
        branch {escapeName(review.branch)} · {review.baseCommit.slice(0, 10)}..{review.headCommit.slice(0, 10)} · bundle {review.bundleBytes} bytes
      </p>
      <ReviewFlags flags={review.flags} secrets={review.secrets} />
      {/* Nothing came back (the head is the base): there is nothing to land. */}
      {review.headCommit !== review.baseCommit ? <AgentHistory history={review.history} /> : null}
      {/* The verification checks in one line; open (and said first) when one failed. */}
      <details className="checks-fold" data-testid="review-checks-fold" open={failedChecks > 0}>
        <summary data-testid="review-checks-summary">
          {failedChecks ? (
            <span className="bad">
              <StatusIcon status="failed" /> {plural(failedChecks, 'check')} failed
            </span>
          ) : (
            <span className="ok">
              <StatusIcon status="passed" /> {plural(review.checks.length, 'check')} passed
            </span>
          )}
        </summary>
        <ul className="checks" data-testid="review-checks">
          {review.checks.map((c) => (
            <li key={c.name} className={c.ok ? 'ok' : 'bad'} data-testid="review-check" data-ok={String(c.ok)}>
              <StatusIcon status={c.ok ? 'passed' : 'failed'} /> {c.name}: {c.message}
            </li>
          ))}
        </ul>
      </details>
      <FileList
        files={review.files}
        fileRows={model.fileRows}
        onGoTo={(row) => patchView.current?.scrollToRow(row)}
        onView={(path) => setViewPath(viewPath === path ? undefined : path)}
        viewPath={viewPath}
        onOpen={open}
        openPath={openPath}
        patchTruncated={review.patchTruncated}
        cutPath={cutPath}
      />
      {viewPath !== undefined && model.fileRows.has(viewPath) ? (
        <FileDiff path={viewPath} model={model} headerRow={model.fileRows.get(viewPath)!} flags={review.flags} secrets={review.secrets} />
      ) : null}
      {review.filesOmitted > 0 ? (
        <p className="note" role="alert" data-testid="review-files-omitted">
          {plural(review.filesOmitted, 'more changed file')} {review.filesOmitted === 1 ? 'is' : 'are'} not listed (over the review's limit); the totals
          above count them.
        </p>
      ) : null}
      {openPath !== undefined ? (
        <FileDetail
          path={openPath}
          file={review.files.find((f) => f.path === openPath)}
          state={fileStates?.[openPath]}
          onClose={() => setOpenPath(undefined)}
          onRetry={() => void controller.loadReviewFile(task.id, openPath)}
        />
      ) : null}
      <PatchView ref={patchView} model={model} testId="review-patch" label="Patch" />
      <p className="muted patch-size" data-testid="review-patch-size">
        {plural(model.lineCount, 'patch line')}
      </p>
      {review.patchTruncated ? (
        <p className="note" role="alert" data-testid="review-patch-truncated">
          The patch was cut at its size limit: {plural(unshown.length, 'file')} {unshown.length === 1 ? 'is' : 'are'} not in it, or not all of it. Each is
          marked in the list above with a way to show its own patch.
        </p>
      ) : null}
      <ApproveBar task={task} confirmations={confirmations} />
    </section>
  );
}
