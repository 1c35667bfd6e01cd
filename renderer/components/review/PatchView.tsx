// A unified patch, virtualised: every row is plain text (React escapes it),
// hidden and control characters are drawn as marked escapes, and a line with
// bidi or invisible characters is flagged in the gutter in words.
import { forwardRef, useMemo } from 'react';
import { describeHiddenChar, hiddenChars } from '../../../common/review-text.js';
import { lineKind, patchRow, segments, type PatchModel } from './patch-model.js';
import { VirtualRows, type VirtualRowsHandle } from './VirtualRows.js';

export const PATCH_ROW_HEIGHT = 18;
const PATCH_MAX_HEIGHT = 480;
const GUTTER_CH = 8;

interface Props {
  model: PatchModel;
  testId: string;
  label: string;
}

const KIND_CLASS = {
  header: 'diff-header',
  file: 'diff-file',
  hunk: 'diff-hunk',
  add: 'diff-add',
  del: 'diff-del',
  ctx: 'diff-ctx',
  meta: 'diff-meta',
} as const;

export const PatchView = forwardRef<VirtualRowsHandle, Props>(function PatchView({ model, testId, label }, ref) {
  const digits = String(model.maxLineNo).length;
  const widthCh = useMemo(() => model.maxCols + GUTTER_CH + 2 + 2 * (digits + 1), [model, digits]);
  if (model.rowCount === 0) {
    return (
      <p className="hint" data-testid={testId}>
        The patch is empty.
      </p>
    );
  }
  return (
    <VirtualRows
      ref={ref}
      count={model.rowCount}
      rowHeight={PATCH_ROW_HEIGHT}
      maxHeight={PATCH_MAX_HEIGHT}
      widthCh={widthCh}
      className="patch"
      testId={testId}
      label={label}
      row={(index, style) => {
        const r = patchRow(model, index);
        const hidden = hiddenChars(r.text);
        const kind = KIND_CLASS[lineKind(r.line)];
        return (
          <div
            key={index}
            className={`patch-row ${kind}${hidden.length ? ' has-hidden' : ''}`}
            style={style}
            data-index={index}
            data-line={r.lineIndex + 1}
            {...(hidden.length ? { 'data-hidden': hidden.map(describeHiddenChar).join(', ') } : {})}
          >
            {/* Old and new line numbers, drawn by CSS from data-n: not part of the row's text, so a copy takes only the code. */}
            <span className="ln" style={{ width: `${digits + 1}ch` }} aria-hidden="true" {...(r.continued || !model.oldLine[r.lineIndex] ? {} : { 'data-n': model.oldLine[r.lineIndex] })} />
            <span className="ln" style={{ width: `${digits + 1}ch` }} aria-hidden="true" {...(r.continued || !model.newLine[r.lineIndex] ? {} : { 'data-n': model.newLine[r.lineIndex] })} />
            <span className="gutter" title={hidden.length ? `Hidden characters: ${hidden.map(describeHiddenChar).join(', ')}` : undefined}>
              {hidden.length ? 'hidden' : r.continued ? '↪' : ''}
            </span>
            <span className="text">
              {segments(r.text).map((s, i) =>
                s.escape ? (
                  <span key={i} className="esc">
                    {s.text}
                  </span>
                ) : (
                  s.text
                ),
              )}
              {r.text === '' ? ' ' : null}
            </span>
          </div>
        );
      }}
    />
  );
});
