// Per-sandbox security: the leak check (a hit is a security failure, shown
// loudly) and the proxy's audit log of every request the sandbox made.
import { useEffect, useState } from 'react';
import type { Task } from '../../common/domain.js';
import { useController, useFactory } from '../state/context.js';
import { toErrorInfo } from '../state/store.js';
import { formatBytes } from './review/format.js';

/** What each leak check source is, in words. */
const LEAK_SOURCE_NAMES: Record<string, string> = {
  overlay: 'disk overlay',
  memory: 'guest memory',
  file: 'file',
  'serial-log': 'serial console log',
  'stage-log': 'stage logs',
  'returned-work': 'returned work',
};

export function SecurityPanel({ task }: { task: Task }) {
  const controller = useController();
  const audit = useFactory((s) => s.audit[task.id]);
  const report = useFactory((s) => s.leakReports[task.id]);
  const busy = useFactory((s) => s.busy[task.id]);
  const [loadError, setLoadError] = useState<string>();

  useEffect(() => {
    controller.loadSecurity(task.id).catch((err) => setLoadError(toErrorInfo(err).message));
  }, [controller, task.id]);

  return (
    <section className="security" data-testid="security-panel" data-region="security">
      <h3>Sandbox security</h3>
      {report ? (
        <div
          className={`leak-report leak-${report.verdict}`}
          role={report.verdict === 'leak' ? 'alert' : undefined}
          data-testid="leak-report"
          data-verdict={report.verdict}
        >
          {report.verdict === 'leak' ? (
            <strong>SECURITY FAILURE: a credential was found inside the sandbox.</strong>
          ) : report.verdict === 'clean' ? (
            <strong>Leak check clean: no credential found in anything scanned.</strong>
          ) : (
            <strong>Leak check incomplete: not every source could be scanned.</strong>
          )}{' '}
          <span className="muted">
            {report.at.slice(0, 19).replace('T', ' ')} · {report.credentialIds.length} credential(s) ·{' '}
            {report.scanned
              .map((s) => `${LEAK_SOURCE_NAMES[s.source] ?? s.source} ${formatBytes(s.bytes)}${s.error ? ` (not fully scanned: ${s.error})` : ''}${s.notInflatedCount ? ` (${s.notInflatedCount} compressed stream(s) not opened)` : ''}`)
              .join(', ')}
          </span>
          {report.hits.length ? (
            <ul data-testid="leak-hits">
              {report.hits.map((h, i) => (
                <li key={i}>
                  {h.credentialId} as {h.encoding} in {LEAK_SOURCE_NAMES[h.source] ?? h.source}
                  {h.detail ? ` (${h.detail})` : ''} at offset {h.offset}
                </li>
              ))}
            </ul>
          ) : null}
        </div>
      ) : (
        <p className="hint">No leak check yet for this sandbox.</p>
      )}
      {task.sandbox.status === 'running' ? (
        <button type="button" className="secondary small" data-testid="leakcheck-button" disabled={!!busy} onClick={() => void controller.runLeakCheck(task.id)}>
          {busy === 'leak check' ? 'Scanning…' : 'Run leak check now'}
        </button>
      ) : null}
      {loadError ? <p className="note">{loadError}</p> : null}
      <details className="audit" data-testid="audit-log">
        <summary>Proxy requests ({audit?.length ?? 0})</summary>
        {audit?.length ? (
          <table>
            <thead>
              <tr>
                <th>Time</th>
                <th>Method</th>
                <th>Host</th>
                <th>Path</th>
                <th>Rule</th>
                <th>Status</th>
                <th>Bytes in/out</th>
              </tr>
            </thead>
            <tbody>
              {audit.map((a, i) => (
                <tr key={i} className={a.status >= 400 ? 'bad' : ''}>
                  <td>{a.time.slice(11, 19)}</td>
                  <td>{a.method}</td>
                  <td>{a.host}</td>
                  <td className="path">{a.path}</td>
                  <td>{a.rule}</td>
                  <td>{a.status}</td>
                  <td>
                    {a.bytesIn}/{a.bytesOut}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <p className="hint">No requests through the proxy.</p>
        )}
      </details>
    </section>
  );
}
