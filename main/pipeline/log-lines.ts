// A stage's log as the lines a person reads, and the one line a card shows.
// Programs in a terminal redraw: npm draws a braille spinner at column 1 and
// erases it, test runners repaint progress blocks by moving the cursor up, a
// `|/-\` spinner overwrites itself with CR. Stripping escape sequences alone
// leaves every frame behind (a card once read "⠙"), so the output is first
// replayed on a small line model of a terminal, keeping what stayed on screen,
// and only then searched for a summary. The text comes from the sandbox: it is
// bounded here and never interpreted beyond cursor movement within lines.

/** The most text replayed; callers pass a tail, this bounds a careless one. */
export const MAX_LOG_CHARS = 4 * 1024 * 1024;
/** Cursor moves and widths past this are ignored (a hostile `ESC[999999999C`). */
const MAX_COLUMN = 4096;

// One control token: CSI (params, final), OSC, DCS/SOS/PM/APC strings, other
// escapes, a line end (CRs before LF are one, as a pty writes them), or a
// single C0/C1 control character.
const TOKEN =
  /\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[PX^_][^\x1b]*(?:\x1b\\)?|\x1b([ -/]*)([0-~])?|\r+\n|[\x00-\x1f\x7f-\x9f]/g;

/** A log replayed on lines: what a terminal would show once the program is done. */
class LineScreen {
  private readonly lines: string[] = [''];
  private row = 0;
  private col = 0;
  private saved: [number, number] = [0, 0];
  /** After a CR, the next text replaces the line: a progress line keeps only what came after its last CR. */
  private overwrite = false;

  write(text: string): void {
    if (this.overwrite) this.lines[this.row] = '';
    this.overwrite = false;
    let line = this.lines[this.row]!;
    if (this.col === line.length) line += text;
    else if (this.col > line.length) line = line + ' '.repeat(this.col - line.length) + text;
    else line = line.slice(0, this.col) + text + line.slice(this.col + text.length);
    this.lines[this.row] = line;
    this.col += text.length;
  }

  carriageReturn(): void {
    this.col = 0;
    this.overwrite = true;
  }

  newLine(): void {
    this.overwrite = false;
    this.row++;
    this.col = 0;
    if (this.row >= this.lines.length) this.lines.push('');
  }

  /** Up or down within the lines written so far (a cursor stops at the last line, as at a screen's bottom). */
  moveRow(delta: number): void {
    this.overwrite = false;
    this.row = Math.max(0, Math.min(this.row + delta, this.lines.length - 1));
  }

  setCol(col: number): void {
    this.col = Math.max(0, Math.min(col, MAX_COLUMN));
  }

  moveCol(delta: number): void {
    this.setCol(this.col + delta);
  }

  eraseLine(mode: number): void {
    const line = this.lines[this.row]!;
    if (mode === 0) this.lines[this.row] = line.slice(0, this.col);
    else if (mode === 1) this.lines[this.row] = ' '.repeat(Math.min(this.col, line.length)) + line.slice(this.col);
    else this.lines[this.row] = '';
  }

  /** ESC[J: the rest of the screen goes; clearing the whole screen keeps the history (a log is not a screen). */
  eraseBelow(): void {
    this.eraseLine(0);
    this.lines.length = this.row + 1;
  }

  save(): void {
    this.saved = [this.row, this.col];
  }

  restore(): void {
    this.overwrite = false;
    this.row = Math.min(this.saved[0], this.lines.length - 1);
    this.col = this.saved[1];
  }

  text(): string[] {
    return this.lines;
  }

  csi(params: string, final: string): void {
    const n = (i = 0, dflt = 1): number => {
      const v = Number.parseInt(params.split(';')[i] ?? '', 10);
      return Number.isFinite(v) ? Math.min(v, MAX_COLUMN) : dflt;
    };
    switch (final) {
      case 'A':
        return this.moveRow(-Math.max(1, n()));
      case 'B':
        return this.moveRow(Math.max(1, n()));
      case 'E':
        this.moveRow(Math.max(1, n()));
        return this.setCol(0);
      case 'F':
        this.moveRow(-Math.max(1, n()));
        return this.setCol(0);
      case 'C':
        return this.moveCol(Math.max(1, n()));
      case 'D':
        return this.moveCol(-Math.max(1, n()));
      case 'G':
      case '`':
        return this.setCol(n() - 1);
      case 'K':
        return this.eraseLine(n(0, 0));
      case 'J':
        if (n(0, 0) === 0) this.eraseBelow();
        return;
      case 's':
        return this.save();
      case 'u':
        return this.restore();
      default:
      // Colours, modes, absolute positions and scrolling change nothing a log keeps.
    }
  }
}

/** Replays terminal output on a line model: escape sequences gone, redrawn lines as they were left. */
function replay(raw: string): string[] {
  const screen = new LineScreen();
  TOKEN.lastIndex = 0;
  let at = 0;
  for (let m = TOKEN.exec(raw); m !== null; m = TOKEN.exec(raw)) {
    if (m.index > at) screen.write(raw.slice(at, m.index));
    at = TOKEN.lastIndex;
    const t = m[0];
    if (m[2] !== undefined) screen.csi(m[1]!, m[2]);
    else if (t.endsWith('\n') || t === '\x0b' || t === '\x0c') screen.newLine();
    else if (t === '\r') screen.carriageReturn();
    else if (t === '\b') screen.moveCol(-1);
    else if (t === '\t') screen.write('\t');
    else if (t === '\x1b7') screen.save();
    else if (t === '\x1b8') screen.restore();
    else if (t === '\x1bM') screen.moveRow(-1);
    else if (t === '\x1bE') screen.newLine();
  }
  if (at < raw.length) screen.write(raw.slice(at));
  return screen.text();
}

// Braille spinner frames (npm, ora, yarn): no runner prints braille as text.
const BRAILLE = /[\u2800-\u28ff]+/g;
// A line left holding only a `|/-\` spinner frame.
const BAR_SPINNER = /^\s*[|/\\-]\s*$/;
// Unicode controls that reorder or hide text.
const INVISIBLE = /[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

/**
 * The output's lines as a terminal would have shown them at the end, without
 * escapes, progress frames or spinner frames, right-trimmed. Input that is
 * plain text already comes back unchanged but for spinner frames.
 */
export function logLines(output: string): string[] {
  if (output.length > MAX_LOG_CHARS) output = output.slice(-MAX_LOG_CHARS);
  return replay(output).map((l) => {
    const line = l.replace(BRAILLE, '').replace(INVISIBLE, '').trimEnd();
    return BAR_SPINNER.test(line) ? '' : line;
  });
}

/** logLines joined: the log as plain text (for a task's error detail, a repair prompt). */
export function logText(output: string): string {
  return logLines(output).join('\n');
}

// Lines a package manager adds that say nothing about the program: progress,
// warnings about the install, notices, timing.
const NOISE = [
  /^npm (?:warn|WARN|notice|http|timing|verb|verbose|info|sill|silly)\b/,
  /^(?:info|warning) (?:Visit https:\/\/yarnpkg\.com|No lockfile found|.*: No license field)/,
  /^\[\d+\/\d+\] [A-Z][a-z]+ .*\.\.\.$/, // yarn's "[1/4] Resolving packages..."
  /^Progress: resolved \d+/, // pnpm
  /^(?:Done|✨  Done) in [\d.]+m?s\.?$/, // yarn, pnpm
  /^make(?:\[\d+\])?: (?:Entering|Leaving) directory /, // make -C
];

// What a package manager prints after a script fails: it repeats the exit
// status, the script and where its log went, never the cause.
const TRAILER = [
  /^npm (?:error|ERR!)(?:\s*$| Lifecycle script .* failed| Test failed\.| code (?:\d+|ELIFECYCLE)$| errno \d+$| (?:path|workspace|location) \S| command (?:failed$|sh -c )| A complete log of this run| \/\S+\.log$| Failed at the \S+ script| This is probably not a problem with npm| (?:Exit status|signal) )/,
  /^error Command failed with exit code \d+\.?$/, // yarn
  /^(?:\S+ )?ELIFECYCLE\s+(?:Test|Command) failed/, // pnpm
  /^make(?:\[\d+\])?: \*\*\* .*Error \d+$/,
];

// A stack frame ("at fn (file.js:1:2)"): a detail, never the summary.
const STACK_FRAME = /^at (?:async )?\S.*(?:\(.*\)|:\d+:\d+|\(native\)|<anonymous>)$/;

const isNoise = (l: string) => NOISE.some((r) => r.test(l));
const isTrailer = (l: string) => TRAILER.some((r) => r.test(l));

/** The lines worth reading, trimmed and non-empty, without package-manager noise. */
export function meaningfulLines(output: string): string[] {
  return logLines(output)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !isNoise(l));
}

function cap(line: string, max: number): string {
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * The line a card shows for a run: the program's last line of text, never a
 * progress frame, a package manager's warning or after-failure trailer, or a
 * stack frame, unless there is nothing else. '' when the output had no text.
 */
export function summaryLine(output: string, max = 200): string {
  const lines = meaningfulLines(output);
  const own = lines.filter((l) => !isTrailer(l) && !STACK_FRAME.test(l));
  return cap(own.at(-1) ?? lines.find((l) => !STACK_FRAME.test(l)) ?? lines.at(-1) ?? '', max);
}

const CAUSE = /\b(?:error|ERR!|fatal|failed|failure|cannot|can't|could not|not found|no such|denied|refused|unable to|undefined reference|Traceback)\b/i;

/**
 * An error's first cause: the first line that reads as an error (before the
 * trailers that repeat it), else the summary line.
 */
export function firstCauseLine(output: string, max = 200): string {
  const lines = meaningfulLines(output).filter((l) => !isTrailer(l) && !STACK_FRAME.test(l));
  const cause = lines.find((l) => CAUSE.test(l));
  return cause !== undefined ? cap(cause, max) : summaryLine(output, max);
}

/**
 * The end of a log as a person reads it: replayed (no progress or spinner
 * frames), package-manager noise and after-failure trailers gone, runs of blank
 * lines made one, the last maxLines lines. For a failed stage's explanation.
 */
export function readableTail(output: string, maxLines = 25): string {
  const kept: string[] = [];
  for (const line of logLines(output)) {
    const t = line.trim();
    if (isNoise(t) || isTrailer(t)) continue;
    if (t === '' && (kept.length === 0 || kept.at(-1) === '')) continue;
    kept.push(t === '' ? '' : line);
  }
  while (kept.at(-1) === '') kept.pop();
  return kept.slice(-maxLines).join('\n');
}

// Where a runner states what an assertion expected: node's and chai's
// AssertionError, jest's and vitest's expect(), pytest's "E " lines, Go's
// "file_test.go:13: got, want", Rust's "assertion `left == right` failed",
// uvu's "Expected values to be …", a plain "Error:".
const ASSERTION =
  /^(?:E\s+\S|\w+_test\.go:\d+: |thread '.*' panicked at|expect\(|assert(?:ion)?\b)|\b(?:AssertionError|AssertError|Assertion failed|Expected values to be|expected .* to (?:be|equal|deep)|assertion `.*` failed)|^\w*Error(?: \[\w+\])?: /i;
// Where the assertion's own text ends: a stack frame, a code excerpt ("  5 | …",
// "> 5 | …"), vitest's "❯ file:line", pytest's "file.py:11: AssertionError", an object dump.
const ASSERTION_END = /^(?:at\s|❯\s|>?\s*\d+\s*\|\s|\|\s|\S+:\d+: \w*Error$|\{$|-{3,}|_{3,}|={3,}|(?:FAIL|PASS|ok)(?:\s|$))/;

/**
 * The first assertion a failing run printed, as a few plain lines: its message,
 * expected and actual values; never the stack, the code excerpt or colours.
 * '' when no line reads as an assertion.
 */
export function firstAssertion(output: string, maxLines = 8, maxChars = 200): string {
  const lines = logLines(output)
    .map((l) => l.trim())
    .filter((l) => !isNoise(l) && !isTrailer(l));
  const at = lines.findIndex((l) => ASSERTION.test(l) && !STACK_FRAME.test(l));
  if (at < 0) return '';
  const out: string[] = [];
  for (const l of lines.slice(at, at + 4 * maxLines)) {
    if (out.length > 0 && (ASSERTION_END.test(l) || STACK_FRAME.test(l))) break;
    if (l === '') continue;
    out.push(cap(l, maxChars));
    if (out.length >= maxLines) break;
  }
  return out.join('\n');
}
