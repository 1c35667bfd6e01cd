// How the CLI speaks: results on stdout (JSON with --json), progress and errors
// on stderr. Errors carry the same title and help the UI shows (common/errors.ts).
import { errorHelp } from '../../common/errors.js';
import { escapeContentLine, escapeJsonText } from '../../common/review-text.js';

export interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  json: boolean;
  /** Where input comes from (the hooks read Claude Code's JSON); process.stdin when not given. */
  stdin?: NodeJS.ReadableStream;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'Usage';
  }
}

export function printJson(io: Io, value: unknown): void {
  // A value from a sandbox (file names, commit messages) may hold characters a terminal acts on.
  io.stdout.write(escapeJsonText(JSON.stringify(value, null, 2)) + '\n');
}

/** {error:{name,title,message,help,detail?}} with --json (on stdout, for scripts), else "error: Title: message" and the help. */
export function printError(io: Io, err: unknown): void {
  const e = err instanceof Error ? err : new Error(String(err));
  const raw = (e as { detail?: unknown }).detail;
  const detail = typeof raw === 'string' ? raw : undefined;
  if (e.name === 'Usage' && !io.json) {
    io.stderr.write(`factory: ${e.message}\n(see factory --help)\n`);
    return;
  }
  const { title, help } = errorHelp(e.name);
  if (io.json) {
    printJson(io, { error: { name: e.name, title, message: e.message, help, ...(detail ? { detail } : {}) } });
    return;
  }
  io.stderr.write(`error: ${title}: ${plain(e.message)}\n${detail ? plain(detail) + '\n' : ''}  ${help}\n`);
}

/**
 * Text from the app or the guest, made safe for the user's terminal: control,
 * bidi and invisible characters shown as escapes (as the app shows them), line
 * breaks and tabs kept.
 */
export function plain(s: string): string {
  return s.split('\n').map(escapeContentLine).join('\n');
}

/** A command's parsed options, by name. */
export type Values = Record<string, string | boolean | string[] | undefined>;
