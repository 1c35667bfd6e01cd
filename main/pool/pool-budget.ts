// Whether the warm pool may start one more sandbox now, and what the header
// says about it. Pure: the pool gives the counts, this decides.
import os from 'node:os';
import type { PoolStatus } from '../../common/domain.js';

export interface PoolCounts {
  /** warmPoolSize: how many sandboxes should wait; 0 turns the pool off. */
  target: number;
  /** Pooled sandboxes restored and waiting. */
  ready: number;
  /** A pooled sandbox being started right now (the pool starts one at a time). */
  filling: boolean;
  /** Guest memory of one pooled sandbox (vmMemoryMb). */
  vmMemoryMb: number;
  /** Guest memory of the task sandboxes that run (or boot) now. */
  runningMb: number;
  /** Guest memory pooled and running sandboxes may hold together. */
  budgetMb: number;
}

export type FillDecision = { fill: true } | { fill: false; why: 'off' | 'full' | 'busy' | 'memory' };

/** Guest memory held now: running sandboxes, waiting ones and the one being started. */
export function usedMb(c: PoolCounts): number {
  return c.runningMb + (c.ready + (c.filling ? 1 : 0)) * c.vmMemoryMb;
}

/** One more pooled sandbox only when the pool is short, idle, and its guest memory still fits the budget. */
export function nextFill(c: PoolCounts): FillDecision {
  if (c.target <= 0) return { fill: false, why: 'off' };
  if (c.ready >= c.target) return { fill: false, why: 'full' };
  if (c.filling) return { fill: false, why: 'busy' };
  if (usedMb(c) + c.vmMemoryMb > c.budgetMb) return { fill: false, why: 'memory' };
  return { fill: true };
}

/** The budget setting: 0 means half of this computer's memory. */
export function effectiveBudgetMb(settingMb: number, totalBytes: number = os.totalmem()): number {
  return settingMb > 0 ? settingMb : Math.floor(totalBytes / (2 * 1024 * 1024));
}

/** What the header shows; `failure` is the last start that failed, while the pool waits to try again. */
export function poolStatus(c: PoolCounts, failure?: string): PoolStatus {
  const memory = { memoryUsedMb: usedMb(c), memoryBudgetMb: c.budgetMb };
  const counts = { ready: c.ready, target: Math.max(c.target, 0), ...memory };
  if (c.target <= 0) return { state: 'off', ...counts };
  if (c.filling) return { state: 'filling', ...counts };
  if (c.ready >= c.target) return { state: 'ready', ...counts };
  if (failure) return { state: 'failed', reason: failure, ...counts };
  const d = nextFill(c);
  if (!d.fill && d.why === 'memory') {
    return { state: 'paused', reason: `memory budget: ${usedMb(c)} MiB of ${c.budgetMb} MiB held, one more needs ${c.vmMemoryMb} MiB`, ...counts };
  }
  return { state: 'filling', ...counts };
}
