// The terminal-session interface every transport implements (ssh2 channel in a
// sandbox, node-pty on the host). The TerminalService owns batching, flow
// control and scrollback; a source only moves bytes.
import type { TerminalInfo } from '../../common/domain.js';

export interface TerminalSource {
  onData(listener: (chunk: Buffer) => void): void;
  /** Called once; code is null when the process died by signal or the link was lost. */
  onExit(listener: (code: number | null, lost: boolean) => void): void;
  write(data: string | Buffer): void;
  resize(cols: number, rows: number): void;
  /** Flow control: stop reading from the far side until resume(). */
  pause(): void;
  resume(): void;
  /** End the far side's process (e.g. SIGKILL over ssh, or pty kill). */
  kill(): void;
}

export interface RegisterSessionOptions {
  taskId?: string;
  kind: TerminalInfo['kind'];
  title: string;
  cols: number;
  rows: number;
  source: TerminalSource;
  /** Keep the output on disk so the log of a finished stage survives an app restart. */
  persistLog?: boolean;
}
