// This terminal on a session in the app: raw mode, keys to the session's pty,
// its bytes here (acknowledged as written, so the app's flow control holds),
// SIGWINCH as a resize; until the session ends or the connection to the app is
// lost. Shared by `factory shell`, `factory sandbox` and the agent sessions.
import type { FactoryClient } from './client.js';
import { TerminalModes } from './terminal-modes.js';

/** This terminal's size, as a pty in the sandbox should have it. */
export function terminalSize(): { cols: number; rows: number } {
  return { cols: Math.max(2, process.stdout.columns || 80), rows: Math.max(1, process.stdout.rows || 24) };
}

/**
 * This terminal in raw mode on the session: keys to it, its bytes here, SIGWINCH → resize; until it ends.
 * A lost connection ends it too, with the client's error: an app that quits ends its sessions without a
 * status event for them, and waiting for one left this terminal in raw mode for good.
 */
export async function attachInteractive(client: FactoryClient, sessionId: string): Promise<number | null> {
  const stdin = process.stdin;
  const stdout = process.stdout;
  let exitCode: number | null | undefined;
  // What the program switched on, so an end without its own cleanup (killed, the app gone) leaves this terminal usable.
  const modes = new TerminalModes();
  let ended: () => void = () => {};
  const over = new Promise<void>((r) => (ended = r));
  // The ack, resize and key calls below fail only when the connection to the app is gone; the relay
  // then ends with the session's status event or the client's close, so a failed call is not reported again.
  const offData = client.terminal.add((c) => {
    if (c.sessionId !== sessionId) return;
    modes.feed(c.data);
    stdout.write(c.data, () => void client.call('terminal.ack', { sessionId, bytes: c.data.length }).catch(() => {})); // fails when the session or the app is gone, which ends the attach anyway
  });
  const offEvents = client.events.add((e) => {
    if (e.type === 'terminal.status' && e.info.id === sessionId && e.info.status !== 'live') {
      exitCode = e.info.exitCode;
      ended();
    }
  });
  let lost: Error | undefined;
  const offLost = client.disconnected.add((err) => {
    lost = err;
    ended();
  });
  // At this terminal's size before the replay, so the program redraws for it.
  await client.call('terminal.resize', { sessionId, ...terminalSize() }).catch(() => {});
  const { info, scrollback } = await client.call('terminal.attach', { sessionId });
  const replay = Buffer.from(scrollback, 'base64');
  modes.feed(replay);
  stdout.write(replay);
  if (info.status !== 'live') ended();
  const raw = stdin.isTTY;
  if (raw) stdin.setRawMode(true);
  // Keys in order: one write at a time.
  let chain = Promise.resolve();
  const onKey = (d: Buffer) => {
    const data = d.toString('utf8');
    chain = chain.then(() => client.call('terminal.write', { sessionId, data })).catch(() => {});
  };
  const onResize = () => void client.call('terminal.resize', { sessionId, ...terminalSize() }).catch(() => {}); // a lost resize only leaves the old size; a gone app ends the attach
  stdin.on('data', onKey);
  stdin.resume();
  process.on('SIGWINCH', onResize);
  stdout.on('resize', onResize);
  try {
    await over;
  } finally {
    process.off('SIGWINCH', onResize);
    stdout.off('resize', onResize);
    stdin.off('data', onKey);
    if (raw) stdin.setRawMode(false);
    const reset = modes.resetSequence();
    if (reset && stdout.isTTY) stdout.write(reset);
    stdin.pause();
    offData();
    offEvents();
    offLost();
  }
  if (lost) throw lost;
  return exitCode ?? info.exitCode ?? null;
}
