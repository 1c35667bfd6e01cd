// The agent's conversation in a stage, read from its terminal (the raw log, shown
// right below): messages, each tool call with its input and its result folded,
// errors in words, and tokens and cost. Read again every 2 s while it runs.
import { useEffect, useState } from 'react';
import { escapeContentLine } from '../../../common/review-text.js';
import { useController } from '../../state/context.js';
import { terminalRegistryFor } from '../../terminal/index.js';
import { formatCost } from '../format.js';
import { transcriptOf, type TranscriptEntry } from './agent-events.js';

const READ_EVERY_MS = 2000;

/** Sandbox text as it may be shown: hidden and control characters as visible escapes, per line. */
const shown = (s: string) => s.split('\n').map(escapeContentLine).join('\n');

export function AgentTranscript({ sessionId, live, terminalPanelId }: { sessionId: string; live: boolean; terminalPanelId: string }) {
  const controller = useController();
  const [entries, setEntries] = useState<TranscriptEntry[]>([]);
  useEffect(() => {
    const registry = terminalRegistryFor(controller.bridge);
    const read = () => setEntries(transcriptOf(registry.text(sessionId)));
    // The terminal may still be replaying its log: read soon, then while the stage runs.
    const first = setTimeout(read, 300);
    const every = live ? setInterval(read, READ_EVERY_MS) : undefined;
    return () => {
      clearTimeout(first);
      if (every) clearInterval(every);
    };
  }, [controller, sessionId, live]);
  if (!entries.length) return null;
  return (
    <details className="transcript" data-testid="agent-transcript" open>
      <summary>
        Agent conversation <span className="muted">({entries.filter((e) => e.kind === 'tool').length} tool calls)</span>
      </summary>
      <ol className="transcript-entries">
        {entries.map((e, i) => (
          <li key={i} className={`transcript-${e.kind}`} data-testid={`transcript-${e.kind}`}>
            {e.kind === 'message' ? (
              <p className="transcript-text">{shown(e.text)}</p>
            ) : e.kind === 'tool' ? (
              <details>
                <summary>
                  <span aria-hidden="true">{e.result === undefined ? '◐' : e.failed ? '✗' : '✓'}</span> <strong>{shown(e.name)}</strong>{' '}
                  <span className="muted">{e.result === undefined ? 'running' : e.failed ? 'failed' : 'done'}</span>
                </summary>
                <pre className="transcript-input" data-testid="transcript-tool-input" tabIndex={0}>
                  {shown(e.input)}
                </pre>
                {e.result !== undefined ? (
                  <pre className="transcript-result" data-testid="transcript-tool-result" tabIndex={0}>
                    {shown(e.result) || '(no output)'}
                  </pre>
                ) : null}
              </details>
            ) : e.kind === 'error' ? (
              <p className="transcript-error" role="note">
                <strong>Error:</strong> {shown(e.text)}
              </p>
            ) : (
              <p className="transcript-end muted">
                {[
                  e.problem ? `ended: ${shown(e.problem)}` : 'finished',
                  e.tokensIn !== undefined ? `${e.tokensIn.toLocaleString('en')} tokens in` : '',
                  e.tokensOut !== undefined ? `${e.tokensOut.toLocaleString('en')} out` : '',
                  formatCost(e.costUsd),
                ]
                  .filter(Boolean)
                  .join(' · ')}
              </p>
            )}
          </li>
        ))}
      </ol>
      <p className="hint">
        <button
          type="button"
          className="secondary small"
          data-testid="transcript-raw-log"
          onClick={() => {
            // The raw log is the stage's terminal: its tab takes the focus, its pane comes into view.
            document.getElementById(terminalPanelId)?.scrollIntoView?.({ block: 'nearest' });
            document.querySelector<HTMLElement>(`[aria-controls="${terminalPanelId}"]`)?.focus();
          }}
        >
          Raw log
        </button>{' '}
        The stage's terminal below has every line as the agent printed it.
      </p>
    </details>
  );
}
