// The app's own log: one JSON object per line in <data>/logs/app.log, rotated by
// size (app.log → app.log.1 → … → app.log.<keep>, the oldest deleted). Built once
// in app.ts and handed to the services that need it, each under its component
// name. It is for what the UI does not show: a failure the app chose to step
// over (and why that is fine), a cleanup that did not happen.
//
// Never give it a credential value (a key, a token, a placeholder's real value):
// callers log ids and messages only. The logger does not try to find secrets in
// what it is given; the rule is simply that none are passed to it.
import fs from 'node:fs';
import path from 'node:path';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** Extra fields of a line; an Error is written as its name, message and code. */
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** The same log under another component name (one per service). */
  child(component: string): Logger;
}

export interface FileLogOptions {
  dir: string;
  /** Default app.log. */
  fileName?: string;
  /** Rotate before a line would take the file over this size (default 5 MiB). */
  maxBytes?: number;
  /** Rotated files kept besides the current one (default 4). */
  keep?: number;
  /** Lines below this level are dropped (default info). */
  level?: LogLevel;
  now?: () => Date;
}

/** A line from the guest or a git error can be long; one line never takes more than this. */
const MAX_TEXT_CHARS = 4000;

export function parseLogLevel(value: string | undefined, fallback: LogLevel = 'info'): LogLevel {
  if (value === undefined || value === '') return fallback;
  if ((LOG_LEVELS as readonly string[]).includes(value)) return value as LogLevel;
  throw new Error(`log level ${JSON.stringify(value.slice(0, 40))} is not one of ${LOG_LEVELS.join(', ')}`);
}

/** A line as written: time, level, component, msg, then the fields (never overriding those four). */
export function formatLine(time: Date, level: LogLevel, component: string, msg: string, fields: LogFields = {}): string {
  const extra: LogFields = {};
  for (const [k, v] of Object.entries(fields)) {
    if (k === 'time' || k === 'level' || k === 'component' || k === 'msg' || v === undefined) continue;
    extra[k] = fieldValue(v);
  }
  // JSON escapes control characters and line breaks, so text from the guest cannot forge a line.
  return JSON.stringify({ time: time.toISOString(), level, component, msg: cap(msg), ...extra }) + '\n';
}

function fieldValue(v: unknown): unknown {
  if (v instanceof Error) {
    const code = (v as NodeJS.ErrnoException).code;
    return { name: v.name, message: cap(v.message), ...(typeof code === 'string' ? { code } : {}) };
  }
  if (typeof v === 'string') return cap(v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return v;
  return cap(String(v));
}

function cap(s: string): string {
  return s.length > MAX_TEXT_CHARS ? `${s.slice(0, MAX_TEXT_CHARS)}… (${s.length} chars)` : s;
}

/**
 * Appends lines synchronously: they are few (failures and cleanups, not output),
 * and a line written just before a crash must be on disk, in order.
 */
export class RotatingLogFile {
  readonly file: string;
  private readonly maxBytes: number;
  private readonly keep: number;
  private size: number | undefined;
  private broken = false;

  constructor(opts: Pick<FileLogOptions, 'dir' | 'fileName' | 'maxBytes' | 'keep'>) {
    this.file = path.join(opts.dir, opts.fileName ?? 'app.log');
    this.maxBytes = opts.maxBytes ?? 5 * 1024 * 1024;
    this.keep = opts.keep ?? 4;
    if (!(this.maxBytes > 0) || !Number.isInteger(this.keep) || this.keep < 0) {
      throw new Error(`log rotation needs maxBytes > 0 and a whole keep >= 0 (got ${this.maxBytes}, ${this.keep})`);
    }
  }

  write(line: string): void {
    try {
      const bytes = Buffer.byteLength(line);
      if (this.size === undefined) {
        fs.mkdirSync(path.dirname(this.file), { recursive: true });
        this.size = fileSize(this.file);
      }
      if (this.size > 0 && this.size + bytes > this.maxBytes) this.rotate();
      fs.appendFileSync(this.file, line, { mode: 0o600 });
      this.size += bytes;
      this.broken = false;
    } catch (err) {
      // The log is the last place to report to: say it once on stderr, and go on without it.
      if (!this.broken) process.stderr.write(`factory: writing the app log ${this.file} failed: ${(err as Error).message}\n`);
      this.broken = true;
      this.size = undefined;
    }
  }

  private rotate(): void {
    const nth = (i: number) => `${this.file}.${i}`;
    fs.rmSync(this.keep > 0 ? nth(this.keep) : this.file, { force: true });
    for (let i = this.keep - 1; i >= 1; i--) {
      if (fs.existsSync(nth(i))) fs.renameSync(nth(i), nth(i + 1));
    }
    if (this.keep > 0) fs.renameSync(this.file, nth(1));
    this.size = 0;
  }
}

function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    // Not there yet: it starts empty.
    return 0;
  }
}

export function createFileLogger(opts: FileLogOptions, component = 'app'): Logger {
  const sink = new RotatingLogFile(opts);
  return lineLogger((line) => sink.write(line), opts.level ?? 'info', opts.now ?? (() => new Date()), component);
}

/** For a service built without a log (some tests, the image CLI): warnings and errors on stderr, same format. */
export function stderrLogger(component: string): Logger {
  return lineLogger((line) => process.stderr.write(line), 'warn', () => new Date(), component);
}

function lineLogger(write: (line: string) => void, level: LogLevel, now: () => Date, component: string): Logger {
  const min = LOG_LEVELS.indexOf(level);
  const at = (l: LogLevel) => (msg: string, fields?: LogFields) => {
    if (LOG_LEVELS.indexOf(l) >= min) write(formatLine(now(), l, component, msg, fields));
  };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (name) => lineLogger(write, level, now, name),
  };
}
