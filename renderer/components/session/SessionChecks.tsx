// The leak checks of a Claude Code session's sandbox in its task view, newest
// first: per turn (Stop), at the end, or at a subagent's stop, each with its
// verdict, what it scanned and, when not clean, what it found (by name and
// place, never a value). A long session shows its latest checks and a button
// for the rest (the host keeps the newest 200).
import { useState } from 'react';
import type { SessionCheck, Task } from '../../../common/domain.js';
import { useController, useFactory } from '../../state/context.js';
import { formatDuration } from '../format.js';
import { checkLabel, outcomeWords, scannedWords, subagentName, verdictWords } from './session-words.js';
import './session.css';

const FIRST_SHOWN = 10;

/** HH:MM:SS local time, as a check's moment within a session. */
function clock(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '?';
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

export function SessionChecks({ task }: { task: Task }) {
  const controller = useController();
  const [all, setAll] = useState(false);
  const parent = useFactory((s) => (task.session?.subagent ? s.tasks[task.session.subagent.parentTaskId] : undefined));
  const session = task.session;
  if (!session) return null;
  const newestFirst = [...session.checks].reverse();
  const shown = all ? newestFirst : newestFirst.slice(0, FIRST_SHOWN);
  const bad = session.checks.filter((c) => c.verdict !== 'clean').length;
  const headId = `session-checks-head-${task.id}`;
  const listId = `session-checks-list-${task.id}`;
  const sub = session.subagent;
  return (
    <section className="session-checks" data-testid="session-checks" aria-labelledby={headId}>
      <h3 id={headId} className="session-checks-head">
        Leak checks{' '}
        <span className="muted">
          {session.checks.length} recorded{session.turns ? ` · ${session.turns} turn${session.turns === 1 ? '' : 's'}` : ''}
          {bad ? ` · ${bad} not clean` : ''}
        </span>
      </h3>
      {sub ? (
        <p data-testid="subagent-summary">
          Subagent <strong>{subagentName(task)}</strong> of{' '}
          {parent ? (
            <button type="button" className="link" data-testid="subagent-parent" onClick={() => controller.open(parent.id)}>
              {parent.title}
            </button>
          ) : (
            `session ${session.sessionId}`
          )}
          {sub.outcome ? <> · {outcomeWords(sub.outcome)}</> : null}
        </p>
      ) : null}
      {shown.length ? (
        <ol className="session-check-list" id={listId} data-testid="session-check-list">
          {shown.map((c, i) => (
            <CheckItem key={`${c.at}-${c.hook}-${i}`} check={c} />
          ))}
        </ol>
      ) : (
        <p className="muted">No check yet: the first runs when the session's first turn ends.</p>
      )}
      {newestFirst.length > FIRST_SHOWN ? (
        <button type="button" className="secondary small" data-testid="session-checks-more" aria-expanded={all} aria-controls={listId} onClick={() => setAll(!all)}>
          {all ? `Show the latest ${FIRST_SHOWN}` : `Show all ${newestFirst.length} checks`}
        </button>
      ) : null}
    </section>
  );
}

function CheckItem({ check }: { check: SessionCheck }) {
  const bad = check.verdict !== 'clean';
  return (
    <li className={bad ? 'session-check bad' : 'session-check'} data-testid="session-check" data-verdict={check.verdict} data-turn={check.turn} data-hook={check.hook}>
      <span className="check-when">
        {checkLabel(check)} · <time dateTime={check.at}>{clock(check.at)}</time>
      </span>{' '}
      <span className={bad ? 'check-bad' : 'check-ok'}>
        <span aria-hidden="true">{bad ? '⚠ ' : '✓ '}</span>
        {verdictWords(check)}
      </span>{' '}
      <span className="muted check-scanned">
        · {scannedWords(check)}
        {check.durationMs !== undefined ? ` in ${formatDuration(check.durationMs)}` : ''}
      </span>
    </li>
  );
}
