// What Approve lands, in words, and the agent's own commits, which it does not:
// each with its id, author and message as escaped text, merges marked. The host
// caps the list and the messages; whatever a cap left out is said here.
import { escapeContentLine } from '../../../common/review-text.js';
import type { AgentCommit, ReviewHistory } from '../../../common/review.js';
import { formatBytes, plural } from './format.js';

const escapeMessage = (message: string) => message.replace(/\n+$/, '').split('\n').map(escapeContentLine).join('\n');

function CommitRow({ commit, history }: { commit: AgentCommit; history: ReviewHistory }) {
  const merge = commit.parents > 1;
  return (
    <li className="agent-commit" data-testid="review-commit" data-merge={String(merge)}>
      <code>{commit.id.slice(0, 12)}</code>
      {merge ? <span className="flag-kind"> merge of {commit.parents} parents</span> : null} <span className="muted">{escapeContentLine(commit.author)}</span>
      <pre className="commit-message" data-testid="review-commit-message">{escapeMessage(commit.message)}</pre>
      {commit.messageCut ? (
        <p className="muted" data-testid="review-commit-cut">
          The message is longer: only its first {history.maxMessageChars.toLocaleString('en')} characters are shown.
          {commit.scannedInPart ? ` Only its first ${formatBytes(history.maxScanBytes)} were scanned for secrets.` : ''}
        </p>
      ) : null}
    </li>
  );
}

export function AgentHistory({ history }: { history: ReviewHistory | undefined }) {
  const commits = history ? plural(history.total, 'commit') : 'own commits';
  const verb = history?.total === 1 ? 'is' : 'are';
  const unlisted = history ? history.total - history.commits.length : 0;
  return (
    <div className="agent-history" data-testid="review-history">
      <p className="note" data-testid="review-lands">
        Approve lands one commit with the final tree shown here, on the task's base; the agent&apos;s {commits} {verb} not kept, nor their
        messages.
        {history?.merges
          ? ` ${plural(history.merges, 'of them is a merge', 'of them are merges')}: harmless here, since only the final tree lands (what a merge brought in is in the diff) and no other parent enters your repository.`
          : ''}
      </p>
      {history?.commits.length ? (
        <>
          <h4 data-testid="review-commits-summary">
            The agent&apos;s commits, newest first
            {unlisted > 0 ? `: the first ${history.commits.length.toLocaleString('en')} of ${history.total.toLocaleString('en')}` : ` (${history.total.toLocaleString('en')})`}
          </h4>
          <ol className="commit-list" data-testid="review-commits" tabIndex={0} aria-label="The agent's commits">
            {history.commits.map((c) => (
              <CommitRow key={c.id} commit={c} history={history} />
            ))}
          </ol>
        </>
      ) : null}
      {unlisted > 0 ? (
        <p className="note" role="alert" data-testid="review-commits-omitted">
          {plural(unlisted, 'older commit')} {unlisted === 1 ? 'is' : 'are'} not listed (the list stops at {history!.maxCommits.toLocaleString('en')}), and{' '}
          {unlisted === 1 ? 'its message was' : 'their messages were'} not scanned for secrets. None of them lands.
        </p>
      ) : null}
    </div>
  );
}
