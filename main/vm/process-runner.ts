// Runs host tools (mmdebstrap, qemu-img, npm, ...) with their output kept as a
// bounded tail, so a failure can say what the tool printed last.
import { spawn } from 'node:child_process';

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Last lines of stdout and stderr interleaved, bounded. */
  tail: string[];
  stdout: string;
  timedOut: boolean;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  onLine?: (line: string) => void;
  /** Cap on the stdout text kept in `stdout`. */
  maxStdoutBytes?: number;
  tailLines?: number;
}

export type CommandRunner = (command: string, args: string[], opts?: RunOptions) => Promise<RunResult>;

export const runCommand: CommandRunner = (command, args, opts = {}) =>
  new Promise((resolve, reject) => {
    const tailLines = opts.tailLines ?? 40;
    const maxStdout = opts.maxStdoutBytes ?? 1024 * 1024;
    const tail: string[] = [];
    let stdout = '';
    let timedOut = false;
    const child = spawn(command, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const pending = { out: '', err: '' };
    const feed = (which: 'out' | 'err', chunk: Buffer) => {
      const text = pending[which] + chunk.toString('utf8');
      const lines = text.split(/\r?\n/);
      pending[which] = lines.pop() ?? '';
      for (const line of lines) pushLine(line);
    };
    const pushLine = (line: string) => {
      tail.push(line.length > 2000 ? line.slice(0, 2000) + '…' : line);
      if (tail.length > tailLines) tail.shift();
      opts.onLine?.(line);
    };
    child.stdout.on('data', (c: Buffer) => {
      if (stdout.length < maxStdout) stdout += c.toString('utf8').slice(0, maxStdout - stdout.length);
      feed('out', c);
    });
    child.stderr.on('data', (c: Buffer) => feed('err', c));
    const timer = opts.timeoutMs
      ? setTimeout(() => {
          timedOut = true;
          child.kill('SIGKILL');
        }, opts.timeoutMs)
      : undefined;
    child.on('error', (err) => {
      if (timer) clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      for (const rest of [pending.out, pending.err]) if (rest) pushLine(rest);
      resolve({ code, signal, tail, stdout, timedOut });
    });
  });

/** Resolves a program on PATH, or undefined. */
export async function findOnPath(program: string, envPath = process.env.PATH ?? ''): Promise<string | undefined> {
  const { access } = await import('node:fs/promises');
  const { constants } = await import('node:fs');
  const path = await import('node:path');
  if (program.includes('/')) {
    try {
      await access(program, constants.X_OK);
      return program;
    } catch {
      // Missing or not executable: the caller reports the program as not found.
      return undefined;
    }
  }
  const dirs = envPath.split(path.delimiter).concat(['/usr/sbin', '/sbin']);
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, program);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}
