// A terminal's buffer (scrollback and screen) as plain text: wrapped rows
// joined into their line, trailing empty lines dropped.
import type { Terminal } from '@xterm/xterm';

export function terminalText(term: Terminal): string {
  const buf = term.buffer.active;
  const lines: string[] = [];
  for (let i = 0; i < buf.length; i++) {
    const line = buf.getLine(i);
    if (!line) continue;
    const s = line.translateToString(true);
    if (line.isWrapped && lines.length > 0) lines[lines.length - 1] += s;
    else lines.push(s);
  }
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines.join('\n');
}
