// The agents' scratch files (the plan, the review) kept with the task instead of
// committed into its branch: listed by name and size, each opened on request.
// Their text comes from the sandbox: shown as text, hidden characters escaped.
import { useState } from 'react';
import type { ErrorInfo, Task } from '../../../common/domain.js';
import { escapeContentLine, escapeName } from '../../../common/review-text.js';
import { useController } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';

export function TaskArtifacts({ task }: { task: Task }) {
  const artifacts = task.artifacts ?? [];
  if (!artifacts.length) return null;
  return (
    <section className="task-artifacts" data-testid="task-artifacts" aria-labelledby={`artifacts-heading-${task.id}`}>
      <h3 id={`artifacts-heading-${task.id}`}>Artifacts ({artifacts.length})</h3>
      <p className="hint">Files the agents wrote for this task (kept here, not in its branch).</p>
      <ul>
        {artifacts.map((a) => (
          <ArtifactRow key={a.name} task={task} name={a.name} bytes={a.bytes} truncated={a.truncated} />
        ))}
      </ul>
    </section>
  );
}

function ArtifactRow({ task, name, bytes, truncated }: { task: Task; name: string; bytes: number; truncated: boolean }) {
  const controller = useController();
  const [text, setText] = useState<string>();
  const [error, setError] = useState<ErrorInfo>();
  const toggle = async () => {
    if (text !== undefined) return setText(undefined);
    setError(undefined);
    try {
      setText((await controller.artifact(task.id, name)).text);
    } catch (err) {
      setError(toErrorInfo(err));
    }
  };
  const shown = escapeName(name);
  return (
    <li data-testid={`artifact-${name}`}>
      <button type="button" aria-expanded={text !== undefined} onClick={() => void toggle()}>
        {text !== undefined ? 'Hide' : 'Show'} {shown}
      </button>{' '}
      <span className="hint">
        {bytes.toLocaleString()} bytes{truncated ? ' (cut at the size limit)' : ''}
      </span>
      {error ? <ErrorBox testId={`artifact-error-${name}`} error={error} /> : null}
      {text !== undefined ? (
        <pre className="artifact-text" aria-label={`${shown} text`} tabIndex={0}>
          {text.split('\n').map(escapeContentLine).join('\n')}
        </pre>
      ) : null}
    </li>
  );
}
