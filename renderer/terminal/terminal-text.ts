// A terminal's buffer (scrollback and screen) as plain text: wrapped rows
// joined into their line, trailing empty lines dropped.
import type { Terminal } from '@xterm/xterm';

export function terminalText(term: Terminal): string {
  return rowsText(term, 0);
}

/**
 * The last `rows` rows that have text (at least one), as text. Reading 10 000
 * rows of scrollback costs the renderer tens of milliseconds; a test that polls
 * for the end of its output reads only the end.
 */
export function terminalTail(term: Terminal, rows: number): string {
  const buf = term.buffer.active;
  let end = buf.length;
  // The screen's empty rows below the output.
  while (end > 0 && (buf.getLine(end - 1)?.translateToString(true) ?? '') === '') end--;
  return rowsText(term, Math.max(0, end - Math.max(1, Math.floor(rows) || 1)), end);
}

function rowsText(term: Terminal, from: number, to = term.buffer.active.length): string {
  const buf = term.buffer.active;
  const lines: string[] = [];
  for (let i = from; i < to; i++) {
    const line = buf.getLine(i);
    if (!line) continue;
    const s = line.translateToString(true);
    if (line.isWrapped && lines.length > 0) lines[lines.length - 1] += s;
    else lines.push(s);
  }
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines.join('\n');
}
