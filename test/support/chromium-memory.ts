// Resident memory of the Chromium renderer processes this Node process launched
// (its descendants with --type=renderer): the JS heap plus everything else
// (ArrayBuffers, DOM, GPU memory), which a JS-heap figure alone would miss.
import { readdirSync, readFileSync } from 'node:fs';

export function rendererRss(ancestor = process.pid): number {
  const parent = new Map<number, number>();
  const renderers: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('--type=renderer')) renderers.push(Number(d));
    } catch {
      /* gone */
    }
  }
  const descends = (pid: number) => {
    for (let p = pid, hops = 0; p > 1 && hops < 20; p = parent.get(p) ?? 0, hops++) if (p === ancestor) return true;
    return false;
  };
  let total = 0;
  for (const pid of renderers.filter(descends)) {
    try {
      total += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
    } catch {
      /* gone */
    }
  }
  return total;
}
