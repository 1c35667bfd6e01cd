// Per sandbox: the proxy's audit log and the leak-check verdict. A leak is a
// security failure and is shown as one, loudly.
import { useCallback, useEffect, useState } from 'react';
import type { AuditEntry, LeakReport } from '../../common/credentials.js';
import type { CredentialCall } from './client.js';

export function LeakCheckBadge({ report }: { report: LeakReport | null | undefined }) {
  if (!report) return <span className="pill muted" data-testid="leakcheck-badge">leak check: not run</span>;
  if (report.verdict === 'leak') {
    return (
      <div className="error-box" role="alert" data-testid="leakcheck-badge">
        <span className="error-name">SECURITY FAILURE</span>{' '}
        <span className="error-message">
          a credential was found inside the sandbox ({report.hits.length} hit{report.hits.length === 1 ? '' : 's'}:{' '}
          {[...new Set(report.hits.map((h) => `${h.credentialId} in ${h.source} as ${h.encoding}`))].join('; ')}). Revoke and replace it.
        </span>
      </div>
    );
  }
  if (report.verdict === 'incomplete') {
    return (
      <span className="pill warn" data-testid="leakcheck-badge" title={report.scanned.map((s) => `${s.source}: ${s.error ?? 'ok'}`).join('\n')}>
        leak check incomplete
      </span>
    );
  }
  return (
    <span className="pill ok" data-testid="leakcheck-badge">
      no credential in the sandbox ({report.scanned.map((s) => s.source).join(', ')})
    </span>
  );
}

export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  return (
    <table data-testid="audit-table">
      <thead>
        <tr>
          <th>Time</th>
          <th>Request</th>
          <th>Rule</th>
          <th>Status</th>
          <th>Bytes in / out</th>
        </tr>
      </thead>
      <tbody>
        {entries.map((e, i) => (
          <tr key={`${e.time}-${i}`} className={e.rule.startsWith('refused') ? 'refused' : undefined}>
            <td>{e.time.slice(11, 19)}</td>
            <td>
              <code>
                {e.method} {e.host}
                {e.path}
              </code>
            </td>
            <td>{e.rule}</td>
            <td>{e.status}</td>
            <td>
              {e.bytesIn} / {e.bytesOut}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Audit log and leak check of one sandbox, with a button to run the check now. */
export function SandboxSecurity({ call, taskId, refreshKey }: { call: CredentialCall; taskId: string; refreshKey?: unknown }) {
  const [entries, setEntries] = useState<AuditEntry[]>([]);
  const [report, setReport] = useState<LeakReport | null>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const load = useCallback(async () => {
    try {
      setEntries(await call('audit.list', { sandboxId: taskId, limit: 200 }));
      setReport(await call('leakcheck.get', { taskId }));
    } catch (err) {
      setError((err as Error).message);
    }
  }, [call, taskId]);
  useEffect(() => {
    void load();
  }, [load, refreshKey]);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      setReport(await call('leakcheck.run', { taskId }));
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section data-testid="sandbox-security">
      <h3>Credentials used by this sandbox</h3>
      <LeakCheckBadge report={report} />{' '}
      <button type="button" className="small secondary" disabled={busy} onClick={() => void run()} data-testid="leakcheck-run">
        {busy ? 'Scanning…' : 'Run leak check'}
      </button>
      {error ? <p className="note">{error}</p> : null}
      <AuditTable entries={entries} />
    </section>
  );
}
