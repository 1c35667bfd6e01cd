// What one terminal session is made of, the service's tuning and its defaults,
// kept apart from the TerminalService that drives them.
import { randomBytes } from 'node:crypto';
import type { TerminalInfo } from '../../common/domain.js';
import {
  DEFAULT_BATCH,
  DEFAULT_WATERMARKS,
  FlowController,
  OutputBatcher,
  type BatchLimits,
  type ScrollbackBuffer,
  type Watermarks,
} from './flow-control.js';
import { DEFAULT_LOG_QUEUE, type LogQueueLimits, type SessionLog } from './session-log.js';
import type { TerminalSource } from './types.js';

export interface TerminalServiceOptions {
  watermarks: Watermarks;
  batch: BatchLimits;
  /** Bytes of scrollback kept in memory per session and replayed by attach(). */
  scrollbackBytes: number;
  /** A persisted log rotates to `<id>.log.1` when it reaches this size (so at most twice this on disk). */
  maxLogBytes: number;
  /** The bounded queue between a session and its log file. */
  logQueue: LogQueueLimits;
  /**
   * While paused, if the viewer acknowledges nothing for this long it is taken
   * as gone (tab closed, page unloaded) and the source runs free again until the
   * next attach or ack: a closed tab must never stall a pipeline stage.
   */
  viewerStallMs: number;
  /** How long dispose() and removeTaskSessions() wait for a killed source to end, and dispose() for logs to reach the disk. */
  shutdownWaitMs: number;
}

export const DEFAULT_TERMINAL_OPTIONS: TerminalServiceOptions = {
  watermarks: DEFAULT_WATERMARKS,
  batch: DEFAULT_BATCH,
  scrollbackBytes: 1024 * 1024,
  maxLogBytes: 64 * 1024 * 1024,
  logQueue: DEFAULT_LOG_QUEUE,
  viewerStallMs: 10_000,
  shutdownWaitMs: 5_000,
};

export interface ExitResult {
  code: number | null;
  lost: boolean;
}

export interface Session {
  info: TerminalInfo;
  createdAt: number;
  endedAt?: number;
  source: TerminalSource | null;
  /** Its files are on disk (a persisted live session, or one restored from disk). */
  persisted: boolean;
  /** The writer of a live persisted session's log. */
  log: SessionLog | null;
  /** Why its log on disk is incomplete, when it is. */
  logError: string | null;
  /** The log's queue is full: keep the source paused whatever the viewer says. */
  logHeld: boolean;
  /** What we last told the source (pause or resume). */
  sourcePaused: boolean;
  flow: FlowController;
  batcher: OutputBatcher;
  batchTimer: NodeJS.Timeout | null;
  stallTimer: NodeJS.Timeout | null;
  /** In-memory scrollback; null for a session restored from disk (read from its log on demand). */
  scrollback: ScrollbackBuffer | null;
  exit: ExitResult | null;
  exitWaiters: Array<(r: ExitResult) => void>;
  /** Counters for tests and diagnostics. */
  stats: { bytesIn: number; bytesEmitted: number; pauses: number; resumes: number; logHolds: number };
}

export function newSession(opts: TerminalServiceOptions, info: TerminalInfo, createdAt: number, source: TerminalSource | null): Session {
  return {
    info,
    createdAt,
    source,
    persisted: false,
    log: null,
    logError: null,
    logHeld: false,
    sourcePaused: false,
    flow: new FlowController(opts.watermarks),
    batcher: new OutputBatcher(opts.batch),
    batchTimer: null,
    stallTimer: null,
    scrollback: null,
    exit: null,
    exitWaiters: [],
    stats: { bytesIn: 0, bytesEmitted: 0, pauses: 0, resumes: 0, logHolds: 0 },
  };
}

export function newSessionId(): string {
  return `term-${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
}

/** true if the promise settled within ms, false if the time ran out first. */
export async function withTimeout(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
