// CPU seconds spent by the processes a benchmark drives, read from /proc: this
// process, its waited-for children (e.g. an `ssh` client), any one pid (QEMU),
// and the Chromium processes it launched, by kind (renderer, gpu-process, ...).
import { readdirSync, readFileSync } from 'node:fs';

const TICK = 100; // USER_HZ of /proc/<pid>/stat

function statFields(pid: number | 'self'): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name; index 0 is field 3 (state).
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** user + system CPU seconds of one process (0 when it is gone). */
export function pidCpu(pid: number | 'self'): number {
  try {
    const f = statFields(pid);
    return (Number(f[11]) + Number(f[12])) / TICK;
  } catch {
    return 0;
  }
}

/** CPU seconds of this process's children that ended and were waited for. */
export function waitedChildrenCpu(): number {
  const f = statFields('self');
  return (Number(f[13]) + Number(f[14])) / TICK;
}

/** CPU seconds of the live Chromium processes descending from `ancestor`, by --type (browser when none). */
export function chromiumCpu(ancestor = process.pid): Record<string, number> {
  const parent = new Map<number, number>();
  const cpu = new Map<number, number>();
  const kind = new Map<number, string>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const pid = Number(d);
    try {
      const f = statFields(pid);
      parent.set(pid, Number(f[1]));
      cpu.set(pid, (Number(f[11]) + Number(f[12])) / TICK);
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (/chrom/i.test(cmd.split('\0')[0] ?? '')) kind.set(pid, /--type=([\w-]+)/.exec(cmd)?.[1] ?? 'browser');
    } catch {
      /* gone */
    }
  }
  const descends = (pid: number) => {
    for (let p = pid, hops = 0; p > 1 && hops < 20; p = parent.get(p) ?? 0, hops++) if (p === ancestor) return true;
    return false;
  };
  const out: Record<string, number> = {};
  for (const [pid, k] of kind) if (descends(pid)) out[k] = (out[k] ?? 0) + cpu.get(pid)!;
  return out;
}

export function sum(r: Record<string, number>): number {
  return Object.values(r).reduce((a, b) => a + b, 0);
}
