// The end of a passed pipeline: the task branch comes out of the guest as a
// bundle into quarantine and is verified there, giving the review to show and
// what approve must find unchanged.
import type { PullbackReview, Task } from '../../common/domain.js';
import type { GuestSsh } from '../guest/guest-ssh.js';
import { exportTaskBundle } from '../pullback/guest-export.js';
import type { PullbackQuarantine } from '../pullback/quarantine.js';
import type { TaskRecord } from '../state/state-store.js';

export async function pullBack(
  quarantine: PullbackQuarantine,
  ssh: GuestSsh,
  task: Pick<Task, 'id' | 'repoPath' | 'branch' | 'baseCommit'>,
): Promise<{ review: PullbackReview; pullback: NonNullable<TaskRecord['pullback']> }> {
  const q = await quarantine.prepare(task.id);
  const exported = await exportTaskBundle({ ssh, branch: task.branch, baseCommit: task.baseCommit, bundlePath: q.bundlePath, maxBytes: quarantine.maxBundleBytes });
  const verified = await quarantine.verify({
    taskId: task.id,
    repoPath: task.repoPath,
    branch: task.branch,
    baseCommit: task.baseCommit,
    bundlePresent: exported.bundlePresent,
  });
  return {
    review: verified.review,
    pullback: { headCommit: verified.headCommit, bundleSha256: verified.bundleSha256, bundleBytes: verified.review.bundleBytes, empty: verified.empty },
  };
}
