// The lines the host writes into a stage's terminal around the guest process:
// what runs (first) and how it ended (last). They go into the session itself, so
// the live view, the log on disk and a replay all show them, and a failed
// stage's terminal is never empty. Dimmed, so they read as the host's, not the
// program's: a grey foreground (256-colour 246) rather than SGR 2, which
// xterm.js draws at half opacity, below a readable contrast on the dark theme.
import { logText } from './log-lines.js';
import type { TerminalSource } from '../terminal/types.js';

const DIM = '\x1b[38;5;246m';
const RESET = '\x1b[0m';
const MAX_HEADER_LINES = 6;
const MAX_LINE_CHARS = 300;

/** How a guest run ended, as the runner saw it. */
export interface StageEnd {
  code: number | null;
  lost: boolean;
  timedOut: boolean;
  cancelled: boolean;
  timeoutSeconds?: number;
}

/**
 * Control characters from the repository's config (a command is untrusted
 * text) are shown as visible escapes, never sent to the terminal as they are.
 */
function visible(line: string): string {
  const shown = line.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return shown.length > MAX_LINE_CHARS ? `${shown.slice(0, MAX_LINE_CHARS - 1)}…` : shown;
}

/** `$ <command>` (a multi-line script is shown up to a few lines), dimmed, ending in a new line. */
export function stageHeader(command: string): string {
  const lines = command.replace(/\r\n?/g, '\n').split('\n');
  while (lines.length > 1 && lines.at(-1)!.trim() === '') lines.pop();
  const shown = lines.slice(0, MAX_HEADER_LINES).map((l, i) => `${i === 0 ? '$' : '>'} ${visible(l)}`);
  if (lines.length > MAX_HEADER_LINES) shown.push(`> … (${lines.length - MAX_HEADER_LINES} more lines)`);
  return shown.map((l) => `${DIM}${l}${RESET}\r\n`).join('');
}

/** The words of the exit line: `passed`, `exit status 3`, `timed out after 60 s`, `cancelled`, ... */
export function stageEndText(end: StageEnd): string {
  if (end.cancelled) return 'cancelled';
  if (end.timedOut) return `timed out after ${end.timeoutSeconds ?? '?'} s`;
  if (end.lost) return 'the connection to the sandbox was lost';
  if (end.code === null) return 'ended by a signal';
  return end.code === 0 ? 'passed' : `exit status ${end.code}`;
}

/**
 * The exit line: attributes the program left on are reset and the line starts
 * at column 0 of a fresh line whatever the program printed last.
 */
export function stageExitLine(end: StageEnd): string {
  return `${RESET}\r\n${DIM}${stageEndText(end)}${RESET}\r\n`;
}

/** A retried stage's terminal says which attempt it is: "test · attempt 2". */
export function attemptTitle(title: string, attempt: number): string {
  return attempt > 1 ? `${title} · attempt ${attempt}` : title;
}

/** The most output kept for a stage's summary and error detail (the terminal log keeps all of it). */
export const KEPT_OUTPUT_BYTES = 64 * 1024;

/**
 * Wraps a guest process's source: the header goes out before its first byte,
 * the exit line after its last (before the session hears of the exit), and the
 * program's own output (without either) is kept for the stage's summary.
 */
export function framedSource(source: TerminalSource, header: string, end: (code: number | null, lost: boolean) => StageEnd) {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let emit: ((chunk: Buffer) => void) | undefined;
  const framed: TerminalSource = {
    onData(listener) {
      emit = listener;
      // Synchronously, at registration: no guest byte can arrive before it.
      listener(Buffer.from(header));
      source.onData((chunk) => {
        kept.push(chunk);
        keptBytes += chunk.length;
        while (keptBytes - kept[0]!.length >= KEPT_OUTPUT_BYTES) keptBytes -= kept.shift()!.length;
        listener(chunk);
      });
    },
    onExit(listener) {
      source.onExit((code, lost) => {
        emit?.(Buffer.from(stageExitLine(end(code, lost))));
        listener(code, lost);
      });
    },
    write: (d) => source.write(d),
    resize: (c, r) => source.resize(c, r),
    pause: () => source.pause(),
    resume: () => source.resume(),
    kill: () => source.kill(),
  };
  /** The program's last output (up to maxBytes) as plain text, as the terminal left it (no progress frames). */
  const tail = (maxBytes: number): string => {
    const all = Buffer.concat(kept);
    return logText(all.subarray(Math.max(0, all.length - maxBytes)).toString('utf8'));
  };
  return { source: framed, tail };
}
