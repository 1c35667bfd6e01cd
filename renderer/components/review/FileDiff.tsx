// One file of the result as a reviewer reads it: @git-diff-view/react's view with
// line numbers, unified or split, syntax colours, and the review's flags and
// secret findings on the lines they concern. Its content comes from the patch
// shown below, each line escaped first (hidden and control characters as \u{…}
// text), so the viewer never sees a raw bidi or invisible character. A file
// whose patch is long stays in the virtualised patch instead.
import { useMemo, useState } from 'react';
import { DiffModeEnum, DiffView } from '@git-diff-view/react';
import '@git-diff-view/react/styles/diff-view-pure.css';
import { escapeContentLine, escapeName } from '../../../common/review-text.js';
import type { ReviewFlag, SecretFinding } from '../../../common/review.js';
import { lineAt, type PatchModel } from './patch-model.js';

/** Lines of one file's patch the viewer takes; a longer one is read in the patch below (virtualised). */
export const FILE_DIFF_MAX_LINES = 5000;

interface LineNote {
  severity: 'danger' | 'warning' | 'secret';
  text: string;
}

/** The file's own lines of the patch (from its header to the next), each content line escaped. */
export function filePatch(model: PatchModel, headerRow: number): { text: string; lines: number } | undefined {
  // Rows are lines unless long lines were cut: the header row's line is where the file starts.
  const first = model.rowLine ? model.rowLine[headerRow]! : headerRow;
  const out: string[] = [];
  for (let i = first; i < model.lineCount; i++) {
    const line = lineAt(model, i);
    if (i > first && line.startsWith('diff --git ')) break;
    if (out.length >= FILE_DIFF_MAX_LINES) return undefined;
    const c = line[0];
    out.push(c === '+' || c === '-' || c === ' ' ? c + escapeContentLine(line.slice(1)) : escapeContentLine(line));
  }
  return { text: out.join('\n') + '\n', lines: out.length };
}

export function FileDiff({ path, model, headerRow, flags, secrets }: { path: string; model: PatchModel; headerRow: number; flags: ReviewFlag[]; secrets: SecretFinding[] }) {
  const [mode, setMode] = useState<'unified' | 'split'>(() => (localStorage.getItem('factory.diffMode') === 'split' ? 'split' : 'unified'));
  const dark = typeof matchMedia === 'function' && matchMedia('(prefers-color-scheme: dark)').matches;
  const patch = useMemo(() => filePatch(model, headerRow), [model, headerRow]);
  const name = escapeName(path);
  // Flags and secrets on their lines of the new file, as rows under those lines.
  const notes = useMemo(() => {
    const byLine: Record<string, { data: LineNote[] }> = {};
    const add = (line: number | undefined, note: LineNote) => {
      if (line === undefined) return;
      (byLine[String(line)] ??= { data: [] }).data.push(note);
    };
    for (const f of flags) if (f.path === path) add(f.line, { severity: f.severity, text: `${f.kind}: ${f.message}` });
    for (const s of secrets) if (s.path === path) add(s.line, { severity: 'secret', text: `possible secret (${s.rule}), masked: ${escapeContentLine(s.masked)}` });
    return byLine;
  }, [flags, secrets, path]);
  const choose = (m: 'unified' | 'split') => {
    setMode(m);
    localStorage.setItem('factory.diffMode', m);
  };
  return (
    <section className="file-diff" data-testid="file-diff" data-path={name} data-mode={mode} aria-label={`Changes in ${name}`}>
      <div className="file-diff-head">
        <code>{name}</code>
        <div role="group" aria-label="Diff layout" className="segmented">
          <button type="button" className="secondary small" aria-pressed={mode === 'unified'} data-testid="diff-unified" onClick={() => choose('unified')}>
            Unified
          </button>
          <button type="button" className="secondary small" aria-pressed={mode === 'split'} data-testid="diff-split" onClick={() => choose('split')}>
            Split
          </button>
        </div>
      </div>
      {patch ? (
        <div className="file-diff-body" tabIndex={0} role="region" aria-label={`${mode === 'split' ? 'Split' : 'Unified'} diff of ${name}`}>
          <DiffView<LineNote[]>
            data={{ oldFile: { fileName: name }, newFile: { fileName: name }, hunks: [patch.text] }}
            diffViewMode={mode === 'split' ? DiffModeEnum.Split : DiffModeEnum.Unified}
            diffViewTheme={dark ? 'dark' : 'light'}
            diffViewHighlight
            diffViewWrap
            diffViewFontSize={12}
            extendData={{ newFile: notes }}
            renderExtendLine={({ data }) => (
              <ul className="line-notes" data-testid="line-notes">
                {data.map((n, i) => (
                  <li key={i} className={`line-note note-${n.severity}`}>
                    <strong>{n.severity === 'secret' ? 'SECRET' : n.severity.toUpperCase()}</strong> {n.text}
                  </li>
                ))}
              </ul>
            )}
          />
        </div>
      ) : (
        <p className="hint" data-testid="file-diff-long">
          This file's patch is over {FILE_DIFF_MAX_LINES.toLocaleString('en')} lines: read it in the patch below.
        </p>
      )}
    </section>
  );
}
