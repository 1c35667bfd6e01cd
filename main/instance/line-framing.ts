// The socket's framing: one JSON message per line ('\n'), UTF-8, each line at
// most a cap. A longer line is not buffered: the reader reports it once and
// the connection is closed, so a peer cannot make the host hold unbounded bytes.

export const MAX_LINE_BYTES = 4 * 1024 * 1024;

export class LineTooLong extends Error {
  constructor(readonly cap: number) {
    super(`a message line is longer than ${cap} bytes`);
    this.name = 'InvalidInput';
  }
}

/** Splits a byte stream into lines; calls onLine for each, onTooLong once when a line passes the cap (then ignores the rest). */
export class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  private failed = false;

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly onTooLong: (err: LineTooLong) => void,
    private readonly cap = MAX_LINE_BYTES,
  ) {}

  push(chunk: Buffer): void {
    if (this.failed) return;
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl < 0 ? chunk.length : nl;
      if (this.size + (end - start) > this.cap) {
        this.failed = true;
        this.parts = [];
        this.onTooLong(new LineTooLong(this.cap));
        return;
      }
      if (nl < 0) {
        if (end > start) this.parts.push(chunk.subarray(start, end));
        this.size += end - start;
        return;
      }
      this.parts.push(chunk.subarray(start, nl));
      const line = Buffer.concat(this.parts).toString('utf8');
      this.parts = [];
      this.size = 0;
      start = nl + 1;
      if (line.trim() !== '') this.onLine(line);
      if (this.failed) return;
    }
  }
}

export function encodeLine(message: unknown): string {
  // JSON.stringify escapes '\n' inside strings, so a message is always one line.
  return JSON.stringify(message) + '\n';
}
