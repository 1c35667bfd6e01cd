import type { Task, TerminalInfo } from '../../common/domain.js';
import { useController, useFactory } from '../state/context.js';
import { ErrorBox } from './ErrorBox.js';
import { formatDuration } from './format.js';
import { ReviewPanel } from './ReviewPanel.js';
import { SecurityPanel } from './SecurityPanel.js';
import { TerminalSlot } from './TerminalSlot.js';

interface Tab {
  sessionId: string;
  label: string;
  kind: 'stage' | 'shell' | 'host';
  state?: string;
  testId?: string;
}

const FINISHED_PHASES = new Set(['approved', 'rejected', 'failed', 'cancelled', 'interrupted']);

function tabsFor(task: Task, terminals: Record<string, TerminalInfo>): Tab[] {
  const tabs: Tab[] = [];
  for (const st of task.stages) {
    if (!st.sessionId) continue;
    const info = terminals[st.sessionId];
    tabs.push({ sessionId: st.sessionId, label: st.name, kind: 'stage', state: info ? termState(info) : st.status });
  }
  // A stage may run several sessions (the test stage's repair rounds): the card
  // points at the last one; the others get their own tabs so the whole log stays readable.
  const listed = new Set(tabs.map((t) => t.sessionId));
  for (const info of Object.values(terminals)) {
    if (info.taskId !== task.id || info.kind !== 'stage' || listed.has(info.id)) continue;
    tabs.push({ sessionId: info.id, label: info.title || info.kind, kind: 'stage', state: termState(info), testId: `terminal-tab-${info.id}` });
  }
  for (const info of Object.values(terminals)) {
    if (info.taskId !== task.id || info.kind === 'stage') continue;
    tabs.push({ sessionId: info.id, label: info.title || info.kind, kind: info.kind, state: termState(info) });
  }
  return tabs;
}

function termState(info: TerminalInfo): string {
  if (info.status === 'exited') return `exited ${info.exitCode ?? ''}`.trim();
  return info.status;
}

export function TaskDetail() {
  const controller = useController();
  const task = useFactory((s) => (s.selectedTaskId ? s.tasks[s.selectedTaskId] : undefined));
  const terminals = useFactory((s) => s.terminals);
  const activeTab = useFactory((s) => (s.selectedTaskId ? s.activeTab[s.selectedTaskId] : undefined));
  const busy = useFactory((s) => (s.selectedTaskId ? s.busy[s.selectedTaskId] : undefined));
  const actionError = useFactory((s) => (s.selectedTaskId ? s.actionErrors[s.selectedTaskId] : undefined));
  if (!task) {
    return (
      <section className="detail empty" data-testid="task-detail-empty">
        <p className="hint">Select a task to see its terminals and result.</p>
      </section>
    );
  }
  const tabs = tabsFor(task, terminals);
  // Follow the running stage unless the user picked a tab.
  const running = task.stages.find((s) => s.status === 'running' && s.sessionId);
  const fallback = running?.sessionId ?? tabs.filter((t) => t.kind === 'stage' && !t.testId).at(-1)?.sessionId;
  const current = tabs.find((t) => t.sessionId === activeTab) ?? tabs.find((t) => t.sessionId === fallback);
  const sandboxUp = task.sandbox.status === 'running';
  const destroyed = task.sandbox.status === 'destroyed' || task.sandbox.status === 'none';
  const active = !FINISHED_PHASES.has(task.phase) && task.phase !== 'review';
  // Retry runs in the sandbox while it is up, else in a fresh one (the host keeps the seed until Destroy).
  const retryable =
    task.phase === 'interrupted' ||
    ((task.phase === 'failed' || task.phase === 'cancelled') && (sandboxUp || task.sandbox.status === 'lost' || task.sandbox.status === 'none'));

  return (
    <section className="detail" data-testid="task-detail" data-task-id={task.id}>
      <div className="detail-head">
        <div>
          <h2 data-testid="task-title">{task.title}</h2>
          <p className="muted">
            <code>{task.repoPath}</code> · base {task.baseRef} ({task.baseCommit.slice(0, 10)}) · branch <code>{task.branch}</code>
          </p>
          <p className="muted" data-testid="sandbox-status" data-status={task.sandbox.status}>
            sandbox {task.sandbox.status}
            {task.sandbox.accel ? ` · ${task.sandbox.accel}` : ''}
            {task.sandbox.bootMs !== undefined ? ` · booted in ${formatDuration(task.sandbox.bootMs)}` : ''}
          </p>
        </div>
        <div className="actions">
          {retryable ? (
            <button type="button" className="secondary" data-testid="retry-button" disabled={!!busy} onClick={() => void controller.retry(task.id)}>
              {busy === 'retry' ? 'Retrying…' : 'Retry'}
            </button>
          ) : null}
          {task.phase === 'failed' && sandboxUp && task.stages.find((s) => s.name === 'review')?.status === 'failed' ? (
            <button
              type="button"
              className="secondary"
              data-testid="override-review-button"
              title="Accept the change although the review failed, and go on with the document stage"
              disabled={!!busy}
              onClick={() => void controller.retry(task.id, undefined, { overrideReview: true })}
            >
              Override review
            </button>
          ) : null}
          {active ? (
            <button type="button" className="secondary" data-testid="cancel-button" disabled={!!busy} onClick={() => void controller.cancel(task.id)}>
              Cancel
            </button>
          ) : null}
          <button
            type="button"
            className="danger"
            data-testid="destroy-button"
            disabled={!!busy || destroyed}
            onClick={() => void controller.destroy(task.id)}
          >
            {busy === 'destroy' ? 'Destroying…' : destroyed ? 'Sandbox destroyed' : 'Destroy sandbox'}
          </button>
        </div>
      </div>
      {task.error ? <ErrorBox testId="task-error" error={task.error} /> : null}
      {actionError ? <ErrorBox testId="action-error" error={actionError} /> : null}
      <div className="terminals">
        <div className="tabs" role="tablist">
          {tabs.map((t) => (
            <button
              key={t.sessionId}
              type="button"
              role="tab"
              aria-selected={current?.sessionId === t.sessionId}
              className={current?.sessionId === t.sessionId ? 'tab active' : 'tab'}
              data-testid={t.testId ?? `terminal-tab-${t.kind === 'stage' ? t.label : t.sessionId}`}
              data-session-id={t.sessionId}
              onClick={() => controller.selectTab(task.id, t.sessionId)}
            >
              {t.label} <span className="muted">{t.state}</span>
            </button>
          ))}
          <button
            type="button"
            className="tab add"
            data-testid="shell-button"
            disabled={!sandboxUp || busy === 'shell'}
            title={sandboxUp ? 'Open an interactive shell inside the sandbox' : 'The sandbox is not running'}
            onClick={() => void controller.openShell(task.id)}
          >
            + Shell
          </button>
          <button
            type="button"
            className="tab add"
            data-testid="host-shell-button"
            disabled={busy === 'host shell'}
            title={`Open a shell on this computer in ${task.repoPath} (e.g. to inspect the approved branch)`}
            onClick={() => void controller.openHostShell(task.id)}
          >
            Host shell
          </button>
        </div>
        {current ? (
          <TerminalSlot sessionId={current.sessionId} interactive={current.kind !== 'stage'} />
        ) : (
          <p className="hint">No terminal output yet.</p>
        )}
      </div>
      <ReviewPanel task={task} />
      <SecurityPanel task={task} />
    </section>
  );
}
