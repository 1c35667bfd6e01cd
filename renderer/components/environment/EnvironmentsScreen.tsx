// Cached environments: the layers setup left behind (base image ← layer ← task
// overlay), their disk use against the budget, and Delete (asked first).
import { useEffect, useRef, useState } from 'react';
import type { ErrorInfo } from '../../../common/domain.js';
import type { LayerInfo } from '../../../common/environment.js';
import { escapeName } from '../../../common/review-text.js';
import { useController, useFactory } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';

const GB = 1024 ** 3;

export function formatSize(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '?';
  if (bytes < 1024 ** 2) return `${Math.round(bytes / 1024)} KiB`;
  if (bytes < GB) return `${(bytes / 1024 ** 2).toFixed(0)} MiB`;
  return `${(bytes / GB).toFixed(1)} GiB`;
}

const when = (iso: string) => iso.slice(0, 16).replace('T', ' ');

export function EnvironmentsScreen() {
  const controller = useController();
  const layers = useFactory((s) => s.layers);
  const [error, setError] = useState<ErrorInfo>();
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    controller.loadLayers().catch((err) => setError(toErrorInfo(err)));
  }, [controller]);
  const used = (layers ?? []).reduce((n, l) => n + l.sizeBytes, 0);
  return (
    <section className="environments panel-screen" data-testid="environments-screen">
      <h2 ref={heading} tabIndex={-1} data-testid="environments-heading">
        Environments
      </h2>
      <p className="hint">
        After a repository's setup ran, its disk is kept as a cached environment: the next task on the same repository
        with the same files (the same tree) and the same setup boots on it and skips setup; any other commit's files run
        setup anew. The least recently used go first when the budget is full.
      </p>
      <LayerBudget used={used} />
      {error ? <ErrorBox testId="layers-error" error={error} /> : null}
      {layers === undefined ? null : layers.length === 0 ? (
        <p className="hint" data-testid="layers-empty">
          No cached environments yet.
        </p>
      ) : (
        <table className="layer-table" data-testid="layers-table">
          <thead>
            <tr>
              <th>Repository</th>
              <th>Size</th>
              <th>Last used</th>
              <th>Created</th>
              <th>Made from</th>
              <th>Environment</th>
              <th>In use</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {layers.map((l) => (
              <LayerRow key={l.id} layer={l} onRemoved={() => heading.current?.focus()} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function LayerBudget({ used }: { used: number }) {
  const controller = useController();
  const budget = useFactory((s) => s.settings?.layerBudgetGb);
  const [draft, setDraft] = useState<string>();
  const [error, setError] = useState<ErrorInfo>();
  const [saved, setSaved] = useState(false);
  const value = draft ?? (budget !== undefined ? String(budget) : '');
  const save = async () => {
    setError(undefined);
    setSaved(false);
    const gb = Number(value);
    if (!value.trim() || !Number.isFinite(gb) || gb < 1 || gb > 4096) {
      setError({ name: 'InvalidInput', message: `layerBudgetGb: "${value}" is not a number of GiB from 1 to 4096` });
      return;
    }
    try {
      await controller.saveSettings({ layerBudgetGb: gb });
      setDraft(undefined);
      setSaved(true);
    } catch (err) {
      setError(toErrorInfo(err));
    }
  };
  return (
    <form
      className="inline-form budget"
      data-testid="layer-budget-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <span data-testid="layers-used">
        {formatSize(used)} used{budget !== undefined ? ` of ${budget} GiB` : ''}
      </span>
      <label>
        Budget (GiB)
        <input type="number" min={1} max={4096} step="any" data-testid="layer-budget-input" value={value} onChange={(e) => setDraft(e.target.value)} />
      </label>
      <button type="submit" className="small" data-testid="layer-budget-save">
        Save budget
      </button>
      {saved ? (
        <span className="ok" role="status" data-testid="layer-budget-saved">
          Saved.
        </span>
      ) : null}
      {error ? <ErrorBox testId="layer-budget-error" error={error} /> : null}
    </form>
  );
}

function LayerRow({ layer, onRemoved }: { layer: LayerInfo; onRemoved: () => void }) {
  const controller = useController();
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ErrorInfo>();
  const deleteButton = useRef<HTMLButtonElement>(null);
  // A disabled button cannot take the focus: give it back once the button is enabled again.
  const [refocus, setRefocus] = useState(false);
  useEffect(() => {
    if (refocus && !busy) {
      deleteButton.current?.focus();
      setRefocus(false);
    }
  }, [refocus, busy]);
  const remove = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await controller.removeLayer(layer.id);
      // The row is gone with its buttons: the screen's heading takes the focus, not the page body.
      onRemoved();
    } catch (err) {
      setError(toErrorInfo(err));
      setConfirming(false);
      setRefocus(true);
    } finally {
      setBusy(false);
    }
  };
  const cancel = () => {
    setConfirming(false);
    deleteButton.current?.focus();
  };
  const promptId = `layer-confirm-${layer.id}`;
  return (
    <>
      <tr data-testid={`layer-row-${layer.id}`} data-in-use={layer.inUse}>
        <td>
          <code>{escapeName(layer.repo)}</code>
        </td>
        <td>{formatSize(layer.sizeBytes)}</td>
        <td>{when(layer.lastUsedAt)}</td>
        <td>{when(layer.createdAt)}</td>
        <td data-testid={`layer-made-${layer.id}`}>
          {layer.made ? (
            <span title={`commit ${layer.made.commit}, tree ${layer.made.tree}`}>
              commit <code>{layer.made.commit.slice(0, 12)}</code>, tree <code>{layer.made.tree.slice(0, 12)}</code>
            </span>
          ) : (
            'not recorded'
          )}
        </td>
        <td>{layer.summary.map(escapeName).join(' · ')}</td>
        <td>{layer.inUse ? 'in use' : ''}</td>
        <td className="actions">
          <button
            ref={deleteButton}
            type="button"
            className="danger small"
            data-testid={`layer-delete-${layer.id}`}
            aria-label={`Delete the cached environment of ${escapeName(layer.repo)}`}
            aria-expanded={confirming}
            disabled={busy}
            onClick={() => setConfirming(true)}
          >
            Delete
          </button>
        </td>
      </tr>
      {confirming || error ? (
        <tr>
          <td colSpan={8}>
            {confirming ? (
              <div
                className="destroy-confirm"
                role="group"
                aria-labelledby={promptId}
                data-testid={`layer-confirm-${layer.id}`}
                onKeyDown={(e) => {
                  if (e.key === 'Escape') {
                    e.preventDefault();
                    cancel();
                  }
                }}
              >
                <p id={promptId}>
                  <strong>Delete this cached environment?</strong> The next task on this repository runs its setup again.
                  {layer.inUse ? ' A sandbox is running on it: it stays on disk until that sandbox ends.' : ''}
                </p>
                <div className="actions">
                  <button type="button" className="secondary small" data-testid={`layer-keep-${layer.id}`} autoFocus onClick={cancel}>
                    Keep it
                  </button>
                  <button type="button" className="danger small" data-testid={`layer-delete-confirmed-${layer.id}`} disabled={busy} onClick={() => void remove()}>
                    Delete
                  </button>
                </div>
              </div>
            ) : null}
            {error ? <ErrorBox testId={`layer-error-${layer.id}`} error={error} /> : null}
          </td>
        </tr>
      ) : null}
    </>
  );
}
