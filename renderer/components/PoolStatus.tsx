import { useFactory } from '../state/context.js';

/** The warm pool in the header: "Pool: 1 ready / 1", "Pool: off" or why it does not fill. */
export function PoolStatus() {
  const pool = useFactory((s) => s.status?.pool);
  if (!pool) return null;
  const text =
    pool.state === 'off'
      ? 'Pool: off'
      : pool.state === 'paused'
        ? 'Pool: paused: memory budget'
        : pool.state === 'failed'
          ? `Pool: ${pool.ready} ready / ${pool.target}, start failed`
          : `Pool: ${pool.ready} ready / ${pool.target}${pool.state === 'filling' ? ', filling' : ''}`;
  // The pill keeps its short words; the tooltip says what the pool is.
  const what = 'Sandboxes started ahead and waiting, so the next task starts in under a second';
  const tone = pool.state === 'ready' ? 'ok' : pool.state === 'failed' || pool.state === 'paused' ? 'warn' : pool.state === 'off' ? 'muted' : '';
  const title = [what, pool.reason, `guest memory ${pool.memoryUsedMb} of ${pool.memoryBudgetMb} MiB budget`].filter(Boolean).join('; ');
  return (
    <span className={`pill ${tone}`.trim()} data-testid="pool-status" data-state={pool.state} data-ready={pool.ready} data-target={pool.target} title={title}>
      {text}
    </span>
  );
}
