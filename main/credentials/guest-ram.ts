// Guest memory for the leak check, read straight from the QEMU process that
// holds it (/proc/<pid>/mem, Linux) while the VM is paused, instead of a QMP
// dump written to the sandbox folder and read back: the dump of a 1 GiB guest
// took as long again as the scan, and wrote the guest's memory to disk on every
// check (a Claude Code Stop hook checks after every turn).
//
// Only QEMU's own answers locate the memory: `info ramblock` names every RAM
// block (ram0 is the guest's RAM; the rest must be ROMs the guest cannot write,
// or the dump, which holds them all, is used), `gpa2hva` gives ram0's address,
// and QEMU's memory map must hold that whole range, so a wrong process or a
// changed layout means the dump rather than a wrong read.
import { open, readFile, type FileHandle } from 'node:fs/promises';
import type { PositionalReader } from './leak-inflate.js';
import type { PageMap } from './leak-pages.js';
import { GUEST_RAM_ID as GUEST_RAM_BLOCK } from '../vm/qemu-args.js';

/** Anything that runs a QMP command: the VM's own client (a QMP socket takes one client at a time). */
export interface QmpExecutor {
  execute(command: string, args?: Record<string, unknown>): Promise<unknown>;
}

/** Guest memory open for reading; close() resumes the VM if the read paused it. */
export interface GuestRam {
  bytes: number;
  read: PositionalReader;
  /** Guest pages lie in ram0 in order, each starting on a 4 KiB boundary. */
  pageMap: PageMap;
  close(): Promise<void>;
}

export type GuestRamOpen = { ram: GuestRam } | { unavailable: string };

export interface RamBlock {
  name: string;
  usedBytes: number;
}

/** Parses HMP `info ramblock`; null when a line is not what QEMU 7–9 print. */
export function parseRamBlocks(text: string): RamBlock[] | null {
  const blocks: RamBlock[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (!line.trim() || /^\s*Block Name\s/.test(line)) continue;
    const m = /^\s*(\S+)\s+\d+ [KMG]iB\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s*$/i.exec(line);
    if (!m) return null;
    blocks.push({ name: m[1]!, usedBytes: Number(BigInt(m[2]!)) });
  }
  return blocks;
}

/**
 * RAM blocks the guest cannot write: the BIOS and option ROM areas, PCI option
 * ROMs and fw_cfg's ROM blobs. Anything else (a VGA framebuffer, shared memory)
 * is memory the guest could leave a value in, which only the dump reads.
 */
export function guestWritableBesidesRam(blocks: RamBlock[]): string[] {
  return blocks
    .map((b) => b.name)
    .filter((n) => n !== GUEST_RAM_BLOCK && n !== 'pc.bios' && n !== 'pc.rom' && !n.startsWith('/rom@etc/') && !/\.rom$/.test(n));
}

/** The host address `gpa2hva 0` reports for the guest's RAM block (guest address 0 is its first byte), or null. */
export function parseGpa2hva(text: string): number | null {
  const m = /^Host virtual address for 0x0 \((\S+)\) is (0x[0-9a-f]+)\s*$/i.exec(text.trim());
  if (!m || m[1] !== GUEST_RAM_BLOCK) return null;
  const hva = BigInt(m[2]!);
  return hva <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(hva) : null;
}

/** Whether one mapping in /proc/<pid>/maps holds [start, start + bytes). */
export function mappedWhole(maps: string, start: number, bytes: number): boolean {
  for (const line of maps.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) r/.exec(line);
    if (m && parseInt(m[1]!, 16) <= start && start + bytes <= parseInt(m[2]!, 16)) return true;
  }
  return false;
}

const hmp = async (qmp: QmpExecutor, command: string): Promise<string> => String(await qmp.execute('human-monitor-command', { 'command-line': command }));

/**
 * Pauses the VM (unless paused already) and opens its RAM in QEMU process `pid`
 * for reading; { unavailable } with the reason (the VM running as before) when
 * it cannot be read that way, so the caller dumps instead.
 */
export async function openGuestRam(qmp: QmpExecutor, pid: number): Promise<GuestRamOpen> {
  if (process.platform !== 'linux') return { unavailable: 'no /proc on this system' };
  if (!Number.isSafeInteger(pid) || pid <= 0) return { unavailable: 'no QEMU process id for this VM' };
  const blocks = parseRamBlocks(await hmp(qmp, 'info ramblock'));
  const ram = blocks?.find((b) => b.name === GUEST_RAM_BLOCK);
  if (!blocks || !ram || !ram.usedBytes) return { unavailable: `QEMU's RAM block list has no ${GUEST_RAM_BLOCK} in the expected form` };
  const others = guestWritableBesidesRam(blocks);
  if (others.length) return { unavailable: `the VM has guest memory besides ${GUEST_RAM_BLOCK} (${others.join(', ').slice(0, 200)})` };
  const hva = parseGpa2hva(await hmp(qmp, 'gpa2hva 0'));
  if (hva === null) return { unavailable: `QEMU did not give ${GUEST_RAM_BLOCK}'s address` };
  let maps: string;
  try {
    maps = await readFile(`/proc/${pid}/maps`, 'utf8');
  } catch (err) {
    // ENOENT: no such process; EACCES: the system lets no one but root look into it.
    return { unavailable: `the memory map of process ${pid} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  if (!mappedWhole(maps, hva, ram.usedBytes)) return { unavailable: `process ${pid} does not map ${GUEST_RAM_BLOCK} where QEMU says it is` };

  const { running } = (await qmp.execute('query-status')) as { running?: boolean };
  // Paused, the guest cannot move a value from a page not yet read to one already read.
  if (running) await qmp.execute('stop');
  /** Resumes the VM if it was running; what went wrong, if it could not be. */
  const resume = async (): Promise<string | undefined> =>
    running ? qmp.execute('cont').then(() => undefined, (err: Error) => `the VM could not be resumed after the read: ${err.message}`) : undefined;
  let fh: FileHandle;
  try {
    fh = await open(`/proc/${pid}/mem`, 'r');
  } catch (err) {
    const notResumed = await resume();
    return { unavailable: [`QEMU's memory cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, notResumed].filter(Boolean).join('; ') };
  }
  const bytes = ram.usedBytes;
  return {
    ram: {
      bytes,
      pageMap: { segments: [{ offset: 0, size: bytes, paddr: 0 }] },
      async read(position, length, into) {
        const n = Math.max(0, Math.min(length, bytes - position));
        const buf = into && into.length >= n ? into.subarray(0, n) : Buffer.allocUnsafe(n);
        let got = 0;
        while (got < n) {
          const { bytesRead } = await fh.read(buf, got, n - got, hva + position + got);
          if (!bytesRead) throw new Error(`QEMU's memory ended ${position + got} bytes into ${GUEST_RAM_BLOCK} (the VM exited?)`);
          got += bytesRead;
        }
        return buf;
      },
      async close() {
        await fh.close().catch(() => {
          // Ignored: a read-only handle on /proc, so a failed close loses nothing, and it must not keep the VM paused.
        });
        const notResumed = await resume();
        if (notResumed) throw new Error(notResumed);
      },
    },
  };
}
