// Every git invocation on the host goes through here: an argument array (never a
// shell), a timeout, an output cap, and options that keep the repository's own
// (untrusted) config from running anything: no hooks, no fsmonitor, no external
// diff or textconv, no auto-gc, no pager, no prompts. Each run is bounded in
// memory and CPU time (git-limits.ts): a host default, made stricter by the
// caller or by the guest-data folder git works in.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { FactoryError } from '../../common/errors.js';
import type { ErrorName } from '../../common/errors.js';
import { boundedGitCommand, describeLimit, effectiveLimits, limitExceeded, type GitLimits, type LimitExceeded } from './git-limits.js';

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
  /** Stream this file (from byte `start`) to git's stdin instead of `input`. */
  inputFile?: { path: string; start?: number };
  /** Stricter bounds than the default for this run (never looser). */
  limits?: GitLimits;
}

export interface GitResult {
  code: number | null;
  stdout: string;
  stdoutBuffer: Buffer;
  stderr: string;
  truncated: boolean;
  timedOut: boolean;
  signal: NodeJS.Signals | null;
  /** Set when git was stopped by its memory or CPU bound. */
  limitExceeded?: LimitExceeded;
  /** The bounds it ran under. */
  limits: GitLimits;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_STDOUT = 32 * 1024 * 1024;
const MAX_STDERR = 64 * 1024;

/** Runs `git <safety options> <args>`; resolves with the exit status, never throws for a non-zero exit. */
export function runGit(args: readonly string[], opts: GitRunOptions = {}): Promise<GitResult> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxStdout = opts.maxStdoutBytes ?? DEFAULT_MAX_STDOUT;
  return new Promise((resolve, reject) => {
    const limits = effectiveLimits({ cwd: opts.cwd, gitDir: opts.env?.GIT_DIR, limits: opts.limits });
    const bounded = boundedGitCommand(limits, ['--no-pager', ...GIT_SAFETY_OPTIONS, ...args]);
    const child = spawn(bounded.command, bounded.args, {
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
        ...bounded.env,
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
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stdoutBuffer = Buffer.concat(out);
      const exceeded = code === 0 || timedOut || truncated ? undefined : limitExceeded(signal, err, code);
      resolve({
        code, stdout: stdoutBuffer.toString('utf8'), stdoutBuffer, stderr: err, truncated, timedOut, signal, limits,
        ...(exceeded ? { limitExceeded: exceeded } : {}),
      });
    });
    child.stdin.on('error', () => undefined);
    if (opts.inputFile) {
      const input = fs.createReadStream(opts.inputFile.path, { start: opts.inputFile.start ?? 0 });
      input
        .on('error', (e) => {
          child.kill('SIGKILL');
          err += `could not read ${opts.inputFile!.path}: ${e.message}`;
        })
        .pipe(child.stdin);
      // pipe() never closes its source when git stops reading early (it refused the
      // input, or exited): without this every such run would keep the file open.
      child.stdin.on('error', () => input.destroy());
      child.on('close', () => input.destroy());
    } else {
      child.stdin.end(opts.input ?? '');
    }
  });
}

/** The top of the git work tree around `cwd`, or undefined when `cwd` is not inside one (or does not exist). */
export async function workTreeTop(cwd: string): Promise<string | undefined> {
  const r = await runGit(['-C', cwd, 'rev-parse', '--show-toplevel'], { timeoutMs: 30_000 });
  const top = r.stdout.trim();
  return r.code === 0 && top ? top : undefined;
}

/** Like runGit, but a non-zero exit (or timeout) becomes a FactoryError naming the command. */
export async function git(args: readonly string[], opts: GitRunOptions & { errorName?: ErrorName } = {}): Promise<GitResult> {
  const r = await runGit(args, opts);
  if (r.timedOut) {
    throw new FactoryError(opts.errorName ?? 'GitFailed', `git ${args[0]} timed out after ${opts.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms`);
  }
  // A bound hit keeps its own name whatever the caller's error name: callers (the quarantine) say what it stopped.
  if (r.limitExceeded) {
    throw new FactoryError('GitLimitExceeded', limitMessage(args, r), r.stderr.trim() || undefined);
  }
  if (r.code !== 0 && !(r.truncated && r.code === null)) {
    throw new FactoryError(
      opts.errorName ?? 'GitFailed',
      `git ${subcommand(args)} failed: ${firstLine(r.stderr) || `exit ${r.code}`}`,
      r.stderr.trim() || undefined,
    );
  }
  return r;
}

/** "git index-pack exceeded its memory bound (...): <git's own words>" */
export function limitMessage(args: readonly string[], r: GitResult): string {
  const why = firstLine(r.stderr) || (r.signal ? `killed by ${r.signal}` : r.limitExceeded === 'cpu' ? 'killed by SIGXCPU' : `exit ${r.code}`);
  return `git ${subcommand(args)} exceeded ${describeLimit(r.limitExceeded!, r.limits)}: ${why}`;
}

function subcommand(args: readonly string[]): string {
  return args.filter((a, i) => !a.startsWith('-') && args[i - 1] !== '-c').slice(0, 2).join(' ');
}

export function firstLine(s: string): string {
  return s.split('\n').map((l) => l.trim()).find((l) => l.length > 0) ?? '';
}
