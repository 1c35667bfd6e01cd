// The warm pool's ordering and budget logic, over a QEMU driver double
// (pool-double.ts says why): one start at a time, one task per sandbox, a
// refill after each take, the memory budget, and nothing left after dispose.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TAKEN_MARKER } from '../../../main/pool/warm-pool.js';
import { poolHarness, until, type PoolHarness } from './pool-double.js';

const harnesses: PoolHarness[] = [];
function harness(...args: Parameters<typeof poolHarness>): PoolHarness {
  const h = poolHarness(...args);
  harnesses.push(h);
  return h;
}
afterEach(async () => {
  for (const h of harnesses.splice(0)) {
    await h.pool.dispose();
    h.cleanup();
  }
});

const size = { memoryMb: 1024, cpus: 2 };

describe('the warm pool', () => {
  it('starts its sandboxes one at a time, never two at once', async () => {
    const h = harness({ warmPoolSize: 3 });
    h.driver.auto = false;
    await h.pool.start();
    for (let i = 0; i < 3; i++) {
      await until(`start ${i + 1} is under way`, () => h.driver.pending.length === 1);
      // Nothing else starts while one is under way.
      await new Promise((r) => setTimeout(r, 30));
      expect(h.driver.started).toHaveLength(i + 1);
      h.driver.release();
    }
    await until('three wait', () => h.pool.size === 3);
    expect(h.driver.maxInFlight).toBe(1);
    expect(h.pool.status()).toMatchObject({ state: 'ready', ready: 3, target: 3 });
    // Each in its own folder, with its proxy forward pointing into that folder.
    const dirs = new Set(h.driver.started.map((s) => s.dir));
    expect(dirs.size).toBe(3);
    for (const s of h.driver.started) {
      expect(path.dirname(s.dir)).toBe(h.root);
      expect(s.guestForwards).toEqual([{ guestAddress: '10.0.2.100', guestPort: 80, command: `socat - UNIX-CONNECT:${s.dir}/proxy.sock` }]);
    }
  });

  it('hands a sandbox to one task only: a second take at once gets another or none', async () => {
    const h = harness({ warmPoolSize: 1 });
    h.driver.auto = false;
    await h.pool.start();
    await until('a start is under way', () => h.driver.pending.length === 1);
    h.driver.release();
    await until('one waits', () => h.pool.size === 1);
    // Two tasks press Start in the same tick.
    const [a, b] = await Promise.all([Promise.resolve().then(() => h.pool.take('task-a', size)), Promise.resolve().then(() => h.pool.take('task-b', size))]);
    expect([a, b].filter(Boolean)).toHaveLength(1);
    const taken = (a ?? b)!;
    expect(JSON.parse(fs.readFileSync(path.join(taken.dir, TAKEN_MARKER), 'utf8'))).toEqual({ taskId: a ? 'task-a' : 'task-b' });
    // With two waiting, two takes get two different VMs.
    h.settings.warmPoolSize = 2;
    h.pool.poke();
    for (let i = 0; i < 2; i++) {
      await until('a start is under way', () => h.driver.pending.length === 1);
      h.driver.release();
    }
    await until('two wait', () => h.pool.size === 2);
    const c = h.pool.take('task-c', size);
    const d = h.pool.take('task-d', size);
    expect(c && d && c.vm !== d.vm && c.dir !== d.dir).toBe(true);
    expect([c!.vm, d!.vm]).not.toContain(taken.vm);
  });

  it('refills after a take, in a new folder, and does not stop a taken sandbox', async () => {
    const h = harness({ warmPoolSize: 1 });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const first = h.pool.take('task-a', size)!;
    expect(h.pool.size).toBe(0);
    await until('the pool refilled', () => h.pool.size === 1);
    expect(h.driver.started).toHaveLength(2);
    expect(h.driver.started[1]!.dir).not.toBe(first.dir);
    await h.pool.dispose();
    // The task owns it now: the pool's dispose stops only its own.
    expect((first.vm as unknown as { destroyed: boolean }).destroyed).toBe(false);
    expect(h.driver.vms[1]!.destroyed).toBe(true);
  });

  it('waits a moment after a take before refilling, so the task has the cores for its first shell', async () => {
    const h = harness({ warmPoolSize: 1 }, { refillDelayMs: 400 });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const taken = Date.now();
    h.pool.take('task-a', size);
    h.pool.poke(); // e.g. the task's boot pokes the pool: still no refill before the delay
    await until('the refill started', () => h.driver.started.length === 2);
    expect(Date.now() - taken).toBeGreaterThanOrEqual(380);
    expect(h.pool.status()).toMatchObject({ state: 'filling', ready: 0 });
  });

  it('gives nothing of another size, and replaces waiting ones when the sandbox size changes', async () => {
    const h = harness({ warmPoolSize: 1 });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    expect(h.pool.take('task-a', { memoryMb: 2048, cpus: 2 })).toBeUndefined();
    expect(h.pool.take('task-a', { memoryMb: 1024, cpus: 1 })).toBeUndefined();
    h.settings.vmMemoryMb = 2048;
    h.pool.poke();
    await until('the old one is stopped and a new size waits', () => h.driver.vms[0]!.destroyed && h.pool.size === 1);
    expect(h.driver.started[1]).toMatchObject({ memoryMb: 2048 });
    expect(h.pool.take('task-a', { memoryMb: 2048, cpus: 2 })).toBeDefined();
  });

  it('stops refilling when the memory budget would be exceeded, and says so', async () => {
    // Budget 3000 MiB, 1 GiB guests, a running task sandbox holding 1 GiB: one pooled fits, a second does not.
    const h = harness({ warmPoolSize: 3, warmPoolMemoryBudgetMb: 3000 });
    h.running.mb = 1024;
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    await new Promise((r) => setTimeout(r, 50));
    expect(h.driver.started).toHaveLength(1);
    expect(h.pool.status()).toMatchObject({ state: 'paused', ready: 1, target: 3, memoryUsedMb: 2048, memoryBudgetMb: 3000 });
    expect(h.pool.status().reason).toMatch(/memory budget/);
    expect(h.statuses.at(-1)).toMatchObject({ state: 'paused' });
    // The running sandbox ends: its memory is free, and one more fits (2 × 1024 ≤ 3000).
    h.running.mb = 0;
    h.pool.poke();
    await until('a second waits', () => h.pool.size === 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(h.driver.started).toHaveLength(2);
    expect(h.pool.status().state).toBe('paused');
  });

  it('is off at size 0: starts nothing, and stops what waits when turned off', async () => {
    const h = harness({ warmPoolSize: 0 });
    await h.pool.start();
    await new Promise((r) => setTimeout(r, 30));
    expect(h.driver.started).toHaveLength(0);
    expect(h.pool.status()).toMatchObject({ state: 'off', ready: 0, target: 0 });
    h.settings.warmPoolSize = 1;
    h.pool.poke();
    await until('one waits', () => h.pool.size === 1);
    h.settings.warmPoolSize = 0;
    h.pool.poke();
    expect(h.pool.size).toBe(0);
    await until('the waiting one is stopped and its folder gone', () => h.driver.vms[0]!.destroyed && !fs.existsSync(h.driver.started[0]!.dir));
  });

  it('replaces a sandbox whose QEMU ended while waiting', async () => {
    const h = harness({ warmPoolSize: 1 });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    h.driver.vms[0]!.crash();
    await until('a new one waits', () => h.driver.vms.length === 2 && h.pool.size === 1);
    expect(h.pool.take('task-a', size)!.vm).toBe(h.driver.vms[1]);
  });

  it('after a failed start says why, and tries again later', async () => {
    const h = harness({ warmPoolSize: 1 });
    h.driver.failNext = new Error('QEMU said no');
    await h.pool.start();
    await until('the failure shows', () => h.pool.status().state === 'failed');
    expect(h.pool.status().reason).toBe('QEMU said no');
    await until('the retry filled it', () => h.pool.size === 1);
    expect(h.driver.started).toHaveLength(2);
    expect(fs.existsSync(h.driver.started[0]!.dir)).toBe(false);
  });

  it('dispose stops every waiting sandbox, ends a start under way, and takes nothing after', async () => {
    const h = harness({ warmPoolSize: 2 });
    h.driver.auto = false;
    await h.pool.start();
    await until('a start is under way', () => h.driver.pending.length === 1);
    h.driver.release();
    await until('the second start is under way', () => h.driver.pending.length === 1 && h.pool.size === 1);
    const disposing = h.pool.dispose();
    // The start under way is ended by its folder (as the real reaper would kill its QEMU).
    await until('the starting folder was reaped', () => h.killed.includes(h.driver.started[1]!.dir));
    h.driver.release();
    await disposing;
    expect(h.driver.vms.every((vm) => vm.destroyed)).toBe(true);
    expect(fs.readdirSync(h.root)).toEqual([]);
    expect(h.pool.take('task-a', size)).toBeUndefined();
    expect(h.pool.status().state).toBe('off');
  });

  it('at start, deletes what a crashed run left in its folder, but leaves a taken folder to its task', async () => {
    const h = harness({ warmPoolSize: 0 });
    const left = path.join(h.root, 'pdeadbeef0001');
    const taken = path.join(h.root, 'pdeadbeef0002');
    for (const dir of [left, taken]) {
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'overlay.qcow2'), 'disk');
      fs.writeFileSync(path.join(dir, 'serial.log'), 'log');
    }
    fs.writeFileSync(path.join(taken, TAKEN_MARKER), '{"taskId":"t1"}\n');
    await h.pool.start();
    // Each folder's QEMU is looked for (and killed if it is that folder's), taken or not.
    expect(h.killed.sort()).toEqual([left, taken].sort());
    expect(fs.existsSync(left)).toBe(false);
    expect(fs.readdirSync(taken).sort()).toEqual(['overlay.qcow2', 'serial.log', TAKEN_MARKER].sort());
  });

  it('keeps a folder whose QEMU could not be looked for (no process table)', async () => {
    const h = harness({ warmPoolSize: 0 }, { killLeftovers: () => Promise.reject(new Error('no ps')) });
    const left = path.join(h.root, 'pdeadbeef0003');
    fs.mkdirSync(left);
    await h.pool.start();
    expect(fs.existsSync(left)).toBe(true);
  });

  it('puts the proxy socket in a private temp folder when the pool folder cannot carry one, and removes it', async () => {
    const h = harness({ warmPoolSize: 1 }, { socketPathFits: (p) => !p.includes('fiab-pool-test-') });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const socketDir = path.dirname(h.pool.take('task-a', size)!.socketPath);
    expect(path.basename(socketDir)).toMatch(/^fiab-pool-/);
    expect(fs.statSync(socketDir).mode & 0o777).toBe(0o700);
    await until('the refill waits', () => h.pool.size === 1);
    const other = path.dirname(h.driver.started[1]!.guestForwards![0]!.command.replace('socat - UNIX-CONNECT:', ''));
    await h.pool.dispose();
    expect(fs.existsSync(other)).toBe(false);
    // The taken one's folder is its task's to remove (the provisioner does, with its extensions).
    expect(fs.existsSync(socketDir)).toBe(true);
    fs.rmSync(socketDir, { recursive: true, force: true });
  });
});
