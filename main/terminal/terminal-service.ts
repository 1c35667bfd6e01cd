// Terminal sessions on the host: every stage output and interactive shell is a
// session with an id, a source (ssh2 channel or node-pty), batched output,
// end-to-end flow control, a byte-capped scrollback and optionally a log on disk
// (session-log.ts, written off the main thread) that survives an app restart and
// is deleted with its task or when older than the retention.
import * as fs from 'node:fs';
import { TERMINAL_SIZE_RANGE, terminalSizeFits, type FactoryEvent, type TerminalDataEvent } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { TerminalInfo } from '../../common/domain.js';
import { ScrollbackBuffer, terminalBytesToText, type FlowDecision } from './flow-control.js';
import { LogStore, type PersistedMeta } from './log-store.js';
import { SessionLog } from './session-log.js';
import {
  DEFAULT_TERMINAL_OPTIONS,
  newSession,
  newSessionId,
  withTimeout,
  type ExitResult,
  type Session,
  type TerminalServiceOptions,
} from './session.js';
import type { RegisterSessionOptions } from './types.js';

export type { TerminalServiceOptions } from './session.js';

/** Logs of sessions that ended longer ago than this are deleted at start-up (a setting; 0 keeps them). */
export const DEFAULT_LOG_RETENTION_DAYS = 30;

export interface TerminalServiceDeps {
  logDir: string;
  emit: (e: FactoryEvent) => void;
  emitData: (e: TerminalDataEvent) => void;
  /** Days a finished session's log is kept; older ones are deleted at start-up. 0 keeps them forever. */
  retentionDays?: number;
  /** Where failures to keep a log are reported (a process warning by default). */
  warn?: (message: string) => void;
  /** The clock (tests of the retention). */
  now?: () => number;
  /** Tuning, mostly for tests. */
  options?: Partial<TerminalServiceOptions>;
}

export class TerminalService {
  private readonly sessions = new Map<string, Session>();
  private readonly opts: TerminalServiceOptions;
  private readonly store: LogStore;
  private readonly now: () => number;
  private readonly warn: (message: string) => void;
  private disposed = false;
  private disposing: Promise<void> | null = null;

  constructor(private readonly deps: TerminalServiceDeps) {
    this.opts = { ...DEFAULT_TERMINAL_OPTIONS, ...deps.options };
    this.now = deps.now ?? Date.now;
    this.warn = deps.warn ?? ((message) => process.emitWarning(message));
    const retentionDays = deps.retentionDays ?? DEFAULT_LOG_RETENTION_DAYS;
    if (!Number.isInteger(retentionDays) || retentionDays < 0) {
      throw new FactoryError('InvalidInput', `terminal log retention of ${retentionDays} days is not a whole number of days (0 keeps logs forever)`);
    }
    fs.mkdirSync(deps.logDir, { recursive: true });
    this.store = new LogStore(deps.logDir);
    this.restorePersisted(retentionDays);
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
    const s = newSession(this.opts, info, this.now(), opts.source);
    s.scrollback = new ScrollbackBuffer(this.opts.scrollbackBytes);
    if (opts.persistLog) {
      s.persisted = true;
      s.log = new SessionLog({
        file: this.store.logPath(id),
        metaFile: this.store.metaPath(id),
        maxLogBytes: this.opts.maxLogBytes,
        limits: this.opts.logQueue,
        onPressure: (hold) => this.onLogPressure(s, hold),
        onError: (err) => this.onLogError(s, err),
      });
      s.log.saveMeta(this.metaJson(s));
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

  /** Resolves once the session's output so far is in its log file and the log is idle (or has failed, reported). */
  async logSettled(sessionId: string): Promise<void> {
    const s = this.get(sessionId);
    this.flush(s);
    await s.log?.settled();
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
    let bytes = s.scrollback ? s.scrollback.snapshot() : this.store.readTail(s.info.id, this.opts.scrollbackBytes);
    if (!s.scrollback && s.logError) {
      // The log on disk lacks its end: say so where the user reads it.
      bytes = Buffer.concat([bytes, Buffer.from(`\r\n\x1b[2m[factory: this log is incomplete: ${s.logError}]\x1b[0m\r\n`)]);
    }
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
    if (!terminalSizeFits(cols, rows)) {
      throw new FactoryError('InvalidInput', `terminal size ${cols}x${rows} is out of range (${TERMINAL_SIZE_RANGE})`);
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
    const bytes = s.scrollback ? s.scrollback.tail(maxBytes) : this.store.readTail(s.info.id, maxBytes);
    return terminalBytesToText(bytes);
  }

  /** Forget a finished session and delete its log. */
  async remove(sessionId: string): Promise<void> {
    const s = this.get(sessionId);
    if (s.exit === null) throw new FactoryError('TerminalLive', `terminal ${sessionId} is still running; close it first`);
    this.sessions.delete(sessionId);
    await this.deleteFiles(s);
  }

  /**
   * The task is gone for good: kill its sessions that still run, forget them all
   * and delete their logs. The task service calls this when it deletes a task
   * record (destroying a sandbox keeps its logs). Returns how many were removed.
   */
  async removeTaskSessions(taskId: string): Promise<number> {
    if (typeof taskId !== 'string' || taskId.length === 0) {
      // An empty id would match the sessions that belong to no task.
      throw new FactoryError('InvalidInput', 'removeTaskSessions needs a task id');
    }
    const mine = [...this.sessions.values()].filter((s) => s.info.taskId === taskId);
    await Promise.all(
      mine.map(async (s) => {
        if (s.exit === null) await this.killAndWait(s);
        this.sessions.delete(s.info.id);
        await this.deleteFiles(s);
      }),
    );
    return mine.length;
  }

  /** Flow-control counters for one session (tests, diagnostics). */
  stats(sessionId: string) {
    const s = this.get(sessionId);
    return {
      ...s.stats,
      unacked: s.flow.unacknowledged,
      paused: s.sourcePaused,
      logQueued: s.log?.queuedBytes ?? 0,
      logHeld: s.logHeld,
      logDropped: s.log?.droppedBytes ?? 0,
      logError: s.logError,
    };
  }

  /**
   * Kills every live source (their persisted logs are marked lost: the next start
   * shows them so) and waits until every log is on disk, at most shutdownWaitMs.
   */
  dispose(): Promise<void> {
    if (this.disposing) return this.disposing;
    this.disposed = true;
    for (const s of this.sessions.values()) {
      this.flush(s);
      this.clearStall(s);
      if (s.exit === null) {
        this.killQuietly(s);
        this.finish(s, null, true, false);
      }
    }
    const logs = [...this.sessions.values()].map((s) => s.log?.destroy());
    this.disposing = withTimeout(Promise.all(logs), this.opts.shutdownWaitMs).then((done) => {
      if (!done) this.warn(`terminal logs not all written within ${this.opts.shutdownWaitMs} ms of shutting down (a slow or stuck disk)`);
    });
    return this.disposing;
  }

  // --- internals -----------------------------------------------------------

  private onSourceData(s: Session, chunk: Buffer): void {
    if (chunk.length === 0) return;
    s.stats.bytesIn += chunk.length;
    const now = performance.now();
    const { ready, armTimer } = s.batcher.push(chunk, now);
    for (const c of ready) this.emitChunk(s, c);
    if (armTimer) {
      s.batchTimer = setTimeout(() => {
        s.batchTimer = null;
        for (const c of s.batcher.flush(performance.now())) this.emitChunk(s, c);
      }, s.batcher.delayFor(now));
    }
  }

  private flush(s: Session): void {
    if (s.batchTimer) {
      clearTimeout(s.batchTimer);
      s.batchTimer = null;
    }
    for (const c of s.batcher.flush(performance.now())) this.emitChunk(s, c);
  }

  private emitChunk(s: Session, chunk: Buffer): void {
    s.scrollback?.append(chunk);
    s.log?.append(chunk);
    s.stats.bytesEmitted += chunk.length;
    // Only a live session is flow-controlled: the source is gone after exit.
    if (s.exit === null) {
      this.apply(s, s.flow.sent(chunk.length));
      if (s.flow.isPaused && !s.stallTimer) this.armStall(s);
    }
    this.deps.emitData({ sessionId: s.info.id, data: chunk });
  }

  private apply(s: Session, decision: FlowDecision): void {
    if (decision === 'resume') this.clearStall(s);
    this.syncSource(s);
  }

  /** The source is paused while the viewer is behind or the log's queue is full, and runs otherwise. */
  private syncSource(s: Session): void {
    if (!s.source || s.exit !== null) return;
    const want = s.flow.isPaused || s.logHeld;
    if (want === s.sourcePaused) return;
    s.sourcePaused = want;
    if (want) {
      s.stats.pauses++;
      s.source.pause();
    } else {
      s.stats.resumes++;
      s.source.resume();
    }
  }

  private onLogPressure(s: Session, hold: boolean): void {
    s.logHeld = hold;
    if (hold) s.stats.logHolds++;
    this.syncSource(s);
  }

  private onLogError(s: Session, err: Error): void {
    this.warn(`terminal ${s.info.id}${s.info.taskId ? ` (task ${s.info.taskId})` : ''}: ${err.message}`);
    const stopped = s.log?.error;
    if (stopped && s.logError === null) {
      // Recorded once, so a failing metadata write cannot loop back here forever.
      s.logError = stopped.message.slice(0, 2000);
      s.log!.saveMeta(this.metaJson(s));
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
    s.endedAt = this.now();
    s.info.status = lost ? 'lost' : 'exited';
    s.info.exitCode = code;
    s.flow.disengage();
    if (s.log) {
      s.log.saveMeta(this.metaJson(s));
      // Written and closed in the background; dispose() and logSettled() wait for it.
      void s.log.end();
    }
    if (announce) this.deps.emit({ type: 'terminal.status', info: { ...s.info } });
    const waiters = s.exitWaiters.splice(0);
    for (const w of waiters) w({ ...s.exit });
  }

  private killQuietly(s: Session): void {
    try {
      s.source?.kill();
    } catch (err) {
      // Already gone is the goal; anything else is worth a line.
      this.warn(`terminal ${s.info.id}: kill failed: ${(err as Error).message}`);
    }
  }

  /** Kills a live session and waits for its end; one that does not end in time is marked lost. */
  private async killAndWait(s: Session): Promise<void> {
    this.killQuietly(s);
    const ended = await withTimeout(this.waitForExit(s.info.id), this.opts.shutdownWaitMs);
    if (!ended && s.exit === null) {
      this.flush(s);
      this.clearStall(s);
      this.finish(s, null, true, true);
    }
  }

  private async deleteFiles(s: Session): Promise<void> {
    this.clearStall(s);
    if (s.batchTimer) clearTimeout(s.batchTimer);
    // Let the writer finish first, or a late write would bring a deleted file back.
    // A stuck disk is not waited for forever: a file it writes later is a
    // leftover that the retention prunes at a later start.
    if (s.log && !(await withTimeout(s.log.destroy(), this.opts.shutdownWaitMs))) {
      this.warn(`terminal ${s.info.id}: its log was still being written when it was removed`);
    }
    if (s.persisted) await this.store.remove(s.info.id);
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

  private metaJson(s: Session): string {
    const meta: PersistedMeta = {
      version: 1,
      info: s.info,
      createdAt: s.createdAt,
      ...(s.endedAt !== undefined ? { endedAt: s.endedAt } : {}),
      ...(s.logError !== null ? { logError: s.logError } : {}),
    };
    return JSON.stringify(meta);
  }

  private restorePersisted(retentionDays: number): void {
    const { sessions, pruned, warnings } = this.store.restore(retentionDays, this.now());
    for (const w of warnings) this.warn(w);
    if (pruned.length > 0) this.warn(`removed the logs of ${pruned.length} terminal session(s) older than ${retentionDays} days`);
    for (const meta of sessions) {
      const s = newSession(this.opts, meta.info, meta.createdAt, null);
      if (meta.endedAt !== undefined) s.endedAt = meta.endedAt;
      s.persisted = true;
      s.logError = meta.logError ?? null;
      s.exit = { code: meta.info.exitCode ?? null, lost: meta.info.status === 'lost' };
      this.sessions.set(meta.info.id, s);
    }
  }
}
