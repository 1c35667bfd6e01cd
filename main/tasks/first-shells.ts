// The first shell of a quick sandbox restored from the image's snapshot: the
// guest starts it as soon as it has its identity, before the sandbox's SSH
// login (guest-console.ts), and it becomes a terminal session at once, so the
// UI shows it while the sandbox still starts. It is the sandbox's shell for
// whoever asks first: the viewer that attaches to it, or the first openShell
// (tray, CLI), which gets this session instead of a second shell.
import type { TerminalInfo } from '../../common/domain.js';
import type { RegisterSessionOptions, TerminalSource } from '../terminal/types.js';

export interface FirstShellTerminals {
  register(opts: RegisterSessionOptions): TerminalInfo;
  list(taskId?: string): TerminalInfo[];
  resize(sessionId: string, cols: number, rows: number): void;
}

export class FirstShells {
  /** taskId → the session nobody has taken yet. */
  private readonly waiting = new Map<string, string>();

  constructor(private readonly terminals: FirstShellTerminals) {}

  open(taskId: string, source: TerminalSource, size: { cols: number; rows: number }): TerminalInfo {
    const info = this.terminals.register({ taskId, kind: 'shell', title: 'shell', cols: size.cols, rows: size.rows, source });
    this.waiting.set(taskId, info.id);
    return info;
  }

  /** The task's first shell if it is still live and nobody took it (it is theirs now, at their size). */
  take(taskId: string, size: { cols: number; rows: number }): TerminalInfo | undefined {
    const id = this.waiting.get(taskId);
    if (id === undefined) return undefined;
    this.waiting.delete(taskId);
    const info = this.terminals.list(taskId).find((t) => t.id === id && t.status === 'live');
    if (!info) return undefined;
    this.terminals.resize(id, size.cols, size.rows);
    return { ...info, cols: size.cols, rows: size.rows };
  }

  /** A viewer attached to a session: if it was a first shell, it is taken. */
  attached(sessionId: string): void {
    for (const [taskId, id] of this.waiting) if (id === sessionId) this.waiting.delete(taskId);
  }

  /** Not yet taken: the sandbox has no shell anyone opened (QuickSandboxWatcher). */
  isWaiting(sessionId: string): boolean {
    for (const id of this.waiting.values()) if (id === sessionId) return true;
    return false;
  }

  forget(taskId: string): void {
    this.waiting.delete(taskId);
  }
}
