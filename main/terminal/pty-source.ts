// node-pty process → TerminalSource (host-side shells, `limactl shell`).
import type { IPty } from 'node-pty';
import type { TerminalSource } from './types.js';

/** Output still arriving this long after the exit notification is waited for. */
const QUIET_AFTER_EXIT_MS = 50;
const MAX_DRAIN_AFTER_EXIT_MS = 5_000;

export function ptySource(pty: IPty): TerminalSource {
  let exited = false;
  let paused = false;
  let lastDataAt = 0;
  const dataListeners: Array<(chunk: Buffer) => void> = [];
  const exitListeners: Array<(code: number | null, lost: boolean) => void> = [];

  pty.onData((d: string | Buffer) => {
    lastDataAt = Date.now();
    // With `encoding: null` node-pty hands out Buffers; with an encoding, strings
    // it already decoded (its decoder joins split sequences).
    const chunk = typeof d === 'string' ? Buffer.from(d, 'utf8') : d;
    for (const l of dataListeners) l(chunk);
  });
  pty.onExit(({ exitCode, signal }) => {
    exited = true;
    // Killed by a signal: there is no exit status to report.
    const code = signal ? null : exitCode;
    // node-pty notes that data can follow the exit event; report the exit only
    // once the output has gone quiet (a paused stream is not quiet), so a
    // session's log is complete when waitForExit resolves.
    // (Output still in the kernel's pty buffer when the session leader exits is
    // discarded by the hangup: a Linux pty property no reader can avoid.)
    const exitAt = Date.now();
    const check = () => {
      const now = Date.now();
      const quiet = !paused && now - lastDataAt >= QUIET_AFTER_EXIT_MS;
      if (quiet || (!paused && now - exitAt > MAX_DRAIN_AFTER_EXIT_MS)) {
        for (const l of exitListeners) l(code, false);
      } else {
        setTimeout(check, QUIET_AFTER_EXIT_MS / 2);
      }
    };
    setTimeout(check, QUIET_AFTER_EXIT_MS / 2);
  });

  return {
    onData(listener) {
      dataListeners.push(listener);
    },
    onExit(listener) {
      exitListeners.push(listener);
    },
    write(data) {
      if (!exited) pty.write(data);
    },
    resize(cols, rows) {
      if (!exited) pty.resize(cols, rows);
    },
    pause() {
      if (!paused) {
        paused = true;
        pty.pause();
      }
    },
    resume() {
      if (paused) {
        paused = false;
        pty.resume();
      }
    },
    kill() {
      // A paused pty never sees the child's end; let it drain so the exit is reported.
      if (paused) {
        paused = false;
        pty.resume();
      }
      if (!exited) pty.kill('SIGKILL');
    },
  };
}
