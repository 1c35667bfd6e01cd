// One file asked for on its own: its leading bytes (escaped by the host, shown
// as text) when it is not text, and its own patch when the patch above lacks it.
import { useMemo } from 'react';
import { escapeContentLine, escapeName } from '../../../common/review-text.js';
import type { DiffFile } from '../../../common/review.js';
import type { ReviewFileState } from '../../state/store.js';
import { formatBytes, NOT_TEXT_WORDS } from './format.js';
import { buildPatchModel } from './patch-model.js';
import { PatchView } from './PatchView.js';

interface Props {
  path: string;
  file: DiffFile | undefined;
  state: ReviewFileState | undefined;
  onClose: () => void;
  onRetry: () => void;
}

export function FileDetail({ path, file, state, onClose, onRetry }: Props) {
  const detail = state?.state === 'loaded' ? state.detail : undefined;
  const model = useMemo(() => (detail ? buildPatchModel(detail.patch) : undefined), [detail]);
  return (
    <div className="file-detail" data-testid="review-file-detail" data-path={escapeName(path)}>
      <div className="file-detail-head">
        <strong>
          <code>{escapeName(path)}</code>
        </strong>{' '}
        {file?.notText ? <span className="file-nottext">not shown as text: {NOT_TEXT_WORDS[file.notText]}</span> : null}{' '}
        <button type="button" className="link" data-testid="review-file-close" onClick={onClose}>
          close
        </button>
      </div>
      {!state || state.state === 'loading' ? <p className="hint">Loading the file…</p> : null}
      {state?.state === 'failed' ? (
        <p className="note" role="alert" data-testid="review-file-error">
          {state.error.name}: {state.error.message}{' '}
          <button type="button" className="link" onClick={onRetry}>
            try again
          </button>
        </p>
      ) : null}
      {detail && model ? (
        <>
          <p className="muted">{formatBytes(detail.size)}</p>
          {/* Hosts that say why a file has no leading bytes (deleted, submodule, over the cap) send a note. */}
          {'note' in detail && typeof detail.note === 'string' ? (
            <p className="note" data-testid="review-file-note">
              {escapeContentLine(detail.note)}
            </p>
          ) : null}
          {file?.notText || file?.binary ? (
            <>
              <p className="muted">Leading bytes (printable ASCII as is, everything else escaped):</p>
              <pre className="leading-bytes" data-testid="review-file-leading-bytes">
                {escapeContentLine(detail.leadingBytes)}
              </pre>
            </>
          ) : null}
          {model.rowCount ? <PatchView model={model} testId="review-file-patch" label={`Patch of ${escapeName(path)}`} /> : null}
          {detail.patchTruncated ? (
            <p className="note" data-testid="review-file-patch-truncated">
              This file's patch was cut at its size limit: what is above is not all of it.
            </p>
          ) : null}
        </>
      ) : null}
    </div>
  );
}
