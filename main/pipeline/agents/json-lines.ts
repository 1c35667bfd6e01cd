// Incremental JSON-lines reader with caps, shared by the agent parsers. The
// bytes come from a pty or SSH channel: lines may end in \r\n, carry terminal
// escape sequences, or be interleaved with stderr text. A line over the cap is
// dropped (counted), the whole stream is cut at its cap, and nothing throws.
import {
  MAX_AGENT_PROBLEM_CHARS,
  MAX_AGENT_PROBLEMS,
  type AgentEvent,
  type AgentOutcome,
  type AgentResult,
  type AgentStreamParser,
  type AgentStreamStats,
  type ParserLimits,
} from './types.js';

export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
export const DEFAULT_MAX_STREAM_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_SUMMARY_CHARS = 4000;

// CSI / OSC / two-byte escapes a pty or a colouring tool may add.
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

export function stripTerminalNoise(line: string): string {
  return line.replace(ANSI, '').replace(/\r/g, '').trim();
}

export function capText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/** Base class: subclasses turn one parsed JSON value into events and decide the final result. */
export abstract class JsonLinesParser implements AgentStreamParser {
  readonly stats: AgentStreamStats = { bytes: 0, lines: 0, malformed: 0, oversize: 0, other: 0 };
  protected readonly maxLineBytes: number;
  protected readonly maxStreamBytes: number;
  protected readonly maxSummaryChars: number;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private discarding = false;
  private overflow = false;
  private ended = false;
  private readonly decoder = new TextDecoder('utf-8');

  constructor(limits: ParserLimits = {}) {
    this.maxLineBytes = limits.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.maxStreamBytes = limits.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES;
    this.maxSummaryChars = limits.maxSummaryChars ?? DEFAULT_MAX_SUMMARY_CHARS;
  }

  get overflowed(): boolean {
    return this.overflow;
  }

  push(chunk: string | Uint8Array): AgentEvent[] {
    if (this.overflow || this.ended) return [];
    let buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const room = this.maxStreamBytes - this.stats.bytes;
    if (buf.length > room) {
      buf = buf.subarray(0, Math.max(0, room));
      this.overflow = true;
    }
    this.stats.bytes += buf.length;
    const events: AgentEvent[] = [];
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(0x0a, start);
      if (nl === -1) break;
      this.appendPending(buf.subarray(start, nl));
      this.flushLine(events);
      start = nl + 1;
    }
    this.appendPending(buf.subarray(start));
    return events;
  }

  end(): { events: AgentEvent[]; outcome: AgentOutcome } {
    const events: AgentEvent[] = [];
    if (!this.ended) {
      this.ended = true;
      // A last line without its newline is still tried: a killed process may
      // have written a complete object; if not, it counts as malformed.
      if (!this.overflow && (this.pendingBytes > 0 || this.discarding)) this.flushLine(events);
    }
    let result: AgentResult;
    if (this.overflow) {
      result = {
        ...this.partialResult(),
        ok: false,
        error: `agent output exceeded ${formatBytes(this.maxStreamBytes)}; stopped reading (endless or runaway stream)`,
      };
    } else {
      result = this.finalResult();
    }
    events.push({ kind: 'result', result });
    return { events, outcome: { result, stats: { ...this.stats } } };
  }

  /** Events for one valid JSON value; return null when its shape is wrong (counted as malformed). */
  protected abstract handleValue(value: unknown): AgentEvent[] | null;
  /** The result once the stream ended normally (not overflowed). */
  protected abstract finalResult(): AgentResult;
  /** What is known so far, for a stream cut short. */
  protected abstract partialResult(): AgentResult;

  protected describeStats(): string {
    const s = this.stats;
    const parts = [`${s.lines} lines`];
    if (s.malformed) parts.push(`${s.malformed} malformed`);
    if (s.oversize) parts.push(`${s.oversize} over ${formatBytes(this.maxLineBytes)}`);
    return parts.join(', ');
  }

  private appendPending(part: Buffer): void {
    if (part.length === 0 || this.discarding) return;
    if (this.pendingBytes + part.length > this.maxLineBytes) {
      this.pending = [];
      this.pendingBytes = 0;
      this.discarding = true;
      return;
    }
    this.pending.push(Buffer.from(part));
    this.pendingBytes += part.length;
  }

  private flushLine(events: AgentEvent[]): void {
    if (this.discarding) {
      this.discarding = false;
      this.stats.lines++;
      this.stats.oversize++;
      return;
    }
    const raw = Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    const line = stripTerminalNoise(this.decoder.decode(raw));
    if (line === '') return;
    this.stats.lines++;
    if (!line.startsWith('{')) {
      this.stats.other++;
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.stats.malformed++;
      return;
    }
    let out: AgentEvent[] | null;
    try {
      out = this.handleValue(value);
    } catch {
      // An event of a shape the adapter cannot read counts as malformed (below), like a bad line.
      out = null;
    }
    if (out === null) this.stats.malformed++;
    else events.push(...out);
  }
}

/** Adds an agent's problem in one line, capped; past MAX_AGENT_PROBLEMS the newest replaces the last, so the list ends with the latest. */
export function keepProblem(problems: string[], text: string): void {
  const line = capText(text.replace(/\s+/g, ' ').trim(), MAX_AGENT_PROBLEM_CHARS);
  if (problems.length >= MAX_AGENT_PROBLEMS) problems[MAX_AGENT_PROBLEMS - 1] = line;
  else problems.push(line);
}

export function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/** The first non-empty line of a text, capped: what a board card shows. */
export function firstLine(text: string, max = 200): string {
  const line = text.split('\n').map((l) => l.trim()).find((l) => l !== '') ?? '';
  return capText(line, max);
}
