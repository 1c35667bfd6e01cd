// The pool's budget rule as a table: when one more pooled sandbox may start.
import { describe, expect, it } from 'vitest';
import { warmPoolFromEnv } from '../../../main/app.js';
import { effectiveBudgetMb, nextFill, poolStatus, type PoolCounts } from '../../../main/pool/pool-budget.js';

const base: PoolCounts = { target: 2, ready: 0, filling: false, vmMemoryMb: 1024, runningMb: 0, budgetMb: 8192 };

describe('the pool budget', () => {
  it.each([
    [{ target: 0 }, { fill: false, why: 'off' }],
    [{ ready: 2 }, { fill: false, why: 'full' }],
    [{ ready: 3 }, { fill: false, why: 'full' }],
    [{ filling: true }, { fill: false, why: 'busy' }],
    [{ runningMb: 7168 }, { fill: true }], // 7168 + 1024 = 8192: exactly the budget
    [{ runningMb: 7169 }, { fill: false, why: 'memory' }],
    [{ ready: 1, runningMb: 6145 }, { fill: false, why: 'memory' }], // 6145 + 1024 held, one more is over
    [{ budgetMb: 512 }, { fill: false, why: 'memory' }], // a guest bigger than the whole budget
    [{}, { fill: true }],
  ])('%j → %j', (patch, want) => {
    expect(nextFill({ ...base, ...patch })).toEqual(want);
  });

  it('shows paused with the figures when only the budget stops it', () => {
    const s = poolStatus({ ...base, ready: 1, runningMb: 6200 });
    expect(s).toMatchObject({ state: 'paused', ready: 1, target: 2, memoryUsedMb: 7224, memoryBudgetMb: 8192 });
    expect(s.reason).toContain('memory budget');
    expect(poolStatus({ ...base, target: 0 }).state).toBe('off');
    expect(poolStatus({ ...base, ready: 2 }).state).toBe('ready');
    expect(poolStatus({ ...base, filling: true }).state).toBe('filling');
    expect(poolStatus(base, 'QEMU failed')).toMatchObject({ state: 'failed', reason: 'QEMU failed' });
  });

  it('defaults the budget to half of the computer’s memory', () => {
    expect(effectiveBudgetMb(0, 24 * 1024 ** 3)).toBe(12 * 1024);
    expect(effectiveBudgetMb(3000, 24 * 1024 ** 3)).toBe(3000);
  });
});

describe('FACTORY_WARM_POOL', () => {
  it('turns the pool off with 0, keeps it with 1 or unset, and names a bad value', () => {
    expect(warmPoolFromEnv({})).toBe(true);
    expect(warmPoolFromEnv({ FACTORY_WARM_POOL: '1' })).toBe(true);
    expect(warmPoolFromEnv({ FACTORY_WARM_POOL: '0' })).toBe(false);
    expect(() => warmPoolFromEnv({ FACTORY_WARM_POOL: 'off' })).toThrow('FACTORY_WARM_POOL must be 0 (no warm pool) or 1, not "off"');
  });
});
