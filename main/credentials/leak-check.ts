// Leak check: proves that no credential a sandbox's routes used ever reached
// the VM. Scans the disk overlay, guest memory (read from QEMU's process, or a
// QMP dump where it cannot be: guest-ram), the serial console
// log, the host's logs of the task's terminal sessions and the work it returned
// for each value in the encodings it could plausibly take there (leak-needles),
// escaped or compressed (leak-scan, leak-inflate). Every source is streamed in
// bounded chunks. Hits name the credential, the encoding, the source and the
// offset — never the value.
//
// What it cannot promise: a value the guest transformed on purpose (encrypted,
// XORed, split up) is not found; this is a tripwire for the design failing
// (the proxy or an upstream handing the value to the guest, a tool storing it),
// not a detector of a guest that already has the value and hides it.
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { LeakHit, LeakReport } from '../../common/credentials.js';
import type { SecretSource } from './keychain.js';
import { needlesFor, type LeakNeedle } from './leak-needles.js';
import { elfPageMap } from './leak-pages.js';
import { openGuestRam, type QmpExecutor } from './guest-ram.js';
import { scanFile, scanReader, type ScanLimits, type SourceScan } from './leak-scan.js';
import { scanReturnedWork, statIfPresent, type ReturnedWorkLimits } from './leak-sources.js';
import { QmpClient } from '../vm/qmp-client.js';

export { needlesFor, type LeakNeedle } from './leak-needles.js';
export { scanFile } from './leak-scan.js';

export type { QmpExecutor } from './guest-ram.js';

/** Dumps the guest's memory to a file through QMP (`dump-guest-memory`, paging off: raw RAM as ELF). */
export async function dumpGuestMemoryWith(qmp: QmpExecutor, outFile: string, opts: { timeoutMs?: number } = {}): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      qmp.execute('dump-guest-memory', { paging: false, protocol: `file:${outFile}` }),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('dump-guest-memory did not finish in time')), opts.timeoutMs ?? 300_000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The same over a QMP socket nobody else holds (a fresh connection). */
export async function dumpGuestMemory(qmpSocket: string, outFile: string, opts: { timeoutMs?: number } = {}): Promise<void> {
  const qmp = await QmpClient.connect(qmpSocket, { timeoutMs: 5000 });
  try {
    await dumpGuestMemoryWith(qmp, outFile, opts);
  } finally {
    qmp.close();
  }
}

/**
 * Sources scanned somewhere else (a sandbox on a remote host): given the needles, it scans there and answers
 * per source. It must not send a value anywhere (the remote driver sends salted digests only).
 */
export interface RemoteLeakSource {
  scan(needles: readonly LeakNeedle[]): Promise<Array<{ source: LeakHit['source']; label: string; scan: SourceScan & { note?: string } }>>;
}

export interface LeakCheckSources {
  /** Disk, memory and serial log of a sandbox on a remote host, scanned there. */
  remote?: RemoteLeakSource;
  /** The sandbox's qcow2 overlay (guest writes land here). */
  overlayPath?: string;
  /** Later disks of the sandbox's chain (after its disk was frozen into a layer, writes go on in these). */
  moreDisks?: string[];
  /** The running VM's QMP client and QEMU's process id: its memory is read from that process (Linux). */
  liveMemory?: { qmp: () => Promise<QmpExecutor>; qemuPid: number };
  /** Writes a guest memory dump to the given file (e.g. dumpGuestMemory with the VM's QMP socket); where liveMemory cannot be read. */
  dumpMemory?: (file: string) => Promise<void>;
  /** Folder for the temporary memory dump (the sandbox folder); deleted after the scan. */
  workDir: string;
  /** The VM's serial console log. */
  serialLog?: string;
  /** The host's logs of the task's terminal sessions (stages, sandbox shells). */
  stageLogs?: string[];
  /** The task's quarantine folder (returned bundle and the repository it was indexed into). */
  returnedWork?: string;
  /** Extra files to scan (tests, exported bundles). */
  files?: string[];
}

export class LeakChecker {
  constructor(private readonly deps: { secrets: SecretSource; limits?: Partial<ScanLimits & ReturnedWorkLimits> }) {}

  async check(opts: {
    sandboxId: string;
    credentials: Array<{ id: string; basicUsernames?: string[] }>;
    sources: LeakCheckSources;
  }): Promise<LeakReport> {
    const started = Date.now();
    const needles: LeakNeedle[] = [];
    const scanned: LeakReport['scanned'] = [];
    for (const c of opts.credentials) {
      try {
        needles.push(...needlesFor(c.id, await this.deps.secrets.reveal(c.id), { basicUsernames: c.basicUsernames }));
      } catch (err) {
        scanned.push({ source: `credential ${c.id}`, bytes: 0, error: `cannot read the value to look for: ${(err as Error).message}` });
      }
    }
    const src = opts.sources;
    const hits: LeakHit[] = [];
    const record = (source: LeakHit['source'], label: string, r: SourceScan & { note?: string }) => {
      const { hits: found, ...rest } = r;
      scanned.push({ source: label, ...rest });
      hits.push(...found.map((h) => ({ ...h, source })));
    };
    const scan = async (source: LeakHit['source'], label: string, run: () => Promise<SourceScan & { note?: string }>) => {
      try {
        record(source, label, await run());
      } catch (err) {
        scanned.push({ source: label, bytes: 0, error: (err as Error).message });
      }
    };
    const limits = this.deps.limits ?? {};
    if (needles.length) {
      if (src.overlayPath) await scan('overlay', 'disk overlay', () => scanFile(src.overlayPath!, needles, limits));
      for (const disk of src.moreDisks ?? []) await scan('overlay', `disk overlay ${path.basename(disk)}`, () => scanFile(disk, needles, limits));
      let liveUnavailable: string | undefined;
      if (src.liveMemory) {
        const live = src.liveMemory;
        const opened = await live
          .qmp()
          .then((qmp) => openGuestRam(qmp, live.qemuPid))
          .catch((err: Error) => ({ unavailable: err.message }));
        if ('ram' in opened) {
          const ram = opened.ram;
          // Pages are in ram0's order: a value split across two of them is looked for at page edges too.
          await scan('memory', 'guest memory', async () => {
            const scanned = await scanReader(ram.read, needles, limits, { pageMap: ram.pageMap }).then(
              (result) => ({ result }),
              (err: Error) => ({ failed: err.message }),
            );
            // The VM resumes whatever the scan did; a failed resume is this source's error too.
            const resumeFailed = await ram.close().then(
              () => undefined,
              (err: Error) => err.message,
            );
            if ('failed' in scanned) throw new Error(resumeFailed ? `${scanned.failed}; ${resumeFailed}` : scanned.failed);
            return resumeFailed ? { ...scanned.result, error: resumeFailed } : scanned.result;
          });
        } else liveUnavailable = opened.unavailable;
      }
      if (src.dumpMemory && (!src.liveMemory || liveUnavailable)) {
        const dumpFile = path.join(src.workDir, `memory-${Date.now()}.dump`);
        try {
          await src.dumpMemory(dumpFile);
          await stat(dumpFile);
          // Physical pages: a value split across two of them is looked for at page edges too.
          // A dump that is not ELF has no page map: the contiguous scan still runs, and the note says what was not looked for.
          const pages = await elfPageMap(dumpFile).catch(() => null);
          const notes = [liveUnavailable && `dumped through QMP: ${liveUnavailable}`, pages ? undefined : 'not an ELF dump: values split across pages not looked for'].filter(Boolean);
          await scan('memory', 'guest memory', async () => ({
            ...(await scanFile(dumpFile, needles, limits, pages ?? undefined)),
            ...(notes.length ? { note: notes.join('; ') } : {}),
          }));
        } catch (err) {
          scanned.push({ source: 'guest memory', bytes: 0, error: `memory dump failed: ${(err as Error).message}` });
        } finally {
          await rm(dumpFile, { force: true });
        }
      } else if (liveUnavailable) scanned.push({ source: 'guest memory', bytes: 0, error: `not scanned: ${liveUnavailable}, and no dump was offered` });
      if (src.remote) {
        const remote = src.remote;
        try {
          for (const r of await remote.scan(needles)) record(r.source, r.label, r.scan);
        } catch (err) {
          scanned.push({ source: 'sandbox host', bytes: 0, error: `the scan on the sandbox host failed: ${(err as Error).message}` });
        }
      }
      if (src.serialLog) {
        const file = src.serialLog;
        await scan('serial-log', 'serial log', async () =>
          (await statIfPresent(file)) ? scanFile(file, needles, limits) : { bytes: 0, hits: [], note: 'no serial log' },
        );
      }
      if (src.stageLogs) {
        const logs = src.stageLogs;
        await scan('stage-log', 'stage logs', async () => {
          const all: SourceScan = { bytes: 0, hits: [] };
          const errors: string[] = [];
          for (const f of logs) {
            const r = await scanFile(f, needles, limits);
            all.bytes += r.bytes;
            all.hits.push(...r.hits.map((h) => ({ ...h, detail: `${path.basename(f)}${h.detail ? `, ${h.detail}` : ''}` })));
            if (r.error) errors.push(`${path.basename(f)}: ${r.error}`);
          }
          return { ...all, ...(errors.length ? { error: errors.join('; ') } : {}), ...(logs.length ? {} : { note: 'no terminal logs kept for this task' }) };
        });
      }
      if (src.returnedWork) await scan('returned-work', 'returned work', () => scanReturnedWork(src.returnedWork!, needles, limits));
      for (const f of src.files ?? []) await scan('file', path.basename(f), () => scanFile(f, needles, limits));
    }
    const anySource = src.remote || src.overlayPath || src.liveMemory || src.dumpMemory || src.serialLog || src.stageLogs || src.returnedWork || (src.files ?? []).length;
    const incomplete = !anySource || scanned.some((s) => s.error);
    return {
      sandboxId: opts.sandboxId,
      at: new Date(started).toISOString(),
      verdict: hits.length ? 'leak' : incomplete ? 'incomplete' : 'clean',
      scanned,
      credentialIds: opts.credentials.map((c) => c.id),
      hits,
      durationMs: Date.now() - started,
    };
  }
}
