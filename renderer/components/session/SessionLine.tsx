// The line a Claude Code session's card gets under its title: for the session,
// its leak checks at a glance (the newest, or the one that was not clean: it
// kept the sandbox); for a subagent's sandbox, nested under its session's row,
// whose subagent it is, its check at SubagentStop and where its work went.
import { interactiveAgentName, type Task } from '../../../common/domain.js';
import { useFactory } from '../../state/context.js';
import { checkLabel, lastCheck, outcomeWords, subagentName, verdictWords } from './session-words.js';
import './session.css';

export function SessionLine({ task }: { task: Task }) {
  // A record naming itself as its session nests under nothing (the board's order ignores it too).
  const parentTitle = useFactory((s) => {
    const p = task.session?.subagent?.parentTaskId;
    return p && p !== task.id ? s.tasks[p]?.title : undefined;
  });
  const session = task.session;
  if (!session) return null;
  const sub = session.subagent;
  if (sub) {
    const check = lastCheck(task);
    const bad = check && check.verdict !== 'clean';
    return (
      <div className="session-line subagent-line" data-testid={`subagent-line-${task.id}`} data-nested={parentTitle ? '' : undefined}>
        <span className="sr-only">{parentTitle ? `Subagent of ${parentTitle}: ` : 'Subagent: '}</span>
        <span aria-hidden="true">↳ </span>
        subagent <span className="subagent-name">{subagentName(task)}</span>
        {' · '}
        {check ? (
          <span className={bad ? 'check-bad' : 'check-ok'} data-testid={`subagent-verdict-${task.id}`} data-verdict={check.verdict}>
            {bad ? <span aria-hidden="true">⚠ </span> : null}
            {verdictWords(check)}
          </span>
        ) : (
          <span className="muted">no SubagentStop check yet</span>
        )}
        {sub.outcome ? (
          <>
            {' · '}
            <span data-testid={`subagent-outcome-${task.id}`} data-kind={sub.outcome.kind}>
              {outcomeWords(sub.outcome)}
            </span>
          </>
        ) : null}
      </div>
    );
  }
  // A check that was not clean kept the sandbox: it stays the card's news, whatever came after.
  const bad = session.checks.findLast((c) => c.verdict !== 'clean');
  const shown = bad ?? lastCheck(task);
  return (
    <div className="session-line" data-testid={`session-line-${task.id}`}>
      {interactiveAgentName(session.agent)} session · {session.turns} turn{session.turns === 1 ? '' : 's'}
      {shown ? (
        <>
          {' · '}
          <span className={bad ? 'check-bad' : 'check-ok'} data-testid={`session-verdict-${task.id}`} data-verdict={shown.verdict}>
            {bad ? <span aria-hidden="true">⚠ </span> : null}
            {checkLabel(shown)}: {verdictWords(shown)}
          </span>
        </>
      ) : (
        <span className="muted"> · no leak check yet</span>
      )}
    </div>
  );
}
