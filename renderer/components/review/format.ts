// Words for the review: sizes, file modes, why a file is not text.
import type { DiffFile, NotTextReason } from '../../../common/review.js';

export function formatBytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n) || n < 0) return 'size unknown';
  if (n < 1024) return `${n} byte${n === 1 ? '' : 's'}`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB (${n.toLocaleString('en')} bytes)`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB (${n.toLocaleString('en')} bytes)`;
}

export const NOT_TEXT_WORDS: Record<NotTextReason, string> = {
  'nul-byte': 'has NUL bytes',
  'invalid-utf8': 'is not valid UTF-8',
  'too-large': 'is too large to show',
};

/** "not text (has NUL bytes), 1.2 KiB" or, for a host that only says binary, "binary". */
export function notTextLabel(f: DiffFile): string | undefined {
  if (f.notText) return `not shown as text: ${NOT_TEXT_WORDS[f.notText]}, ${formatBytes(f.size)}`;
  if (f.binary) return `binary${f.size !== undefined ? `, ${formatBytes(f.size)}` : ''}`;
  return undefined;
}

/** "mode file → executable" when the kind of file changed, "new executable" for a new one not plain; else undefined. */
export function modeChange(f: DiffFile): string | undefined {
  if (!f.newMode || f.newMode === 'none') return undefined;
  if (!f.oldMode || f.oldMode === 'none') return f.newMode === 'file' ? undefined : `new ${f.newMode}`;
  return f.oldMode === f.newMode ? undefined : `mode ${f.oldMode} → ${f.newMode}`;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString('en')} ${n === 1 ? one : many}`;
}
