// The next step after Approve: copy the branch name, open the repository in the
// user's editor, check the branch out (after saying what that changes), push it
// with the user's own git. All of it runs on the host (main/git/branch-actions.ts);
// git's output and errors show here, as text.
import { useCallback, useEffect, useState } from 'react';
import type { BranchInfo, ErrorInfo, Task } from '../../common/domain.js';
import { useController } from '../state/context.js';
import { copyText, nextSteps } from '../state/task-actions.js';
import { ErrorBox } from './ErrorBox.js';

type Busy = 'checkout' | 'push' | 'editor' | undefined;

export function NextSteps({ task }: { task: Task }) {
  const controller = useController();
  const branch = task.decision?.branch ?? task.branch;
  const [info, setInfo] = useState<BranchInfo>();
  const [error, setError] = useState<ErrorInfo>();
  const [status, setStatus] = useState('');
  const [output, setOutput] = useState<string>();
  const [confirming, setConfirming] = useState(false);
  const [remote, setRemote] = useState('');
  const [busy, setBusy] = useState<Busy>();

  const reload = useCallback(async () => {
    const r = await nextSteps.info(controller, task.id);
    if (r.ok) {
      setInfo(r.value);
      setRemote((cur) => (cur && r.value.remotes.includes(cur) ? cur : (r.value.remotes.includes('origin') ? 'origin' : r.value.remotes[0]) ?? ''));
    } else setError(r.error);
  }, [controller, task.id]);
  useEffect(() => void reload(), [reload]);

  const run = async <T,>(what: Busy, fn: () => Promise<{ ok: true; value: T } | { ok: false; error: ErrorInfo }>, done: (v: T) => string) => {
    setBusy(what);
    setError(undefined);
    setStatus('');
    const r = await fn();
    setBusy(undefined);
    if (r.ok) setStatus(done(r.value));
    else {
      setError(r.error);
      if (r.error.detail) setOutput(r.error.detail);
    }
    return r;
  };

  const copy = async () => {
    setError(undefined);
    try {
      await copyText(branch);
      setStatus(`Copied ${branch} to the clipboard.`);
    } catch (err) {
      setError({ name: 'Error', message: err instanceof Error ? err.message : String(err) });
    }
  };

  const checkout = async () => {
    const r = await run('checkout', () => nextSteps.checkout(controller, task.id), (v) => `Checked out: ${v.branch} is now the current branch of your repository.`);
    setConfirming(false);
    if (r.ok) setInfo(r.value);
    else void reload();
  };

  const push = async () => {
    setOutput(undefined);
    const r = await run('push', () => nextSteps.push(controller, task.id, remote), (v) => `Pushed ${v.branch} to ${v.remote}.`);
    if (r.ok) setOutput(r.value.output || '(git printed nothing)');
  };

  const dirty = info?.dirty ?? [];
  return (
    <section className="next-steps" aria-labelledby={`next-steps-${task.id}`} data-testid="next-steps">
      <h3 id={`next-steps-${task.id}`}>Next steps</h3>
      <div className="actions">
        <button type="button" className="secondary" data-testid="copy-branch-button" onClick={() => void copy()}>
          Copy branch name
        </button>
        <button
          type="button"
          className="secondary"
          data-testid="open-editor-button"
          disabled={!!busy}
          onClick={() => void run('editor', () => nextSteps.openEditor(controller, task.id), (v) => `Opened ${task.repoPath} with ${v.command}.`)}
        >
          Open in editor
        </button>
        <button
          type="button"
          className="secondary"
          data-testid="checkout-button"
          aria-expanded={confirming}
          disabled={!!busy || !info || info.checkedOut || info.bare || !info.exists}
          onClick={() => {
            // Say what it changes as the repository is now, not as it was when the view opened.
            void reload().then(() => setConfirming(true));
          }}
        >
          {info?.checkedOut ? 'Checked out' : 'Check out…'}
        </button>
      </div>
      {confirming && info ? (
        <div className="checkout-confirm" role="group" aria-labelledby={`checkout-what-${task.id}`} data-testid="checkout-confirm">
          <p id={`checkout-what-${task.id}`} data-testid="checkout-what">
            Checking out switches your repository <code>{task.repoPath}</code> from {info.currentBranch ? <>branch <code>{info.currentBranch}</code></> : 'a detached HEAD'} to{' '}
            <code>{branch}</code>: the files in its work tree change to that branch's. Untracked files stay as they are.
          </p>
          {dirty.length ? (
            <p className="note" data-testid="checkout-dirty">
              Not possible now: uncommitted changes in {dirty.join(', ')}
              {info.dirtyMore ? ` and ${info.dirtyMore} more` : ''}. Commit or stash them first.
            </p>
          ) : null}
          <div className="actions">
            <button type="button" className="secondary" data-testid="checkout-cancel-button" autoFocus onClick={() => setConfirming(false)}>
              Cancel
            </button>
            <button type="button" data-testid="checkout-confirmed-button" disabled={!!busy || dirty.length > 0} onClick={() => void checkout()}>
              {busy === 'checkout' ? 'Checking out…' : `Check out ${branch}`}
            </button>
          </div>
        </div>
      ) : null}
      {info && info.remotes.length ? (
        <div className="actions push-row">
          <label>
            Push to remote
            <select data-testid="push-remote" value={remote} onChange={(e) => setRemote(e.target.value)}>
              {info.remotes.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </label>
          <button type="button" data-testid="push-button" disabled={!!busy || !remote} onClick={() => void push()}>
            {busy === 'push' ? 'Pushing…' : 'Push'}
          </button>
        </div>
      ) : info ? (
        <p className="muted" data-testid="push-no-remote">
          Your repository has no remote to push to.
        </p>
      ) : null}
      <p className="muted" role="status" data-testid="next-step-status">
        {status}
      </p>
      {error ? <ErrorBox testId="next-step-error" error={{ ...error, detail: undefined }} /> : null}
      {output ? (
        <pre className="push-output" data-testid="push-output" aria-label="git's output">
          {output}
        </pre>
      ) : null}
    </section>
  );
}
