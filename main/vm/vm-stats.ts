// CPU and memory of a QEMU process, read on the host from /proc (Linux). The
// guest cannot reach these files: they describe the host process that emulates it.
// A sample is raw counters; two samples give a CPU percentage.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';

/** Raw counters of one process at one instant. */
export interface ProcessCounters {
  pid: number;
  /** Host clock, ms. */
  at: number;
  /** Clock ticks since boot at which the process started: a pid reused by another process has another. */
  startTicks: number;
  /** utime + stime of every thread, in clock ticks. */
  cpuTicks: number;
  rssBytes: number;
  pssBytes: number;
}

let clockTicksPerSecond: Promise<number> | undefined;

/** The kernel's USER_HZ (getconf CLK_TCK); 100 where it cannot be asked, which is its value on x86 and arm. */
export function clockTicks(): Promise<number> {
  clockTicksPerSecond ??= new Promise((resolve) => {
    execFile('getconf', ['CLK_TCK'], { timeout: 5000 }, (err, stdout) => {
      const n = Number(String(stdout).trim());
      resolve(!err && Number.isInteger(n) && n > 0 && n <= 100_000 ? n : 100);
    });
  });
  return clockTicksPerSecond;
}

/**
 * Fields of /proc/<pid>/stat. The command name (field 2) is in parentheses and may
 * itself hold spaces and parentheses, so the fields are counted from the last ')'.
 */
export function parseProcStat(text: string): { state: string; cpuTicks: number; startTicks: number; rssPages: number } {
  const close = text.lastIndexOf(')');
  if (close < 0) throw new Error('no command name in /proc stat');
  const fields = text.slice(close + 2).trim().split(' ');
  // fields[0] is field 3 (state): field N is fields[N - 3].
  const num = (n: number) => {
    const v = Number(fields[n - 3]);
    if (!Number.isSafeInteger(v) || v < 0) throw new Error(`/proc stat field ${n} is not a count: ${JSON.stringify(fields[n - 3])}`);
    return v;
  };
  return { state: fields[0] ?? '', cpuTicks: num(14) + num(15), startTicks: num(22), rssPages: num(24) };
}

/** Rss and Pss (bytes) from /proc/<pid>/smaps_rollup; undefined for a field it lacks. */
export function parseSmapsRollup(text: string): { rssBytes?: number; pssBytes?: number } {
  const kb = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : undefined;
  };
  const rssBytes = kb('Rss');
  const pssBytes = kb('Pss');
  return { ...(rssBytes !== undefined ? { rssBytes } : {}), ...(pssBytes !== undefined ? { pssBytes } : {}) };
}

/**
 * The guest RAM a QEMU command line asks for (`-m 1024`, `-m 2G`, `-m size=512M,slots=2`);
 * QEMU reads a plain number as MiB. Undefined when there is no -m or it cannot be read.
 */
export function guestMemoryFromCmdline(cmdline: string): number | undefined {
  const args = cmdline.split('\0');
  const i = args.lastIndexOf('-m');
  const value = i >= 0 ? args[i + 1] : undefined;
  if (!value) return undefined;
  const size = /^(?:size=)?(\d+(?:\.\d+)?)([kKmMgGtT]?)[bB]?(?:,|$)/.exec(value);
  if (!size) return undefined;
  const unit = { '': 2 ** 20, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 }[size[2]!.toLowerCase() as '' | 'k' | 'm' | 'g' | 't'];
  const bytes = Math.round(Number(size[1]) * unit);
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined;
}

/** Reads a process's counters; undefined when it is gone (or /proc is not there, as on macOS). */
export async function readProcessCounters(pid: number, now: () => number = Date.now): Promise<ProcessCounters | undefined> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined;
  try {
    const [stat, rollup] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '')]);
    const s = parseProcStat(stat);
    // An exiting process (zombie or dead, or its memory already released) reads
    // as 0 bytes: that is its end, not a figure to show.
    if (s.state === 'Z' || s.state === 'X' || (!rollup && s.rssPages === 0)) return undefined;
    const mem = parseSmapsRollup(rollup);
    // Kernels before 4.14 have no smaps_rollup: Rss from stat, and Pss taken as Rss.
    const rssBytes = mem.rssBytes ?? s.rssPages * 4096;
    return { pid, at: now(), startTicks: s.startTicks, cpuTicks: s.cpuTicks, rssBytes, pssBytes: mem.pssBytes ?? rssBytes };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
    throw err;
  }
}

/** The guest RAM size from a process's command line, or undefined. */
export async function readGuestMemory(pid: number): Promise<number | undefined> {
  try {
    return guestMemoryFromCmdline(await readFile(`/proc/${pid}/cmdline`, 'utf8'));
  } catch {
    return undefined; // gone, or no /proc: the size is only shown when known
  }
}

/**
 * CPU use between two samples of the same process, as a percentage of one core.
 * Undefined when they are not of the same process (a reused pid) or time did not move.
 */
export function cpuPercent(prev: ProcessCounters, next: ProcessCounters, ticksPerSecond: number): number | undefined {
  if (prev.pid !== next.pid || prev.startTicks !== next.startTicks) return undefined;
  const wallMs = next.at - prev.at;
  const ticks = next.cpuTicks - prev.cpuTicks;
  if (wallMs <= 0 || ticks < 0) return undefined;
  return ((ticks / ticksPerSecond) * 1000 * 100) / wallMs;
}
