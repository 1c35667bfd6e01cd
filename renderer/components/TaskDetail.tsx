import { useRef, useState } from 'react';
import type { Task, TerminalInfo } from '../../common/domain.js';
import { useController, useFactory } from '../state/context.js';
import { useFocusRequest } from '../state/focus.js';
import { EgressRefusals, SetupDetails } from './environment/TaskEnvironment.js';
import { TaskArtifacts } from './environment/TaskArtifacts.js';
import { ErrorBox } from './ErrorBox.js';
import { FanoutCompare } from './fanout/FanoutCompare.js';
import { InlineConfirm } from './InlineConfirm.js';
import { formatDuration } from './format.js';
import { ResourceSpark } from './ResourceSpark.js';
import { ReviewPanel } from './ReviewPanel.js';
import { keptUntilTitle, sandboxWords } from './sandbox-words.js';
import { TaskHousekeeping } from './TaskHousekeeping.js';
import { SecurityPanel } from './SecurityPanel.js';
import { StageTimeline } from './StageTimeline.js';
import { TerminalPane } from './TerminalPane.js';
import { AgentTranscript } from './transcript/AgentTranscript.js';
import type { TerminalTab as Tab } from './TerminalTabs.js';
import { SessionChecks } from './session/SessionChecks.js';
import { ActionIcon } from './icons.js';

const FINISHED_PHASES = new Set(['approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed']);

function tabsFor(task: Task, terminals: Record<string, TerminalInfo>): Tab[] {
  const tabs: Tab[] = [];
  // The setup step runs first: its terminal is the first tab (live while it runs, its log after).
  const setupSession = task.setup?.sessionId;
  if (setupSession) {
    const info = terminals[setupSession];
    tabs.push({ sessionId: setupSession, label: 'setup', kind: 'stage', state: info ? termState(info) : task.setup!.status, testId: 'terminal-tab-setup' });
  }
  for (const st of task.stages) {
    if (!st.sessionId) continue;
    const info = terminals[st.sessionId];
    // A retried stage is its next attempt, not a second tab with the same name.
    const label = st.attempt !== undefined && st.attempt > 1 ? `${st.name} · attempt ${st.attempt}` : st.name;
    tabs.push({ sessionId: st.sessionId, label, kind: 'stage', state: info ? termState(info) : st.status, testId: `terminal-tab-${st.name}` });
  }
  // A stage may run several sessions (the test stage's repair rounds): the card
  // points at the last one; the others get their own tabs so the whole log stays readable.
  const listed = new Set(tabs.map((t) => t.sessionId));
  for (const info of Object.values(terminals)) {
    if (info.taskId !== task.id || info.kind !== 'stage' || listed.has(info.id)) continue;
    // The host titles a retry's sessions "test · attempt 2"; the first attempt's plain "test" says so once there are more.
    const retried = task.stages.some((s) => s.name === info.title && s.attempt !== undefined && s.attempt > 1);
    const label = retried ? `${info.title} · attempt 1` : info.title || info.kind;
    tabs.push({ sessionId: info.id, label, kind: 'stage', state: termState(info), testId: `terminal-tab-${info.id}` });
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
  const task = useFactory((s) => (s.selectedTaskId ? s.tasks[s.selectedTaskId] : undefined));
  if (!task) {
    return <NoTask />;
  }
  return <TaskView key={task.id} task={task} />;
}

function NoTask() {
  return (
    <section className="detail empty" data-testid="task-detail-empty" data-region="task" aria-label="Task">
      <p className="hint">Select a task to see its terminals and result.</p>
    </section>
  );
}

function TaskView({ task }: { task: Task }) {
  const controller = useController();
  const terminals = useFactory((s) => s.terminals);
  const activeTab = useFactory((s) => s.activeTab[task.id]);
  const busy = useFactory((s) => s.busy[task.id]);
  const actionError = useFactory((s) => s.actionErrors[task.id]);
  const [confirmDestroy, setConfirmDestroy] = useState(false);
  const title = useRef<HTMLHeadingElement>(null);
  const sandboxLine = useRef<HTMLParagraphElement>(null);
  const destroyButton = useRef<HTMLButtonElement>(null);
  useFocusRequest('task-title', task.id, title);
  useFocusRequest('sandbox-status', task.id, sandboxLine);
  const tabs = tabsFor(task, terminals);
  // Follow the running stage unless the user picked a tab.
  const running = task.setup?.status === 'running' && task.setup.sessionId ? task.setup : task.stages.find((s) => s.status === 'running' && s.sessionId);
  const fallback =
    running?.sessionId ??
    tabs.filter((t) => t.kind === 'stage' && (t.sessionId === task.setup?.sessionId || task.stages.some((s) => s.sessionId === t.sessionId))).at(-1)?.sessionId;
  // A quick sandbox or an agent session has no stage: its live shell is what to show.
  const shell = tabs.filter((t) => t.kind !== 'stage' && t.state === 'running').at(-1) ?? tabs.filter((t) => t.kind !== 'stage').at(-1);
  const current = tabs.find((t) => t.sessionId === activeTab) ?? tabs.find((t) => t.sessionId === fallback) ?? shell;
  const sandboxUp = task.sandbox.status === 'running';
  const destroyed = task.sandbox.status === 'destroyed' || task.sandbox.status === 'none';
  const resultFirst = task.phase === 'review' || !!task.decision;
  const active = !FINISHED_PHASES.has(task.phase) && task.phase !== 'review';
  // Retry runs in the sandbox while it is up, else in a fresh one (the host keeps the seed until Destroy).
  // A quick sandbox has no pipeline to run again.
  const retryable =
    task.kind !== 'quick' &&
    (task.phase === 'interrupted' ||
    ((task.phase === 'failed' || task.phase === 'cancelled') && (sandboxUp || task.sandbox.status === 'lost' || task.sandbox.status === 'none')));

  // An agent's stage: its event stream read as a conversation above the raw log.
  const transcript =
    (task.agent === 'claude-code' || task.agent === 'codex') && current?.kind === 'stage' ? (
      <AgentTranscript key={current.sessionId} sessionId={current.sessionId} live={current.state === 'live'} terminalPanelId={`terminal-panel-${task.id}`} />
    ) : null;

  return (
    <section className="detail" data-testid="task-detail" data-task-id={task.id} aria-label="Task">
      {/* The main pane (F6 region "task"): the task, and in review its result; the terminals are a pane below it. */}
      <div className="task-main" data-region="task">
        <div className="detail-head">
          <div>
            <h2 data-testid="task-title" ref={title} tabIndex={-1} data-region-focus>
              {task.title}
            </h2>
            <p className="muted">
              {task.repoPath ? (
                <>
                  <code>{task.repoPath}</code> · base {task.baseRef} ({task.baseCommit.slice(0, 10)}) · branch <code>{task.branch}</code>
                </>
              ) : (
                'no repository'
              )}
            </p>
            <p className="muted" data-testid="sandbox-status" data-status={task.sandbox.status} ref={sandboxLine} tabIndex={-1} title={keptUntilTitle(task.sandbox)}>
              {sandboxWords(task.sandbox)}
              {task.sandbox.accel ? ` · ${task.sandbox.accel}` : ''}
              {task.sandbox.bootMs !== undefined ? ` · booted in ${formatDuration(task.sandbox.bootMs)}` : ''}
            </p>
            {task.sandbox.coldBootReason ? (
              <p className="muted" data-testid="cold-boot-reason">
                {task.sandbox.coldBootReason}
              </p>
            ) : null}
            <ResourceSpark taskId={task.id} running={sandboxUp} />
          </div>
          <div className="actions">
            {retryable ? (
              <button type="button" className="secondary" data-testid="retry-button" disabled={!!busy} onClick={() => void controller.retry(task.id)}>
                <ActionIcon action="retry" />
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
              ref={destroyButton}
              type="button"
              className="danger"
              data-testid="destroy-button"
              aria-expanded={confirmDestroy}
              disabled={!!busy || destroyed}
              onClick={() => setConfirmDestroy(true)}
            >
              <ActionIcon action="destroy" />
              {busy === 'destroy' ? 'Destroying…' : destroyed ? 'Sandbox destroyed' : 'Destroy sandbox'}
            </button>
            <TaskHousekeeping task={task} />
          </div>
        </div>
        {confirmDestroy && !destroyed ? (
          <DestroyConfirm
            task={task}
            busy={!!busy}
            onCancel={() => {
              setConfirmDestroy(false);
              destroyButton.current?.focus();
            }}
            onConfirm={() => {
              setConfirmDestroy(false);
              void controller.destroy(task.id);
            }}
          />
        ) : null}
        {task.fanout ? <FanoutCompare task={task} /> : null}
        {task.error ? <ErrorBox testId="task-error" error={task.error} /> : null}
        {actionError ? <ErrorBox testId="action-error" error={actionError} /> : null}
        {/* In review and after the decision, the result comes first: it is what the user is here for. */}
        {resultFirst ? <ReviewPanel task={task} /> : null}
      </div>
      {/* Before that, the live terminal: right under the task's head, in view after Start. */}
      {!resultFirst ? transcript : null}
      {!resultFirst ? <TerminalPane task={task} tabs={tabs} current={current} /> : null}
      <div className="task-more">
        <SetupDetails task={task} />
        <EgressRefusals task={task} />
        <TaskArtifacts task={task} />
        <SessionChecks task={task} />
        <StageTimeline task={task} />
        {!resultFirst ? <ReviewPanel task={task} /> : null}
      </div>
      {resultFirst ? transcript : null}
      {resultFirst ? <TerminalPane task={task} tabs={tabs} current={current} /> : null}
      <SecurityPanel task={task} />
    </section>
  );
}

/** Destroying ends QEMU and deletes the overlay: whatever is only in the sandbox is gone, so it asks first. */
function DestroyConfirm({ task, busy, onCancel, onConfirm }: { task: Task; busy: boolean; onCancel: () => void; onConfirm: () => void }) {
  return (
    <InlineConfirm
      id={`destroy-confirm-${task.id}`}
      testId="destroy-confirm"
      question={
        <>
          <strong>Destroy this sandbox?</strong> QEMU stops and the sandbox's disk is deleted: shells close, and anything not brought back is lost. Logs are kept.
        </>
      }
      // Cancel first and focused, so Enter or a double click cannot destroy.
      focus="cancel"
      cancelLabel="Keep it"
      cancelTestId="destroy-cancel-button"
      confirmLabel="Destroy sandbox"
      confirmTestId="destroy-confirmed-button"
      busy={busy}
      onCancel={onCancel}
      onConfirm={onConfirm}
    />
  );
}
