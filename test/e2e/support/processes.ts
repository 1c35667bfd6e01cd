// Finds QEMU processes that belong to one test's data dir, by their command line,
// so a test checks (and cleans) only what it started.
import { readdirSync, readFileSync } from 'node:fs';
import { readStat } from '../../../main/sessions/session-process.js';

// A QEMU that runs a helper (`-incoming exec:cat …`, a migrate to `exec:`) forks
// first: until the child execs, it shows QEMU's own command line. Such a child
// (its parent one of the QEMUs found) is not a sandbox and is not counted; under
// load the window is wide enough for a poll to see it.
export function qemuProcessesUnder(dir: string): Array<{ pid: number; cmdline: string }> {
  const found: Array<{ pid: number; ppid: number; cmdline: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (!/qemu-system/.test(cmdline) || !cmdline.includes(dir)) continue;
    const stat = readStat(Number(entry));
    if (stat) found.push({ pid: Number(entry), ppid: stat.ppid, cmdline });
  }
  const pids = new Set(found.map((p) => p.pid));
  return found.filter((p) => !pids.has(p.ppid)).map(({ pid, cmdline }) => ({ pid, cmdline }));
}

export function which(binary: string): boolean {
  return (process.env.PATH ?? '').split(':').some((d) => {
    try {
      readFileSync(`${d}/${binary}`, { flag: 'r' });
      return true;
    } catch {
      return false;
    }
  });
}
