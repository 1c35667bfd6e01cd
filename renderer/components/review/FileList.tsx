// Every changed file, virtualised: escaped name, counts or why it is not text
// (with its size), mode and link changes, and the way to its patch: a jump into
// the patch below, or its own patch on request when the patch does not hold it.
import { useMemo } from 'react';
import { escapeName } from '../../../common/review-text.js';
import type { DiffFile } from '../../../common/review.js';
import { modeChange, notTextLabel } from './format.js';
import { VirtualRows } from './VirtualRows.js';

export const FILE_ROW_HEIGHT = 26;
const FILES_MAX_HEIGHT = 260;

interface Props {
  files: DiffFile[];
  /** Row of each file's header in the patch shown below (by stored path). */
  fileRows: Map<string, number>;
  onGoTo: (row: number) => void;
  /** Shows the file's changes in the diff viewer (line numbers, split, colours). */
  onView: (path: string) => void;
  viewPath: string | undefined;
  /** Asks the host for one file: its own patch and its leading bytes. */
  onOpen: (path: string) => void;
  openPath: string | undefined;
  /** The patch was cut: a file without a header in it is not in it (else it is only not found, e.g. an odd name). */
  patchTruncated: boolean;
  /** The file the cut fell in: its header is in the patch, the rest of it may not be. */
  cutPath: string | undefined;
}

interface Shown {
  name: string;
  oldName?: string;
  target?: string;
}

export function FileList({ files, fileRows, onGoTo, onView, viewPath, onOpen, openPath, patchTruncated, cutPath }: Props) {
  const shown = useMemo<Shown[]>(
    () =>
      files.map((f) => ({
        name: escapeName(f.path),
        ...(f.oldPath !== undefined ? { oldName: escapeName(f.oldPath) } : {}),
        ...(f.linkTarget !== undefined ? { target: escapeName(f.linkTarget) } : {}),
      })),
    [files],
  );
  const widthCh = useMemo(
    () => shown.reduce((w, s) => Math.max(w, s.name.length + (s.oldName?.length ?? 0) + (s.target?.length ?? 0)), 0) + 110,
    [shown],
  );
  return (
    <VirtualRows
      count={files.length}
      rowHeight={FILE_ROW_HEIGHT}
      maxHeight={FILES_MAX_HEIGHT}
      widthCh={widthCh}
      className="review-files"
      testId="review-files"
      label="Changed files"
      row={(index, style) => {
        const f = files[index]!;
        const s = shown[index]!;
        const row = fileRows.get(f.path);
        const notText = notTextLabel(f);
        const mode = modeChange(f);
        return (
          <div
            key={index}
            className={`file-row${openPath === f.path ? ' open' : ''}`}
            style={style}
            data-testid="review-file"
            data-path={s.name}
            data-status={f.status}
          >
            <span className={`file-status file-${f.status}`}>{f.status}</span>{' '}
            <code className="file-name">{s.oldName !== undefined ? `${s.oldName} → ${s.name}` : s.name}</code>{' '}
            {notText ? (
              <span className="file-nottext" data-testid="review-file-nottext">
                {notText}
              </span>
            ) : (
              <>
                <span className="diff-add">+{f.added}</span> <span className="diff-del">−{f.removed}</span>
              </>
            )}
            {mode ? <span className="file-mode"> · {mode}</span> : null}
            {s.target !== undefined ? (
              <span className="file-link">
                {' '}
                · link to <code>{s.target}</code>
              </span>
            ) : null}{' '}
            {row !== undefined ? (
              <>
                {!notText ? (
                  <>
                    <button type="button" className="link" data-testid="review-file-view" aria-pressed={viewPath === f.path} onClick={() => onView(f.path)}>
                      view changes
                    </button>{' '}
                  </>
                ) : null}
                <button type="button" className="link" data-testid="review-file-goto" onClick={() => onGoTo(row)}>
                  go to patch
                </button>
                {f.path === cutPath ? (
                  <>
                    {' '}
                    <span className="file-unshown" data-testid="review-file-cut">
                      its patch is cut off below
                    </span>{' '}
                    <button type="button" className="link" data-testid="review-file-load" onClick={() => onOpen(f.path)}>
                      show all of it
                    </button>
                  </>
                ) : null}
              </>
            ) : (
              <>
                {patchTruncated ? (
                  <span className="file-unshown" data-testid="review-file-unshown">
                    not in the patch below
                  </span>
                ) : null}{' '}
                <button type="button" className="link" data-testid="review-file-load" onClick={() => onOpen(f.path)}>
                  show its patch
                </button>
              </>
            )}
            {f.notText ? (
              <>
                {' '}
                <button type="button" className="link" data-testid="review-file-bytes" onClick={() => onOpen(f.path)}>
                  Show leading bytes
                </button>
              </>
            ) : null}
          </div>
        );
      }}
    />
  );
}
