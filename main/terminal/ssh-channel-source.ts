// ssh2 session channel (shell or exec, usually with a pty) → TerminalSource.
import type { ClientChannel } from 'ssh2';
import type { TerminalSource } from './types.js';

/**
 * Pausing the channel stream makes ssh2 stop granting window to the server once
 * its read buffer is full, so the remote process blocks on write: real
 * backpressure all the way into the guest.
 */
export function sshChannelSource(channel: ClientChannel): TerminalSource {
  let exit: { code: number | null } | null = null;
  let killed = false;
  let closed = false;
  let paused = false;
  const exitListeners: Array<(code: number | null, lost: boolean) => void> = [];

  channel.on('exit', (code: number | null) => {
    // (code) for an exit status, (null, signalName, ...) for an exit signal.
    exit = { code: typeof code === 'number' ? code : null };
  });
  channel.on('close', () => {
    if (closed) return;
    closed = true;
    // No exit status and we did not kill it: the link went away under the process.
    const lost = exit === null && !killed;
    for (const l of exitListeners) l(exit ? exit.code : null, lost);
  });
  // A connection error also ends in 'close' (ssh2 cleans up every channel); the
  // listener keeps the error from being thrown as unhandled.
  channel.on('error', () => {});

  return {
    onData(listener) {
      channel.on('data', (d: Buffer) => listener(d));
      // Without a pty stderr arrives separately; a terminal shows both.
      channel.stderr.on('data', (d: Buffer) => listener(d));
    },
    onExit(listener) {
      exitListeners.push(listener);
    },
    write(data) {
      if (!closed && channel.writable) channel.write(data);
    },
    resize(cols, rows) {
      if (!closed) channel.setWindow(rows, cols, 0, 0);
    },
    pause() {
      if (closed || paused) return;
      paused = true;
      channel.pause();
      channel.stderr.pause();
    },
    resume() {
      if (!paused) return;
      paused = false;
      channel.resume();
      channel.stderr.resume();
    },
    kill() {
      if (closed) return;
      killed = true;
      // ssh2 emits 'close' only after the stream ended, which a paused stream never does.
      if (paused) {
        paused = false;
        channel.resume();
        channel.stderr.resume();
      }
      try {
        channel.signal('KILL');
      } catch {
        /* the server may not support signals; closing the channel ends it anyway */
      }
      channel.close();
    },
  };
}
