// The diff between two ways in review (issue 32): what one way changed that the
// other did not, computed by the host from both results in quarantine (capped,
// credential values masked) and drawn by the review's patch view, which escapes
// hidden and control characters. Two selects and a button: keyboard as usual.
import { useMemo, useState } from 'react';
import type { ErrorInfo } from '../../../common/domain.js';
import type { WayComparison, WaysDiff as WaysDiffResult } from '../../../common/fanout.js';
import { useController } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';
import { buildPatchModel } from '../review/patch-model.js';
import { PatchView } from '../review/PatchView.js';

export function WaysDiff({ group, ways }: { group: string; ways: WayComparison[] }) {
  const controller = useController();
  const inReview = ways.filter((w) => w.state === 'review').map((w) => w.way);
  const [from, setFrom] = useState(inReview[0] ?? 1);
  const [to, setTo] = useState(inReview[1] ?? inReview[0] ?? 1);
  const [result, setResult] = useState<WaysDiffResult>();
  const [error, setError] = useState<ErrorInfo>();
  const [busy, setBusy] = useState(false);
  const model = useMemo(() => (result ? buildPatchModel(result.diff.patch) : undefined), [result]);
  if (inReview.length < 2) return null;

  const show = async () => {
    setBusy(true);
    setError(undefined);
    try {
      setResult(await controller.bridge.call('fanout.diff', { group, from, to }));
    } catch (err) {
      setResult(undefined);
      setError(toErrorInfo(err));
    } finally {
      setBusy(false);
    }
  };
  const picker = (label: string, value: number, set: (n: number) => void, testId: string) => (
    <label>
      {label}{' '}
      <select data-testid={testId} value={value} onChange={(e) => set(Number(e.target.value))}>
        {inReview.map((w) => (
          <option key={w} value={w}>
            Way {w}
          </option>
        ))}
      </select>
    </label>
  );

  return (
    <div className="ways-diff" data-testid="ways-diff">
      <h4>Diff between two ways</h4>
      <div className="ways-diff-pick">
        {picker('From', from, setFrom, 'ways-diff-from')}
        {picker('to', to, setTo, 'ways-diff-to')}
        <button type="button" className="small" data-testid="ways-diff-show" disabled={busy || from === to} onClick={() => void show()}>
          Show the diff
        </button>
        {from === to ? <span className="hint">Pick two different ways.</span> : null}
      </div>
      {error ? <ErrorBox testId="ways-diff-error" error={error} /> : null}
      {result && model ? (
        <>
          <p className="muted" data-testid="ways-diff-summary">
            What way {result.to} has that way {result.from} has not: lines with − are way {result.from}'s, lines with + way {result.to}'s.
          </p>
          {model.rowCount ? (
            <PatchView model={model} testId="ways-diff-patch" label={`Diff from way ${result.from} to way ${result.to}`} />
          ) : (
            <p className="hint" data-testid="ways-diff-patch">
              The two ways made the same change.
            </p>
          )}
          {result.diff.patchTruncated ? (
            <p className="note" data-testid="ways-diff-truncated">
              This diff was cut at its size limit: what is above is not all of it.
            </p>
          ) : null}
        </>
      ) : null}
    </div>
  );
}
