// Every git invocation on the host goes through here: an argument array (never a
// shell), a timeout, an output cap, and options that keep the repository's own
// (untrusted) config from running anything: no hooks, no fsmonitor, no external
// diff or textconv, no auto-gc, no pager, no prompts.
import { spawn } from 'node:child_process';
import { FactoryError } from '../../common/contract.js';

export const GIT_SAFETY_OPTIONS: readonly string[] = [
  '-c', 'core.hooksPath=/dev/null',
  '-c', 'core.fsmonitor=false',
  '-c', 'core.untrackedCache=false',
  '-c', 'core.pager=cat',
  '-c', 'diff.external=',
  '-c', 'gc.auto=0',
  '-c', 'maintenance.auto=false',
  '-c', 'fetch.writeCommitGraph=false',
  '-c', 'credential.helper=',
  '-c', 'protocol.allow=never',
  '-c', 'protocol.file.allow=always',
];

export interface GitRunOptions {
  cwd?: string;
  timeoutMs?: number;
  /** Stop collecting stdout beyond this many bytes (the process is killed); `truncated` says so. */
  maxStdoutBytes?: number;
  env?: Record<string, string>;
  input?: string | Buffer;
}

export interface GitResult {
  code: number | null;
  stdout: string;
  stdoutBuffer: Buffer;
  stderr: string;
  truncated: boolean;
  timedOut: boolean;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_STDOUT = 32 * 1024 * 1024;
const MAX_STDERR = 64 * 1024;

/** Runs `git <safety options> <args>`; resolves with the exit status, never throws for a non-zero exit. */
export function runGit(args: readonly string[], opts: GitRunOptions = {}): Promise<GitResult> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxStdout = opts.maxStdoutBytes ?? DEFAULT_MAX_STDOUT;
  return new Promise((resolve, reject) => {
    const child = spawn('git', ['--no-pager', ...GIT_SAFETY_OPTIONS, ...args], {
      cwd: opts.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        ...process.env,
        GIT_TERMINAL_PROMPT: '0',
        GIT_OPTIONAL_LOCKS: '0',
        GIT_ASKPASS: '',
        SSH_ASKPASS: '',
        LC_ALL: 'C',
        ...opts.env,
      },
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let truncated = false;
    let err = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      if (truncated) return;
      if (outBytes + chunk.length > maxStdout) {
        out.push(chunk.subarray(0, maxStdout - outBytes));
        outBytes = maxStdout;
        truncated = true;
        child.kill('SIGKILL');
        return;
      }
      out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (err.length < MAX_STDERR) err += chunk.toString('utf8').slice(0, MAX_STDERR - err.length);
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new FactoryError('GitUnavailable', `could not run git: ${e.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const stdoutBuffer = Buffer.concat(out);
      resolve({ code, stdout: stdoutBuffer.toString('utf8'), stdoutBuffer, stderr: err, truncated, timedOut });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

/** Like runGit, but a non-zero exit (or timeout) becomes a FactoryError naming the command. */
export async function git(args: readonly string[], opts: GitRunOptions & { errorName?: string } = {}): Promise<GitResult> {
  const r = await runGit(args, opts);
  if (r.timedOut) {
    throw new FactoryError(opts.errorName ?? 'GitFailed', `git ${args[0]} timed out after ${opts.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms`);
  }
  if (r.code !== 0 && !(r.truncated && r.code === null)) {
    throw new FactoryError(
      opts.errorName ?? 'GitFailed',
      `git ${args.filter((a) => !a.startsWith('-')).slice(0, 2).join(' ')} failed: ${firstLine(r.stderr) || `exit ${r.code}`}`,
      r.stderr.trim() || undefined,
    );
  }
  return r;
}

export function firstLine(s: string): string {
  return s.split('\n').map((l) => l.trim()).find((l) => l.length > 0) ?? '';
}
