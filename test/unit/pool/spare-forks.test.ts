// Spare forks' rules (tasks/spare-forks.ts) over the real warm pool with its
// QEMU driver double (pool-double.ts says why): a spare is made once the
// session's sandbox is idle, handed out only while nothing used the sandbox
// since its fork, ended when stale, counted in the budget, and nothing is left
// when the session ends. That a spare really is the sandbox's state, with real
// QEMU, is test/integration/subagent-spare-fork.test.ts.
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createFileLogger } from '../../../main/log/logger.js';
import type { LiveSandbox } from '../../../main/sandbox/live-sandboxes.js';
import type { SandboxSshPort } from '../../../main/sandbox/sandbox-ports.js';
import type { ForkPoint } from '../../../main/tasks/sandbox-fork.js';
import { MAX_SPARES_PER_SESSION, SpareForks } from '../../../main/tasks/spare-forks.js';
import { poolHarness, until, type PoolHarness } from './pool-double.js';

/** A connection whose commands finish at once and whose channels close when the test says. */
function fakeSsh(): SandboxSshPort & { channels: EventEmitter[] } {
  const channels: EventEmitter[] = [];
  const channel = async () => {
    const ch = new EventEmitter();
    channels.push(ch);
    return ch as never;
  };
  return {
    channels,
    exec: channel,
    shell: channel,
    run: async () => ({ code: 0, stdout: '', stderr: '' }),
    putFile: async () => {},
    getFile: async () => 0,
    close: () => {},
  };
}

interface Rig {
  spares: SpareForks;
  h: PoolHarness;
  forks: string[];
  dropped: string[];
  parent: LiveSandbox;
}

const rigs: Rig[] = [];
afterEach(async () => {
  for (const r of rigs.splice(0)) {
    await r.spares.dispose();
    await r.h.pool.dispose();
    r.h.cleanup();
  }
});

function rig(opts: { budgetMb?: number; poolSize?: number } = {}): Rig {
  // The pool itself keeps nothing waiting unless asked: the spares are what is counted here.
  const h = poolHarness({ warmPoolSize: opts.poolSize ?? 1, warmPoolMemoryBudgetMb: opts.budgetMb ?? 64 * 1024 });
  const forks: string[] = [];
  const dropped: string[] = [];
  const parent = { taskId: 'session', memoryMb: 1024, vm: {}, ssh: fakeSsh() } as unknown as LiveSandbox;
  const spares = new SpareForks({
    pool: h.pool,
    parent: (id) => (id === 'session' ? parent : undefined),
    forkPoint: async (): Promise<ForkPoint> => {
      const disk = path.join(h.root, `frozen-${forks.length + 1}.qcow2`);
      forks.push(disk);
      return { backingDisk: disk, memoryMb: 1024, dropMemory: async () => void dropped.push(disk) };
    },
    cpus: () => 2,
    log: createFileLogger({ dir: path.join(h.root, '..', 'logs') }),
    idleMs: 20,
  });
  const r = { spares, h, forks, dropped, parent };
  rigs.push(r);
  return r;
}

/** The VM of the spare made on this frozen disk (the pool's own VMs have none). */
function spareVm(r: Rig, disk: string) {
  const dir = r.h.driver.started.find((s) => s.backingDisk === disk)?.dir;
  return r.h.driver.vms.find((vm) => vm.sandboxDir === dir);
}

describe('spare forks of a session’s sandbox', () => {
  it('makes one once the sandbox is idle and hands it to one subagent, its memory file gone', async () => {
    const r = rig({ poolSize: 1 });
    r.spares.keep('session');
    await until('a spare fork is made', () => r.forks.length === 1 && r.dropped.length === 1);
    const taken = await r.spares.take('session', 'sub-1');
    expect(taken?.backingDisk).toBe(r.forks[0]);
    expect(taken?.memoryMb).toBe(1024);
    // A second subagent at once: no spare of this state is left, it gets none (a fork of its own then).
    expect(await r.spares.take('session', 'sub-2')).toBeUndefined();
    // And the session gets the next spare once idle again.
    await until('the next spare is made', () => r.forks.length === 2 && !!spareVm(r, r.forks[1]!));
    expect(spareVm(r, r.forks[0]!)?.destroyed).toBe(false);
  });

  it('never hands out a spare older than the sandbox: any use through the app makes it stale and it is ended', async () => {
    const r = rig();
    r.spares.keep('session');
    await until('a spare fork is made', () => r.forks.length === 1 && r.dropped.length === 1);
    const staleVm = spareVm(r, r.forks[0]!)!;
    // A routed command runs in the session's sandbox after the fork.
    await r.spares.track('session', r.parent.ssh!).run('touch made-after-the-fork');
    expect(await r.spares.take('session', 'sub-1')).toBeUndefined();
    expect(staleVm.destroyed).toBe(true);
  });

  it('does not hand out a spare while a shell in the sandbox is open, nor make one', async () => {
    const r = rig();
    const ssh = r.parent.ssh as ReturnType<typeof fakeSsh>;
    r.spares.keep('session');
    await until('a spare fork is made', () => r.forks.length === 1);
    await r.spares.track('session', ssh).shell({ cols: 80, rows: 24 });
    await new Promise((res) => setTimeout(res, 80));
    // The user types in the open shell: no spare can be the sandbox's state.
    expect(r.forks).toHaveLength(1);
    expect(await r.spares.take('session', 'sub-1')).toBeUndefined();
    // The shell closes: a spare of the state after it is made.
    ssh.channels[0]!.emit('close');
    await until('a spare of the new state is made', () => r.forks.length === 2);
    await until('its memory file is gone', () => r.dropped.length === 2);
    expect((await r.spares.take('session', 'sub-1'))?.backingDisk).toBe(r.forks[1]);
  });

  it('waits for a spare being made of the current state instead of forking again', async () => {
    const r = rig();
    r.h.driver.auto = false;
    r.spares.keep('session');
    await until('the spare’s VM is starting', () => r.h.driver.pending.length === 1 && r.forks.length === 1);
    const taking = r.spares.take('session', 'sub-1');
    r.h.driver.release();
    expect((await taking)?.backingDisk).toBe(r.forks[0]);
  });

  it('makes none past the memory budget, and none while the pool is off', async () => {
    const full = rig({ budgetMb: 512 });
    full.spares.keep('session');
    const off = rig({ poolSize: 0 });
    off.spares.keep('session');
    await new Promise((res) => setTimeout(res, 120));
    expect(full.forks).toHaveLength(0);
    expect(off.forks).toHaveLength(0);
    expect(await full.spares.take('session', 'sub-1')).toBeUndefined();
  });

  it(`freezes the session's disk at most ${MAX_SPARES_PER_SESSION} times`, async () => {
    const r = rig();
    r.spares.keep('session');
    for (let i = 0; i < MAX_SPARES_PER_SESSION + 3; i++) {
      await until(`spare ${Math.min(i + 1, MAX_SPARES_PER_SESSION)} is made`, () => r.forks.length >= Math.min(i + 1, MAX_SPARES_PER_SESSION) && r.dropped.length === r.forks.length);
      await r.spares.track('session', r.parent.ssh!).run('true');
    }
    await new Promise((res) => setTimeout(res, 100));
    expect(r.forks).toHaveLength(MAX_SPARES_PER_SESSION);
  });

  it('ends the spare when the session’s sandbox ends, and makes none after', async () => {
    const r = rig();
    r.spares.keep('session');
    await until('a spare fork is made', () => r.forks.length === 1 && r.dropped.length === 1);
    const vm = spareVm(r, r.forks[0]!)!;
    await r.spares.drop('session');
    expect(vm.destroyed).toBe(true);
    expect(r.spares.keeps('session')).toBe(false);
    await r.spares.track('session', r.parent.ssh!).run('true');
    await new Promise((res) => setTimeout(res, 80));
    expect(r.forks).toHaveLength(1);
  });
});
