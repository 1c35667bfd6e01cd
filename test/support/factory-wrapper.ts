// `factory` as an agent's hooks run it in the hooks tests: a script on the
// agent's PATH that runs this checkout's CLI against the test's data folder and
// logs each call (arguments, exit status, stderr) for the test to read, and
// what the tests do with the agent processes they start.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cliArgs } from './cli.js';

export interface FactoryCall {
  /** As the agent passed them, `--data-dir` included. */
  args: string;
  status: number;
  stderr: string;
}

/** Writes the `factory` script at `file` (mode 0755). */
export function writeFactoryWrapper(file: string, opts: { dataDir: string; log: string }): void {
  fs.writeFileSync(
    file,
    [
      '#!/bin/bash',
      // Next to the log, in the test's folder: a call killed with its agent leaves no file in the temp directory.
      `err=$(mktemp -p ${JSON.stringify(path.dirname(opts.log))} factory-stderr.XXXXXX)`,
      `${[process.execPath, ...cliArgs('--data-dir', opts.dataDir)].map((a) => JSON.stringify(a)).join(' ')} "$@" 2>"$err"`,
      's=$?',
      'cat "$err" >&2',
      `printf '%s\\t%s\\t%s\\n' "$*" "$s" "$(base64 -w0 < "$err")" >> ${JSON.stringify(opts.log)}`,
      'rm -f "$err"',
      'exit $s',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
}

/** Every call the script logged, in order. */
export function factoryCalls(log: string): FactoryCall[] {
  if (!fs.existsSync(log)) return [];
  return fs
    .readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [args, status, err] = l.split('\t');
      return { args: args!, status: Number(status), stderr: Buffer.from(err ?? '', 'base64').toString('utf8') };
    });
}

/** Kills the process group of every agent started (detached) that is still running: a failed test leaves none. */
export function killStarted(children: readonly ChildProcess[]): void {
  for (const c of children) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

/** Polls `probe` until it gives a value (not undefined or false), or throws naming `what`. */
export async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number, everyMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
