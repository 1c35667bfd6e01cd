// A shell on the host in a given folder (e.g. the host repository, to inspect an
// approved branch), as a TerminalSource for the TerminalService.
import * as fs from 'node:fs';
import * as pty from 'node-pty';
import { FactoryError } from '../../common/errors.js';
import { ptySource } from './pty-source.js';
import type { TerminalSource } from './types.js';

export interface HostShellOptions {
  cwd: string;
  cols: number;
  rows: number;
  /** Defaults to $SHELL, else /bin/bash. */
  shell?: string;
  args?: string[];
  /** Added to the inherited environment. */
  env?: Record<string, string>;
}

export function spawnHostShell(opts: HostShellOptions): { source: TerminalSource; pid: number } {
  let st: fs.Stats;
  try {
    st = fs.statSync(opts.cwd);
  } catch {
    throw new FactoryError('InvalidInput', `shell folder ${opts.cwd} does not exist`);
  }
  if (!st.isDirectory()) throw new FactoryError('InvalidInput', `shell folder ${opts.cwd} is not a directory`);
  const shell = opts.shell ?? process.env.SHELL ?? '/bin/bash';
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  Object.assign(env, { TERM: 'xterm-256color', COLORTERM: 'truecolor' }, opts.env);
  const p = pty.spawn(shell, opts.args ?? [], {
    name: 'xterm-256color',
    cols: opts.cols,
    rows: opts.rows,
    cwd: opts.cwd,
    env,
    // Raw bytes: the viewer decodes UTF-8, so nothing is decoded twice.
    encoding: null,
  });
  return { source: ptySource(p), pid: p.pid };
}
