// Terminal logs on disks that cannot keep up, made real: an ext4 image on a loop
// device mounted `sync` with its writes throttled by the blkio cgroup (a slow
// disk), and a 1 MiB tmpfs (a full disk). A flood through a real pty and a real
// TerminalService must keep the event loop answering (measured with
// perf_hooks.monitorEventLoopDelay), keep the queue bounded, and either land in
// the log complete (slow disk) or be reported (full disk) while the terminal
// itself loses nothing. Needs root (mount, losetup, cgroup); says so and skips
// otherwise.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TerminalDataEvent } from '../../common/contract.js';
import { spawnHostShell } from '../../main/terminal/host-shell.js';
import { DEFAULT_BATCH } from '../../main/terminal/flow-control.js';
import { TerminalService, type TerminalServiceOptions } from '../../main/terminal/terminal-service.js';

/** The blkio cgroup (v1) this process writes from, where a throttle rule applies to it. */
function blkioThrottleFile(): string | null {
  const line = fs.readFileSync('/proc/self/cgroup', 'utf8').split('\n').find((l) => /^\d+:([^:]*,)?blkio(,[^:]*)?:/.test(l));
  if (!line) return null;
  const file = path.join('/sys/fs/cgroup/blkio', line.slice(line.lastIndexOf(':') + 1), 'blkio.throttle.write_bps_device');
  return fs.existsSync(file) ? file : null;
}

function missingReason(): string | null {
  if (process.getuid?.() !== 0) return 'needs root to mount a loop device and a tmpfs';
  if (!fs.existsSync('/dev/loop-control')) return 'no loop devices here';
  if (!blkioThrottleFile()) return 'no blkio cgroup (v1) throttle to slow a disk down';
  return null;
}

const missing = missingReason();
if (missing) console.log(`terminal-log-disk skipped: ${missing}`);

const FLOOD_LINES = 300_000; // seq 1..300000 with CR LF on a pty: 2,288,895 bytes
const THROTTLE_BPS = 512 * 1024;

let work: string;
const undo: Array<() => void> = [];

beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'term-log-disk-'));
});
afterAll(() => {
  for (const u of undo.splice(0).reverse()) u();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8' }).trim();
}

/** An ext4 file system on a loop device, mounted `sync`, whose writes this process may make at `bps`. */
function slowDisk(bps: number): string {
  const img = path.join(work, 'slow.img');
  const mnt = path.join(work, 'slow');
  fs.mkdirSync(mnt);
  sh('truncate', ['-s', '64M', img]);
  sh('mkfs.ext4', ['-q', img]);
  const loop = sh('losetup', ['-f', '--show', img]);
  undo.push(() => sh('losetup', ['-d', loop]));
  sh('mount', ['-o', 'sync', loop, mnt]);
  undo.push(() => sh('umount', [mnt]));
  const rdev = fs.statSync(loop).rdev;
  const dev = `${(rdev >> 8) & 0xfff}:${(rdev & 0xff) | ((rdev >> 12) & 0xfff00)}`;
  const throttle = blkioThrottleFile()!;
  fs.writeFileSync(throttle, `${dev} ${bps}`);
  undo.push(() => fs.writeFileSync(throttle, `${dev} 0`));
  return mnt;
}

function fullDisk(): string {
  const mnt = path.join(work, 'full');
  fs.mkdirSync(mnt);
  sh('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', mnt]);
  undo.push(() => sh('umount', [mnt]));
  return mnt;
}

let services: TerminalService[] = [];
afterEach(async () => {
  await Promise.all(services.map((s) => s.dispose()));
  services = [];
});

/**
 * Runs seq through a real pty into a persisted session whose log lives in
 * `logDir`, while measuring event-loop delay, the log queue and memory.
 */
async function flood(logDir: string, options: Partial<TerminalServiceOptions>) {
  const data: Buffer[] = [];
  let recent = '';
  const warnings: string[] = [];
  const onData = (e: TerminalDataEvent) => {
    data.push(Buffer.from(e.data));
    recent = (recent + Buffer.from(e.data).toString('latin1')).slice(-32);
  };
  const svc = new TerminalService({ logDir, emit: () => {}, emitData: onData, warn: (m) => warnings.push(m), options });
  services.push(svc);
  const { source } = spawnHostShell({ cwd: work, cols: 80, rows: 24, shell: '/bin/sh', args: ['-c', `seq 1 ${FLOOD_LINES}; read _end`] });
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const started = Date.now();
  const info = svc.register({ taskId: 'disk', kind: 'stage', title: 'flood', cols: 80, rows: 24, source, persistLog: true });
  // The log's queue is the only place output could pile up on the host: sample it.
  let maxQueued = 0;
  const sampler = setInterval(() => {
    maxQueued = Math.max(maxQueued, svc.stats(info.id).logQueued);
  }, 10);
  await waitFor(() => recent.includes(`\n${FLOOD_LINES}\r\n`), 120_000);
  svc.write(info.id, '\r');
  const exit = await svc.waitForExit(info.id);
  const floodMs = Date.now() - started;
  delay.disable();
  clearInterval(sampler);
  await svc.logSettled(info.id);
  const result = {
    svc,
    id: info.id,
    exit,
    output: Buffer.concat(data),
    warnings,
    floodMs,
    loopDelayMaxMs: delay.max / 1e6,
    loopDelayP99Ms: delay.percentile(99) / 1e6,
    maxQueued,
    stats: svc.stats(info.id),
  };
  console.log(
    `terminal-log-disk ${path.basename(logDir)}: ${(result.output.length / 1e6).toFixed(2)} MB in ${floodMs} ms; ` +
      `event-loop delay max ${result.loopDelayMaxMs.toFixed(1)} ms, p99 ${result.loopDelayP99Ms.toFixed(1)} ms; ` +
      `log queue max ${maxQueued} B; source held ${result.stats.logHolds} times`,
  );
  return result;
}

function seqText(n: number): string {
  return Array.from({ length: n }, (_, i) => String(i + 1)).join('\r\n') + '\r\n';
}

const QUEUE = { high: 256 * 1024, low: 64 * 1024, hardCap: 8 * 1024 * 1024, stallMs: 30_000, maxWriteBytes: 256 * 1024 };
// Host batches of 64 KiB: the bounds below count two of them in flight when the queue holds the source.
const BATCH = { ...DEFAULT_BATCH, maxChunkBytes: 64 * 1024 };

describe.skipIf(!!missing)('terminal logs on a slow and on a full disk', () => {
  it('a slow disk paces the program instead of blocking the event loop or filling memory, and the log is complete', async () => {
    const dir = slowDisk(THROTTLE_BPS);
    const r = await flood(dir, { logQueue: QUEUE, batch: BATCH });
    // The event loop kept answering: no write of the log ran on it. (Before the
    // change every 64 KiB batch was a synchronous write here, ~125 ms each at
    // 512 KiB/s: measured p99 262 ms, max 330 ms; after it p99 25 ms, max 54 ms.)
    expect(r.loopDelayP99Ms).toBeLessThan(100);
    expect(r.loopDelayMaxMs).toBeLessThan(250);
    expect(r.exit).toEqual({ code: 0, lost: false });
    expect(r.output.toString('utf8').startsWith(seqText(FLOOD_LINES))).toBe(true);
    // The program was paced to the disk: held, and the flood took as long as the disk needed.
    expect(r.stats.logHolds).toBeGreaterThan(0);
    expect(r.floodMs).toBeGreaterThan(((r.output.length - QUEUE.high) / THROTTLE_BPS) * 1000 * 0.8);
    // Memory bounded by the queue's high watermark plus what was in flight when it paused.
    expect(r.maxQueued).toBeLessThanOrEqual(QUEUE.high + 2 * BATCH.maxChunkBytes);
    // And nothing is missing from the log.
    const logged = fs.readFileSync(path.join(dir, `${r.id}.log`));
    expect(logged.equals(r.output)).toBe(true);
    expect(r.stats).toMatchObject({ logDropped: 0, logError: null, logQueued: 0 });
    expect(r.warnings).toEqual([]);
  });

  it('a full disk is reported and the terminal loses nothing', async () => {
    const dir = fullDisk();
    const r = await flood(dir, { logQueue: QUEUE, batch: BATCH });
    expect(r.loopDelayP99Ms).toBeLessThan(100);
    expect(r.loopDelayMaxMs).toBeLessThan(250);
    expect(r.exit).toEqual({ code: 0, lost: false });
    expect(r.output.toString('utf8').startsWith(seqText(FLOOD_LINES))).toBe(true);
    expect(r.svc.tail(r.id, 40)).toMatch(/299999\n300000\n/);
    // Said, with the cause, and not once per batch.
    expect(r.warnings.join('\n')).toMatch(new RegExp(`terminal ${r.id} \\(task disk\\): terminal log: writing .*ENOSPC`));
    expect(r.warnings.length).toBeLessThanOrEqual(3);
    expect(r.stats.logError).toMatch(/ENOSPC/);
    expect(r.stats.logDropped).toBeGreaterThan(r.output.length - 1024 * 1024);
    expect(r.maxQueued).toBeLessThanOrEqual(QUEUE.high + 2 * BATCH.maxChunkBytes);
    expect(fs.statSync(path.join(dir, `${r.id}.log`)).size).toBeLessThanOrEqual(1024 * 1024);
  });
});

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
