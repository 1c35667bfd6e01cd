// What the quarantine flagged, above the diff and most severe first, each in
// words (severity is written out, not only coloured), and every secret finding
// with its file, line and masked value. Lists of any length are virtualised.
import { useMemo } from 'react';
import { escapeContentLine, escapeName } from '../../../common/review-text.js';
import type { ReviewFlag, SecretFinding } from '../../../common/review.js';
import { plural } from './format.js';
import { VirtualRows } from './VirtualRows.js';

const ROW_HEIGHT = 24;
const MAX_HEIGHT = 220;
const SEVERITY_ORDER = { danger: 0, warning: 1 } as const;

export function sortFlags(flags: ReviewFlag[]): ReviewFlag[] {
  // Array.prototype.sort is stable: within a severity the host's order stays.
  return [...flags].sort((a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity]);
}

function where(path: string, line: number | undefined): string {
  return `${escapeName(path)}${line !== undefined ? `:${line}` : ''}`;
}

export function ReviewFlags({ flags, secrets }: { flags: ReviewFlag[]; secrets: SecretFinding[] }) {
  const sorted = useMemo(() => sortFlags(flags), [flags]);
  const danger = useMemo(() => flags.filter((f) => f.severity === 'danger').length, [flags]);
  const widthCh = useMemo(() => sorted.reduce((w, f) => Math.max(w, where(f.path, f.line).length + f.message.length), 0) + 30, [sorted]);
  const secretsCh = useMemo(
    () => secrets.reduce((w, s) => Math.max(w, where(s.path, s.line).length + s.rule.length + escapeContentLine(s.masked).length), 0) + 30,
    [secrets],
  );
  if (!flags.length && !secrets.length) return null;
  return (
    <div className="review-flags" data-testid="review-flags">
      {flags.length ? (
        <>
          <h4 role={danger ? 'alert' : undefined} data-testid="review-flags-summary">
            {plural(flags.length, 'flag')}: {danger} danger, {flags.length - danger} warning
          </h4>
          <VirtualRows
            count={sorted.length}
            rowHeight={ROW_HEIGHT}
            maxHeight={MAX_HEIGHT}
            widthCh={widthCh}
            className="flag-list"
            testId="review-flag-list"
            label="Flags"
            row={(index, style) => {
              const f = sorted[index]!;
              return (
                <div key={index} className={`flag-row flag-${f.severity}`} style={style} data-testid="review-flag" data-kind={f.kind} data-severity={f.severity}>
                  <span className="flag-severity">{f.severity === 'danger' ? 'DANGER' : 'WARNING'}</span>{' '}
                  <span className="flag-kind">{f.kind}</span> <code className="flag-where">{where(f.path, f.line)}</code>{' '}
                  <span className="flag-message">{escapeContentLine(f.message)}</span>
                </div>
              );
            }}
          />
        </>
      ) : null}
      {secrets.length ? (
        <>
          <h4 role="alert" data-testid="review-secrets-summary">
            {plural(secrets.length, 'possible secret')} in the returned work (values masked)
          </h4>
          <VirtualRows
            count={secrets.length}
            rowHeight={ROW_HEIGHT}
            maxHeight={MAX_HEIGHT}
            widthCh={secretsCh}
            className="flag-list"
            testId="review-secrets"
            label="Possible secrets"
            row={(index, style) => {
              const s = secrets[index]!;
              return (
                <div key={index} className="flag-row flag-danger" style={style} data-testid="review-secret" data-rule={s.rule}>
                  <span className="flag-severity">SECRET</span> <code className="flag-where">{where(s.path, s.line)}</code>{' '}
                  <span className="flag-kind">{escapeContentLine(s.rule)}</span> <code className="secret-masked">{escapeContentLine(s.masked)}</code>
                </div>
              );
            }}
          />
        </>
      ) : null}
    </div>
  );
}
