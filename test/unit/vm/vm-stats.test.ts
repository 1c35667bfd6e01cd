// The sandbox sampler against real processes: a busy `node` loop stands in for a
// QEMU that works (no QEMU is needed to read /proc), an idle one for a QEMU that
// waits. Hostile process names and reused pids are checked with real /proc text.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { SandboxSample } from '../../../common/sandbox-stats.js';
import { SandboxStatsMonitor } from '../../../main/tasks/sandbox-stats.js';
import {
  clockTicks,
  cpuPercent,
  guestMemoryFromCmdline,
  parseProcStat,
  parseSmapsRollup,
  readGuestMemory,
  readProcessCounters,
} from '../../../main/vm/vm-stats.js';

const MiB = 2 ** 20;
const children: ChildProcess[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A child `node` running `code`, with `-m 768` on its command line as a QEMU would have. */
function child(code: string): ChildProcess {
  const c = spawn(process.execPath, ['-e', code, '--', '-m', '768'], { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(c);
  return c;
}

/** Resolves once the child printed "ready": it has done its set-up (a fixed pause raced a slow start). */
function ready(c: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    c.stdout!.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes('ready')) resolve();
    });
    c.once('exit', (code) => reject(new Error(`the child exited (${code}) before it was ready`)));
  });
}

afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

describe('sampling a process from /proc', () => {
  it('a busy process shows CPU above zero and memory in a plausible range', async () => {
    const busy = child('const a = new Array(4e6).fill(1); process.stdout.write("ready\\n"); for (;;) a[0]++');
    await ready(busy);
    const first = await readProcessCounters(busy.pid!);
    await sleep(1000);
    const second = await readProcessCounters(busy.pid!);
    expect(first && second).toBeTruthy();
    const cpu = cpuPercent(first!, second!, await clockTicks())!;
    // One spinning thread: above zero even on a machine other work shares, at most a few cores.
    expect(cpu).toBeGreaterThan(5);
    expect(cpu).toBeLessThan(400);
    // A node process with a 4-million-element array: tens of MiB, not bytes, not gigabytes.
    expect(second!.rssBytes).toBeGreaterThan(20 * MiB);
    expect(second!.rssBytes).toBeLessThan(1024 * MiB);
    expect(second!.pssBytes).toBeGreaterThan(5 * MiB);
    expect(second!.pssBytes).toBeLessThanOrEqual(second!.rssBytes);
    expect(await readGuestMemory(busy.pid!)).toBe(768 * MiB);
  });

  it('an idle process uses far less CPU than a busy one', async () => {
    const idle = child('setInterval(() => {}, 10_000); process.stdout.write("ready\\n")');
    const busy = child('process.stdout.write("ready\\n"); for (;;) {}');
    await Promise.all([ready(idle), ready(busy)]); // past node's own start-up
    const [i1, b1] = await Promise.all([readProcessCounters(idle.pid!), readProcessCounters(busy.pid!)]);
    await sleep(1000);
    const [i2, b2] = await Promise.all([readProcessCounters(idle.pid!), readProcessCounters(busy.pid!)]);
    const hz = await clockTicks();
    const idleCpu = cpuPercent(i1!, i2!, hz)!;
    const busyCpu = cpuPercent(b1!, b2!, hz)!;
    expect(idleCpu).toBeLessThan(5);
    expect(busyCpu).toBeGreaterThan(idleCpu + 5);
  });

  it('a process that is gone reads as undefined, not as an error', async () => {
    const c = child('setTimeout(() => {}, 60_000)');
    const pid = c.pid!;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
    expect(await readProcessCounters(pid)).toBeUndefined();
    expect(await readProcessCounters(-1)).toBeUndefined();
  });

  it('a process that has exited but is not yet reaped (a zombie) reads as gone, not as 0 bytes', async () => {
    // sh starts a child that outlives it and execs into a sleep that never reaps it. The child
    // must still run when sh execs: a shell may reap a child that already exited (dash does),
    // so `sleep 0 &` left no zombie on a busy machine.
    const c = spawn('sh', ['-c', 'sleep 1 & echo $!; exec sleep 8'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(c);
    const pid = Number((await new Promise<string>((r) => c.stdout!.once('data', (d: Buffer) => r(d.toString())))).trim());
    const zombie = async () => (await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')).includes(') Z ');
    for (let i = 0; i < 300 && !(await zombie()); i++) await sleep(20);
    expect(await zombie()).toBe(true);
    expect(await readProcessCounters(pid)).toBeUndefined();
  });

  it('a process named to look like more fields is read from after its last parenthesis', () => {
    const real = readFileSync('/proc/self/stat', 'utf8');
    const plain = parseProcStat(real);
    // A process may call itself anything (prctl, exec): spaces and parentheses included.
    const hostile = real.replace(/\(.*\)/s, '(x) R 1 2 3 4 5 6 7 8 9 10 11 99999 99999 (y)');
    expect(parseProcStat(hostile)).toEqual(plain);
    expect(() => parseProcStat('1234 qemu R 1')).toThrow(/no command name/);
    expect(() => parseProcStat('1 (q) R 1 2 3 4 5 6 7 8 9 10 -5 0')).toThrow(/field 14/);
  });

  it('reads Rss and Pss from smaps_rollup', () => {
    const text = '00400000-7ffd [rollup]\nRss:              812340 kB\nPss:              640001 kB\nPss_Anon:  1 kB\n';
    expect(parseSmapsRollup(text)).toEqual({ rssBytes: 812340 * 1024, pssBytes: 640001 * 1024 });
    expect(parseSmapsRollup('')).toEqual({});
  });

  it('reads the guest size from every form of -m QEMU takes', () => {
    const line = (...a: string[]) => ['qemu-system-x86_64', '-name', 'factory-t1', ...a].join('\0');
    expect(guestMemoryFromCmdline(line('-m', '1024'))).toBe(1024 * MiB);
    expect(guestMemoryFromCmdline(line('-m', '2G'))).toBe(2048 * MiB);
    expect(guestMemoryFromCmdline(line('-m', 'size=512M,slots=2,maxmem=4G'))).toBe(512 * MiB);
    expect(guestMemoryFromCmdline(line('-smp', '2'))).toBeUndefined();
    expect(guestMemoryFromCmdline(line('-m'))).toBeUndefined();
    expect(guestMemoryFromCmdline(line('-m', 'lots'))).toBeUndefined();
  });

  it('gives no CPU figure for two readings of different processes under one pid', () => {
    const a = { pid: 7, at: 0, startTicks: 100, cpuTicks: 10, rssBytes: 1, pssBytes: 1 };
    expect(cpuPercent(a, { ...a, at: 1000, cpuTicks: 60 }, 100)).toBe(50);
    expect(cpuPercent(a, { ...a, at: 1000, cpuTicks: 60, startTicks: 101 }, 100)).toBeUndefined();
    expect(cpuPercent(a, { ...a, at: 0, cpuTicks: 60 }, 100)).toBeUndefined();
  });
});

describe('the sandbox stats monitor', () => {
  it('samples a running process live, keeps a bounded history and stops when the process ends', async () => {
    const busy = child('for (;;) {}');
    const seen: SandboxSample[] = [];
    const monitor = new SandboxStatsMonitor({ pidOf: () => busy.pid, onSample: (_t, s) => seen.push(s), intervalMs: 150, capacity: 4 });
    try {
      monitor.watch('task-1');
      await expect.poll(() => seen.length, { timeout: 15_000 }).toBeGreaterThanOrEqual(6);
      const stats = monitor.stats('task-1');
      expect(stats.live).toBe(true);
      expect(stats.guestMemoryBytes).toBe(768 * MiB);
      // Only the newest four are kept, oldest first.
      expect(stats.samples).toEqual(seen.slice(-4));
      expect(seen.some((s) => s.cpuPercent > 5)).toBe(true);
      expect(seen.every((s) => s.pssBytes > MiB && s.rssBytes >= s.pssBytes)).toBe(true);

      const exited = new Promise((r) => busy.once('exit', r));
      busy.kill('SIGKILL');
      await exited;
      await expect.poll(() => monitor.stats('task-1').live, { timeout: 15_000 }).toBe(false);
      const count = seen.length;
      await sleep(500);
      expect(seen.length).toBe(count);
      // What was kept stays for the finished task, until it is forgotten.
      expect(monitor.stats('task-1').samples).toHaveLength(4);
      monitor.forget('task-1');
      expect(monitor.stats('task-1').samples).toEqual([]);
    } finally {
      monitor.dispose();
    }
  });

  it('stops at once when the pid comes back as another process', async () => {
    let start = 100;
    let ticks = 0;
    const seen: SandboxSample[] = [];
    let at = 0;
    const monitor = new SandboxStatsMonitor({
      pidOf: () => 4242,
      onSample: (_t, s) => seen.push(s),
      intervalMs: 60_000,
      read: async (pid) => ({ pid, at: (at += 1000), startTicks: start, cpuTicks: (ticks += 50), rssBytes: 10 * MiB, pssBytes: 8 * MiB }),
      guestMemory: async () => undefined,
      ticksPerSecond: async () => 100,
    });
    try {
      monitor.watch('t');
      await monitor.tick();
      await monitor.tick();
      expect(seen.map((s) => s.cpuPercent)).toEqual([50]);
      start = 999; // QEMU ended and the kernel gave its pid to something else
      await monitor.tick();
      expect(seen).toHaveLength(1);
      expect(monitor.stats('t').live).toBe(false);
      await monitor.tick();
      expect(seen).toHaveLength(1);
    } finally {
      monitor.dispose();
    }
  });

  it('samples nothing while the sandbox has no QEMU yet, and stops on request', async () => {
    let pid: number | undefined;
    const seen: SandboxSample[] = [];
    const sizes: Array<number | undefined> = [];
    let ticks = 0;
    let at = 0;
    const monitor = new SandboxStatsMonitor({
      pidOf: () => pid,
      onSample: (_t, s, size) => {
        seen.push(s);
        sizes.push(size);
      },
      intervalMs: 60_000,
      read: async (p) => ({ pid: p, at: (at += 2000), startTicks: 1, cpuTicks: (ticks += 20), rssBytes: 4 * MiB, pssBytes: 3 * MiB }),
      guestMemory: async () => 1024 * MiB,
      ticksPerSecond: async () => 100,
    });
    try {
      monitor.watch('t');
      await monitor.tick();
      expect(seen).toEqual([]);
      pid = 10;
      await monitor.tick();
      await monitor.tick();
      expect(seen).toEqual([{ at: 4000, cpuPercent: 10, pssBytes: 3 * MiB, rssBytes: 4 * MiB }]);
      expect(monitor.stats('t').guestMemoryBytes).toBe(1024 * MiB);
      expect(sizes).toEqual([1024 * MiB]);
      monitor.stop('t');
      await monitor.tick();
      expect(seen).toHaveLength(1);
      expect(monitor.stats('t').live).toBe(false);
    } finally {
      monitor.dispose();
    }
  });

  it('a reading still under way when the sandbox stops adds no sample', async () => {
    // The app stops sampling when it announces the sandbox gone; a reading of /proc
    // begun just before must not add a sample the view would draw after that.
    const seen: SandboxSample[] = [];
    let ticks = 0;
    let at = 0;
    let holding = false;
    let release: (() => void) | undefined;
    const monitor = new SandboxStatsMonitor({
      pidOf: () => 10,
      onSample: (_t, s) => seen.push(s),
      intervalMs: 60_000,
      read: async (p) => {
        if (holding) await new Promise<void>((r) => (release = r));
        return { pid: p, at: (at += 2000), startTicks: 1, cpuTicks: (ticks += 20), rssBytes: 4 * MiB, pssBytes: 3 * MiB };
      },
      guestMemory: async () => undefined,
      ticksPerSecond: async () => 100,
    });
    /** Starts a round whose reading waits; gives the round once the reading is under way. */
    const heldRound = async (): Promise<{ done: Promise<void> }> => {
      holding = true;
      release = undefined;
      const round = monitor.tick();
      await expect.poll(() => release).toBeDefined();
      holding = false;
      return { done: round };
    };
    try {
      monitor.watch('t');
      await monitor.tick();
      await monitor.tick();
      expect(seen).toHaveLength(1);
      let round = await heldRound();
      monitor.stop('t');
      release!();
      await round.done;
      expect(seen).toHaveLength(1);
      expect(monitor.stats('t').samples).toHaveLength(1);
      // A retry gives the task a new sandbox while a reading of the old one is under way: nothing of the old one is added.
      monitor.watch('t');
      await monitor.tick();
      round = await heldRound();
      monitor.stop('t');
      monitor.watch('t');
      release!();
      await round.done;
      expect(seen).toHaveLength(1);
      expect(monitor.stats('t')).toMatchObject({ live: true, samples: [seen[0]] });
    } finally {
      monitor.dispose();
    }
  });
});
