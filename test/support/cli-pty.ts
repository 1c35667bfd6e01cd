// The factory CLI as a user runs it in a terminal: its own Node process in a
// real pty (node-pty), so raw mode, keys and the agent's TUI go through a tty
// as they do for a person. Used by the agent session tests (factory claude,
// factory codex).
import * as pty from 'node-pty';
import { expect } from 'vitest';
import { cliArgs } from './cli.js';

export interface CliInPty {
  term: pty.IPty;
  /** The CLI's exit code, once it exits. */
  exited: Promise<number>;
  /** What the screen says, without the escape sequences that draw it. */
  text(): string;
  /** Waits until the screen's text matches; fails with its tail and `context()` when it does not in time. */
  waitFor(re: RegExp, ms?: number): Promise<void>;
}

/**
 * `factory --data-dir <dataDir> --no-start <args>` in a 120×40 pty from `cwd`.
 * `context` adds a line to a failed wait (what the model stub saw, say).
 */
export function cliInPty(opts: { dataDir: string; cwd: string; args: string[]; context?: () => string }): CliInPty {
  const term = pty.spawn(process.execPath, cliArgs('--data-dir', opts.dataDir, '--no-start', ...opts.args), {
    cols: 120,
    rows: 40,
    cwd: opts.cwd,
    env: process.env as Record<string, string>,
  });
  let out = '';
  term.onData((d) => (out += d));
  const exited = new Promise<number>((r) => term.onExit((e) => r(e.exitCode)));
  // Cursor moves stand for spaces, so words a TUI places one by one stay apart.
  const text = () =>
    out
      .replace(/\x1b\[\d*C/g, ' ')
      .replace(/\x1b\[\d+;\d+H/g, ' ')
      .replace(/\x1b\[[0-9;?<>=$]*[A-Za-z]/g, '')
      .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '');
  const waitFor = async (re: RegExp, ms = 60_000) => {
    const end = Date.now() + ms;
    while (!re.test(text()) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    expect(text(), `${JSON.stringify(text().slice(-1500))}\n${opts.context?.() ?? ''}`).toMatch(re);
  };
  return { term, exited, text, waitFor };
}
