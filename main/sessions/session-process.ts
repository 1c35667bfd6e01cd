// The Claude Code process behind a hook, and whether it still lives. Claude
// Code runs a hook command through a shell, maybe behind npx or env; the
// session's process is the first ancestor that is none of those. On Linux the
// start time (from /proc) guards against a reused pid; elsewhere the pid alone.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Programs that stand between Claude Code and the hook's own process; 'factory'
 * is the CLI run through its #! line (the kernel names such a process after the script).
 */
const WRAPPERS = new Set(['factory', 'sh', 'bash', 'dash', 'zsh', 'ksh', 'fish', 'env', 'npm', 'npx', 'npm exec', 'tsx', 'timeout', 'runuser', 'sudo']);

export interface ProcStat {
  comm: string;
  ppid: number;
  start: string;
}

export function readStat(pid: number, procRoot = '/proc'): ProcStat | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`${procRoot}/${pid}/stat`, 'utf8');
  } catch {
    // The process is gone.
    return undefined;
  }
  // comm is in parentheses and may itself hold spaces or parentheses: split at the last ')'.
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  const rest = text.slice(close + 2).split(' ');
  const ppid = Number(rest[1]);
  const start = rest[19];
  if (!Number.isInteger(ppid) || start === undefined) return undefined;
  return { comm: text.slice(open + 1, close), ppid, start };
}

/**
 * Without /proc (macOS): ps, which both procps and BSD ps answer alike. lstart is
 * the start time, read as seconds since the epoch: the app's API takes a start
 * time as digits, as /proc gives it.
 */
export function psStat(pid: number): ProcStat | undefined {
  let out: string;
  try {
    out = execFileSync('ps', ['-o', 'ppid=', '-o', 'lstart=', '-o', 'comm=', '-p', String(pid)], { encoding: 'utf8', timeout: 5000 }).trim();
  } catch {
    // ps exits non-zero for a pid that is gone.
    return undefined;
  }
  const m = /^(\d+)\s+(\S+\s+\S+\s+\d+\s+[\d:]+\s+\d+)\s+(.+)$/.exec(out);
  if (!m) return undefined;
  const startMs = Date.parse(m[2]!.replace(/\s+/g, ' '));
  if (!Number.isFinite(startMs)) return undefined;
  return { ppid: Number(m[1]), start: String(Math.floor(startMs / 1000)), comm: path.basename(m[3]!) };
}

const defaultReader = (pid: number): ProcStat | undefined => (fs.existsSync('/proc/self/stat') ? readStat(pid) : psStat(pid));

/** Whether the command line of a Node process is the factory CLI itself (npm's bin shim runs it under node). */
function isFactoryCli(pid: number): boolean {
  let args: string;
  try {
    args = fs.existsSync(`/proc/${pid}/cmdline`)
      ? fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ')
      : execFileSync('ps', ['-o', 'args=', '-p', String(pid)], { encoding: 'utf8', timeout: 5000 });
  } catch {
    // Gone before its command line could be read: not the process we look for.
    return false;
  }
  return /(^|\/)factory(\s|$)|cli\/main\.[jt]s(\s|$)/.test(args);
}

/** The session's process, starting from the hook's parent. */
export function sessionProcess(fromPid = process.ppid, read: (pid: number) => ProcStat | undefined = defaultReader): { pid: number; start?: string } {
  let pid = fromPid;
  for (let depth = 0; depth < 16; depth++) {
    const stat = read(pid);
    if (!stat) return { pid };
    const wrapper = WRAPPERS.has(stat.comm) || (stat.comm === 'node' && isFactoryCli(pid));
    if (!wrapper || stat.ppid <= 1) return { pid, start: stat.start };
    pid = stat.ppid;
  }
  return { pid };
}

/** Alive, and (when its start time was recorded) the same process, not a later one with its pid. */
export function processAlive(pid: number, start?: string, read: (pid: number) => ProcStat | undefined = defaultReader): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (start === undefined) return true;
  const stat = read(pid);
  // Alive but unreadable (ps failed): keep the sandbox rather than reap a live session's.
  return stat ? stat.start === start : true;
}
