// Finds QEMU processes that belong to one test's data dir, by their command line,
// so a test checks (and cleans) only what it started.
import { readdirSync, readFileSync } from 'node:fs';

export function qemuProcessesUnder(dir: string): Array<{ pid: number; cmdline: string }> {
  const found: Array<{ pid: number; cmdline: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (/qemu-system/.test(cmdline) && cmdline.includes(dir)) found.push({ pid: Number(entry), cmdline });
  }
  return found;
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
