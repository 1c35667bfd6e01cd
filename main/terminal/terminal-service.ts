// Terminal sessions on the host: every stage output and interactive shell is a
// session with an id, a source (ssh2 channel or node-pty), batched output,
// end-to-end flow control, a byte-capped scrollback and optionally a log on disk
// that survives an app restart.
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { FactoryError, type FactoryEvent, type TerminalDataEvent } from '../../common/contract.js';
import { TerminalInfo } from '../../common/domain.js';
import {
  DEFAULT_BATCH,
  DEFAULT_WATERMARKS,
  FlowController,
  OutputBatcher,
  ScrollbackBuffer,
  terminalBytesToText,
  utf8BoundaryFrom,
  type BatchLimits,
  type FlowDecision,
  type Watermarks,
} from './flow-control.js';
import type { RegisterSessionOptions, TerminalSource } from './types.js';

export interface TerminalServiceDeps {
  logDir: string;
  emit: (e: FactoryEvent) => void;
  emitData: (e: TerminalDataEvent) => void;
  /** Tuning, mostly for tests. */
  options?: Partial<TerminalServiceOptions>;
}

export interface TerminalServiceOptions {
  watermarks: Watermarks;
  batch: BatchLimits;
  /** Bytes of scrollback kept in memory per session and replayed by attach(). */
  scrollbackBytes: number;
  /** A persisted log rotates to `<id>.log.1` when it reaches this size (so at most twice this on disk). */
  maxLogBytes: number;
  /**
   * While paused, if the viewer acknowledges nothing for this long it is taken
   * as gone (tab closed, page unloaded) and the source runs free again until the
   * next attach or ack: a closed tab must never stall a pipeline stage.
   */
  viewerStallMs: number;
}

const DEFAULTS: TerminalServiceOptions = {
  watermarks: DEFAULT_WATERMARKS,
  batch: DEFAULT_BATCH,
  scrollbackBytes: 1024 * 1024,
  maxLogBytes: 64 * 1024 * 1024,
  viewerStallMs: 10_000,
};

const ID_RE = /^[A-Za-z0-9._-]{1,128}$/;

/** What a session's `.json` file next to its log holds. Read back with a schema: disk is not trusted blindly. */
const PersistedMeta = z.object({
  version: z.literal(1),
  info: TerminalInfo,
  createdAt: z.number(),
});
type PersistedMeta = z.infer<typeof PersistedMeta>;

interface ExitResult {
  code: number | null;
  lost: boolean;
}

interface Session {
  info: TerminalInfo;
  createdAt: number;
  source: TerminalSource | null;
  persist: boolean;
  flow: FlowController;
  batcher: OutputBatcher;
  batchTimer: NodeJS.Timeout | null;
  stallTimer: NodeJS.Timeout | null;
  /** In-memory scrollback; null for a session restored from disk (read from its log on demand). */
  scrollback: ScrollbackBuffer | null;
  logFd: number | null;
  logBytes: number;
  exit: ExitResult | null;
  exitWaiters: Array<(r: ExitResult) => void>;
  /** Counters for tests and diagnostics. */
  stats: { bytesIn: number; bytesEmitted: number; pauses: number; resumes: number };
}

export class TerminalService {
  private readonly sessions = new Map<string, Session>();
  private readonly opts: TerminalServiceOptions;
  private disposed = false;

  constructor(private readonly deps: TerminalServiceDeps) {
    this.opts = { ...DEFAULTS, ...deps.options };
    fs.mkdirSync(deps.logDir, { recursive: true });
    this.restorePersisted();
  }

  register(opts: RegisterSessionOptions): TerminalInfo {
    if (this.disposed) throw new FactoryError('TerminalServiceDisposed', 'the terminal service is shut down');
    const id = newSessionId();
    const info: TerminalInfo = {
      id,
      ...(opts.taskId !== undefined ? { taskId: opts.taskId } : {}),
      kind: opts.kind,
      title: opts.title,
      status: 'live',
      exitCode: null,
      cols: opts.cols,
      rows: opts.rows,
    };
    const s: Session = {
      info,
      createdAt: Date.now(),
      source: opts.source,
      persist: !!opts.persistLog,
      flow: new FlowController(this.opts.watermarks),
      batcher: new OutputBatcher(this.opts.batch),
      batchTimer: null,
      stallTimer: null,
      scrollback: new ScrollbackBuffer(this.opts.scrollbackBytes),
      logFd: null,
      logBytes: 0,
      exit: null,
      exitWaiters: [],
      stats: { bytesIn: 0, bytesEmitted: 0, pauses: 0, resumes: 0 },
    };
    if (s.persist) {
      try {
        s.logFd = fs.openSync(this.logPath(id), 'a', 0o600);
        this.writeMeta(s);
      } catch (err) {
        // No log (full disk, unwritable folder) must not cost the user the terminal.
        this.closeLog(s);
        s.persist = false;
        process.emitWarning(`terminal log for ${id} not kept: ${(err as Error).message}`);
      }
    }
    this.sessions.set(id, s);

    opts.source.onData((chunk) => this.onSourceData(s, chunk));
    opts.source.onExit((code, lost) => this.onSourceExit(s, code, lost));
    this.deps.emit({ type: 'terminal.opened', info: { ...info } });
    return { ...info };
  }

  waitForExit(sessionId: string): Promise<ExitResult> {
    const s = this.get(sessionId);
    if (s.exit) return Promise.resolve({ ...s.exit });
    return new Promise((resolve) => s.exitWaiters.push(resolve));
  }

  /**
   * A viewer opens the session: everything emitted so far comes back as
   * scrollback (base64) and the viewer's flow-control account starts at zero.
   * Pending output is flushed first, so every later data event follows the replay
   * without overlap on an ordered transport.
   */
  attach(sessionId: string): { info: TerminalInfo; scrollback: string } {
    const s = this.get(sessionId);
    this.flush(s);
    if (s.exit === null) this.apply(s, s.flow.engage());
    const bytes = s.scrollback ? s.scrollback.snapshot() : this.readLogTail(s, this.opts.scrollbackBytes);
    return { info: { ...s.info }, scrollback: bytes.toString('base64') };
  }

  /** The viewer went away on purpose: stop waiting for its acknowledgements. */
  detach(sessionId: string): void {
    const s = this.get(sessionId);
    this.clearStall(s);
    this.apply(s, s.flow.disengage());
  }

  write(sessionId: string, data: string): void {
    const s = this.live(sessionId);
    s.source!.write(data);
  }

  resize(sessionId: string, cols: number, rows: number): void {
    if (!Number.isInteger(cols) || !Number.isInteger(rows) || cols < 2 || rows < 1 || cols > 1000 || rows > 500) {
      throw new FactoryError('InvalidInput', `terminal size ${cols}x${rows} is out of range (cols 2..1000, rows 1..500)`);
    }
    const s = this.get(sessionId);
    s.info.cols = cols;
    s.info.rows = rows;
    if (s.exit === null && s.source) s.source.resize(cols, rows);
  }

  ack(sessionId: string, bytes: number): void {
    const s = this.get(sessionId);
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new FactoryError('InvalidInput', `ack of ${bytes} bytes is not a byte count`);
    }
    if (s.exit !== null) return;
    // A viewer that acknowledges is a viewer: engage if a stall had disengaged us.
    if (!s.flow.isEngaged) this.apply(s, s.flow.engage());
    this.apply(s, s.flow.ack(bytes));
    if (s.flow.isPaused) this.armStall(s);
  }

  close(sessionId: string): void {
    const s = this.get(sessionId);
    if (s.exit === null && s.source) s.source.kill();
  }

  list(taskId?: string): TerminalInfo[] {
    const out: TerminalInfo[] = [];
    for (const s of this.sessions.values()) {
      if (taskId === undefined || s.info.taskId === taskId) out.push({ ...s.info });
    }
    return out;
  }

  /** The last output as plain text (escape sequences removed), for summaries and error messages. */
  tail(sessionId: string, maxBytes: number): string {
    const s = this.get(sessionId);
    this.flush(s);
    const bytes = s.scrollback ? s.scrollback.tail(maxBytes) : this.readLogTail(s, maxBytes);
    return terminalBytesToText(bytes);
  }

  /** Forget a finished session and delete its log (e.g. when its task is deleted). */
  remove(sessionId: string): void {
    const s = this.get(sessionId);
    if (s.exit === null) throw new FactoryError('TerminalLive', `terminal ${sessionId} is still running; close it first`);
    this.sessions.delete(sessionId);
    for (const f of [this.logPath(sessionId), `${this.logPath(sessionId)}.1`, this.metaPath(sessionId)]) {
      fs.rmSync(f, { force: true });
    }
  }

  /** Flow-control counters for one session (tests, diagnostics). */
  stats(sessionId: string): { bytesIn: number; bytesEmitted: number; pauses: number; resumes: number; unacked: number; paused: boolean } {
    const s = this.get(sessionId);
    return { ...s.stats, unacked: s.flow.unacknowledged, paused: s.flow.isPaused };
  }

  /** Kills every live source; their persisted logs are marked lost (the next start shows them so). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const s of this.sessions.values()) {
      this.flush(s);
      this.clearStall(s);
      if (s.exit === null) {
        try {
          s.source?.kill();
        } catch {
          /* already gone */
        }
        this.finish(s, null, true, false);
      }
      this.closeLog(s);
    }
  }

  // --- internals -----------------------------------------------------------

  private onSourceData(s: Session, chunk: Buffer): void {
    if (chunk.length === 0) return;
    s.stats.bytesIn += chunk.length;
    const { ready, armTimer } = s.batcher.push(chunk);
    for (const c of ready) this.emitChunk(s, c);
    if (armTimer) {
      s.batchTimer = setTimeout(() => {
        s.batchTimer = null;
        for (const c of s.batcher.flush()) this.emitChunk(s, c);
      }, this.opts.batch.delayMs);
    }
  }

  private flush(s: Session): void {
    if (s.batchTimer) {
      clearTimeout(s.batchTimer);
      s.batchTimer = null;
    }
    for (const c of s.batcher.flush()) this.emitChunk(s, c);
  }

  private emitChunk(s: Session, chunk: Buffer): void {
    s.scrollback?.append(chunk);
    this.writeLog(s, chunk);
    s.stats.bytesEmitted += chunk.length;
    // Only a live session is flow-controlled: the source is gone after exit.
    if (s.exit === null) {
      this.apply(s, s.flow.sent(chunk.length));
      if (s.flow.isPaused && !s.stallTimer) this.armStall(s);
    }
    this.deps.emitData({ sessionId: s.info.id, data: chunk });
  }

  private apply(s: Session, decision: FlowDecision): void {
    if (decision === null || !s.source || s.exit !== null) return;
    if (decision === 'pause') {
      s.stats.pauses++;
      s.source.pause();
    } else {
      s.stats.resumes++;
      this.clearStall(s);
      s.source.resume();
    }
  }

  private armStall(s: Session): void {
    this.clearStall(s);
    s.stallTimer = setTimeout(() => {
      s.stallTimer = null;
      if (s.flow.isPaused) this.apply(s, s.flow.disengage());
    }, this.opts.viewerStallMs);
  }

  private clearStall(s: Session): void {
    if (s.stallTimer) {
      clearTimeout(s.stallTimer);
      s.stallTimer = null;
    }
  }

  private onSourceExit(s: Session, code: number | null, lost: boolean): void {
    if (s.exit !== null) return;
    this.flush(s);
    this.clearStall(s);
    this.finish(s, code, lost, true);
  }

  private finish(s: Session, code: number | null, lost: boolean, announce: boolean): void {
    s.exit = { code, lost };
    s.info.status = lost ? 'lost' : 'exited';
    s.info.exitCode = code;
    s.flow.disengage();
    if (s.persist) {
      try {
        this.writeMeta(s);
      } catch (err) {
        process.emitWarning(`terminal log status for ${s.info.id} not saved: ${(err as Error).message}`);
      }
    }
    if (announce) this.deps.emit({ type: 'terminal.status', info: { ...s.info } });
    const waiters = s.exitWaiters.splice(0);
    for (const w of waiters) w({ ...s.exit });
  }

  private get(sessionId: string): Session {
    const s = typeof sessionId === 'string' ? this.sessions.get(sessionId) : undefined;
    if (!s) throw new FactoryError('UnknownTerminal', `no terminal session ${JSON.stringify(String(sessionId)).slice(0, 140)}`);
    return s;
  }

  private live(sessionId: string): Session {
    const s = this.get(sessionId);
    if (s.exit !== null || !s.source) {
      throw new FactoryError('TerminalClosed', `terminal ${sessionId} has ${s.info.status === 'lost' ? 'lost its connection' : 'exited'}`);
    }
    return s;
  }

  // --- persistence -----------------------------------------------------------

  private logPath(id: string): string {
    return path.join(this.deps.logDir, `${id}.log`);
  }
  private metaPath(id: string): string {
    return path.join(this.deps.logDir, `${id}.json`);
  }

  private writeMeta(s: Session): void {
    const meta: PersistedMeta = { version: 1, info: s.info, createdAt: s.createdAt };
    const file = this.metaPath(s.info.id);
    // Write then rename, so a crash never leaves half a JSON file.
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(meta), { mode: 0o600 });
    fs.renameSync(`${file}.tmp`, file);
  }

  private writeLog(s: Session, chunk: Buffer): void {
    if (s.logFd === null) return;
    try {
      if (s.logBytes + chunk.length > this.opts.maxLogBytes) {
        fs.closeSync(s.logFd);
        s.logFd = null;
        fs.renameSync(this.logPath(s.info.id), `${this.logPath(s.info.id)}.1`);
        s.logFd = fs.openSync(this.logPath(s.info.id), 'w', 0o600);
        s.logBytes = 0;
      }
      // Synchronous append: a batch is at most one chunk cap, and the log is then
      // complete at any moment (a crash or dispose loses nothing already emitted).
      fs.writeSync(s.logFd, chunk);
      s.logBytes += chunk.length;
    } catch (err) {
      // A full disk must not kill the terminal: stop logging, keep the session.
      this.closeLog(s);
      s.persist = false;
      process.emitWarning(`terminal log for ${s.info.id} stopped: ${(err as Error).message}`);
    }
  }

  private closeLog(s: Session): void {
    if (s.logFd !== null) {
      try {
        fs.closeSync(s.logFd);
      } catch {
        /* ignore */
      }
      s.logFd = null;
    }
  }

  /** Last maxBytes of a persisted log (spanning the rotated file when the current one is short). */
  private readLogTail(s: Session, maxBytes: number): Buffer {
    const parts: Buffer[] = [];
    let need = maxBytes;
    for (const file of [this.logPath(s.info.id), `${this.logPath(s.info.id)}.1`]) {
      if (need <= 0) break;
      const part = readFileTail(file, need);
      parts.unshift(part);
      need -= part.length;
    }
    const all = Buffer.concat(parts);
    return all.subarray(utf8BoundaryFrom(all, 0));
  }

  private restorePersisted(): void {
    let names: string[];
    try {
      names = fs.readdirSync(this.deps.logDir);
    } catch {
      return;
    }
    const restored: Session[] = [];
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const id = name.slice(0, -'.json'.length);
      if (!ID_RE.test(id)) continue;
      let meta: PersistedMeta;
      try {
        meta = PersistedMeta.parse(JSON.parse(fs.readFileSync(path.join(this.deps.logDir, name), 'utf8')));
      } catch (err) {
        process.emitWarning(`ignoring unreadable terminal log metadata ${name}: ${(err as Error).message}`);
        continue;
      }
      if (meta.info.id !== id) continue;
      // A session still 'live' on disk belonged to a process that ended without closing it.
      const wasLive = meta.info.status === 'live';
      const info: TerminalInfo = { ...meta.info, status: wasLive ? 'lost' : meta.info.status };
      const exit: ExitResult = { code: info.exitCode ?? null, lost: info.status === 'lost' };
      const s: Session = {
        info,
        createdAt: meta.createdAt,
        source: null,
        persist: true,
        flow: new FlowController(this.opts.watermarks),
        batcher: new OutputBatcher(this.opts.batch),
        batchTimer: null,
        stallTimer: null,
        scrollback: null,
        logFd: null,
        logBytes: 0,
        exit,
        exitWaiters: [],
        stats: { bytesIn: 0, bytesEmitted: 0, pauses: 0, resumes: 0 },
      };
      if (wasLive) this.writeMeta(s);
      restored.push(s);
    }
    restored.sort((a, b) => a.createdAt - b.createdAt);
    for (const s of restored) this.sessions.set(s.info.id, s);
  }
}

function newSessionId(): string {
  return `term-${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
}

function readFileTail(file: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return Buffer.alloc(0);
  }
  try {
    const size = fs.fstatSync(fd).size;
    const len = Math.min(size, Math.max(0, maxBytes));
    const buf = Buffer.alloc(len);
    let off = 0;
    while (off < len) {
      const n = fs.readSync(fd, buf, off, len - off, size - len + off);
      if (n === 0) break;
      off += n;
    }
    return buf.subarray(0, off);
  } finally {
    fs.closeSync(fd);
  }
}
