// What processes and the whole host hold in memory, read from /proc and /sys
// (Linux only). Pss splits each shared page between the processes that map it,
// so the Pss of ten VMs summed counts a page they share once; Rss counts it ten
// times. The host's used memory is MemTotal − MemAvailable, as `free` shows it.
// KSM's knobs are root's choice: the benches read them, and only set them (as
// root) for a measurement that puts them back afterwards.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';

/** Fields of /proc/<pid>/smaps_rollup, KiB. */
export interface ProcessMemory {
  rssKiB: number;
  pssKiB: number;
  anonKiB: number;
  /** Anonymous memory backed by transparent huge pages. */
  anonHugeKiB: number;
  /** Pages of this process merged by KSM (kernels that report it). */
  ksmKiB: number;
  /** Resident anonymous memory that is writable and executable: QEMU's TCG translation cache. */
  jitKiB: number;
}

function field(text: string, name: string): number {
  const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** Throws, naming the pid, when the process is gone or its rollup cannot be read. */
export function processMemory(pid: number): ProcessMemory {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  if (!/^Pss:/m.test(text)) throw new Error(`/proc/${pid}/smaps_rollup has no Pss line`);
  return {
    rssKiB: field(text, 'Rss'),
    pssKiB: field(text, 'Pss'),
    anonKiB: field(text, 'Anonymous'),
    anonHugeKiB: field(text, 'AnonHugePages'),
    ksmKiB: field(text, 'KSM'),
    jitKiB: jitResident(pid),
  };
}

/** Sum of Rss over the anonymous rwx mappings of /proc/<pid>/smaps. */
function jitResident(pid: number): number {
  let total = 0;
  for (const block of readFileSync(`/proc/${pid}/smaps`, 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const head = block.slice(0, block.indexOf('\n'));
    if (/^[0-9a-f]+-[0-9a-f]+ rwxp [0-9a-f]+ 00:00 0\s*$/.test(head)) total += field(block, 'Rss');
  }
  return total;
}

export function sumMemory(list: ProcessMemory[]): ProcessMemory {
  const total: ProcessMemory = { rssKiB: 0, pssKiB: 0, anonKiB: 0, anonHugeKiB: 0, ksmKiB: 0, jitKiB: 0 };
  for (const m of list) for (const k of Object.keys(total) as Array<keyof ProcessMemory>) total[k] += m[k];
  return total;
}

/** The host as `free` sees it, KiB. */
export interface HostMemory {
  totalKiB: number;
  availableKiB: number;
  usedKiB: number;
}

export function hostMemory(): HostMemory {
  const text = readFileSync('/proc/meminfo', 'utf8');
  const totalKiB = field(text, 'MemTotal');
  const availableKiB = field(text, 'MemAvailable');
  if (!totalKiB || !availableKiB) throw new Error('/proc/meminfo has no MemTotal or MemAvailable');
  return { totalKiB, availableKiB, usedKiB: totalKiB - availableKiB };
}

const KSM = '/sys/kernel/mm/ksm';

/** KSM's state: run (0 off, 1 on, 2 unmerge), its scan rate and what it merged, or undefined without KSM. */
export interface KsmState {
  run: number;
  pagesToScan: number;
  sleepMillisecs: number;
  /** Pages that stand for merged pages, and how many pages share them. */
  pagesShared: number;
  pagesSharing: number;
  fullScans: number;
}

export function ksmState(): KsmState | undefined {
  if (!existsSync(`${KSM}/run`)) return undefined;
  const read = (name: string) => Number(readFileSync(`${KSM}/${name}`, 'utf8').trim());
  return {
    run: read('run'),
    pagesToScan: read('pages_to_scan'),
    sleepMillisecs: read('sleep_millisecs'),
    pagesShared: read('pages_shared'),
    pagesSharing: read('pages_sharing'),
    fullScans: read('full_scans'),
  };
}

/** Sets KSM's knobs (root only); returns a function that puts back what was there. */
export function setKsm(want: { run: number; pagesToScan?: number; sleepMillisecs?: number }): () => void {
  const before = ksmState();
  if (!before) throw new Error(`${KSM} does not exist: this kernel has no KSM`);
  const write = (name: string, value: number) => writeFileSync(`${KSM}/${name}`, `${value}\n`);
  if (want.pagesToScan !== undefined) write('pages_to_scan', want.pagesToScan);
  if (want.sleepMillisecs !== undefined) write('sleep_millisecs', want.sleepMillisecs);
  write('run', want.run);
  return () => {
    write('run', before.run);
    write('pages_to_scan', before.pagesToScan);
    write('sleep_millisecs', before.sleepMillisecs);
  };
}

export const mib = (kib: number): string => (kib / 1024).toFixed(0);

/**
 * Pss of every process on the host but those given, KiB: on a shared machine,
 * what other work added between two readings of the used memory.
 */
export function pssOfOthers(except: ReadonlySet<number>): number {
  let total = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || except.has(Number(d))) continue;
    try {
      total += field(readFileSync(`/proc/${d}/smaps_rollup`, 'utf8'), 'Pss');
    } catch {
      // Gone since the listing, or a kernel thread without a rollup: it holds nothing to count.
    }
  }
  return total;
}
