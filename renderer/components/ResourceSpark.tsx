// A running sandbox's CPU and memory over the last minutes, small: two sparklines
// and the current value as text ("CPU 43% · 612 MiB"). The samples come from the
// host (its QEMU process), never from inside the guest.
import { useEffect } from 'react';
import type { SandboxSample, SandboxStats } from '../../common/sandbox-stats.js';
import { useController, useFactory } from '../state/context.js';
import { formatBytes, formatPercent } from './format.js';
import './look.css';

const WIDTH = 120;
const HEIGHT = 24;

/** SVG points for values scaled into the box (the newest at the right edge); empty for fewer than two. */
export function sparkPoints(values: number[], max: number, width = WIDTH, height = HEIGHT): string {
  if (values.length < 2) return '';
  const top = max > 0 ? max : 1;
  const step = width / (values.length - 1);
  return values
    .map((v, i) => {
      const y = height - (Math.min(Math.max(v, 0), top) / top) * (height - 2) - 1;
      return `${(i * step).toFixed(1)},${y.toFixed(1)}`;
    })
    .join(' ');
}

function minutes(samples: SandboxSample[]): string {
  if (samples.length < 2) return 'since it started';
  const ms = samples.at(-1)!.at - samples[0]!.at;
  const m = Math.round(ms / 60_000);
  return m < 1 ? `over the last ${Math.max(1, Math.round(ms / 1000))} s` : `over the last ${m} min`;
}

/** Loads the samples so far for a task whose view opens while its sandbox runs, then follows events. */
export function ResourceSpark({ taskId, running }: { taskId: string; running: boolean }) {
  const controller = useController();
  const stats = useFactory((s) => s.stats[taskId]);
  useEffect(() => {
    if (running) void controller.loadStats(taskId);
  }, [controller, taskId, running]);
  return <ResourceSparkView stats={stats} running={running} />;
}

export function ResourceSparkView({ stats, running }: { stats: SandboxStats | undefined; running: boolean }) {
  const samples = stats?.samples ?? [];
  const now = samples.at(-1);
  if (!now) {
    // Only a host that is measuring this sandbox says so (one without /proc, or an older one, does not).
    return running && stats?.live ? (
      <p className="resource-spark muted" data-testid="resource-spark" data-state="waiting">
        CPU and memory: measuring…
      </p>
    ) : null;
  }
  const cpu = samples.map((s) => s.cpuPercent);
  const mem = samples.map((s) => s.pssBytes);
  // CPU is scaled to at least one core; memory to the guest's size when known (the most it can take), else the peak.
  const cpuMax = Math.max(100, ...cpu);
  const memMax = Math.max(stats?.guestMemoryBytes ?? 0, ...mem);
  const peakCpu = Math.max(...cpu);
  const peakMem = Math.max(...mem);
  const span = minutes(samples);
  const of = stats?.guestMemoryBytes ? ` of a ${formatBytes(stats.guestMemoryBytes)} guest` : '';
  const stopped = !running || stats?.live === false;
  return (
    <div className="resource-spark" data-testid="resource-spark" data-state={stopped ? 'stopped' : 'live'}>
      <span className="resource-now" data-testid="resource-now" title={`CPU as a share of one host core; memory is what QEMU holds on the host (PSS)${of}`}>
        {stopped ? 'last: ' : ''}CPU {formatPercent(now.cpuPercent)} · {formatBytes(now.pssBytes)}
      </span>
      <svg
        className="spark spark-cpu"
        data-testid="spark-cpu"
        role="img"
        aria-label={`CPU ${span}: now ${formatPercent(now.cpuPercent)}, peak ${formatPercent(peakCpu)} of one core`}
        width={WIDTH}
        height={HEIGHT}
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      >
        <polyline points={sparkPoints(cpu, cpuMax)} />
      </svg>
      <svg
        className="spark spark-mem"
        data-testid="spark-mem"
        role="img"
        aria-label={`Memory ${span}: now ${formatBytes(now.pssBytes)}, peak ${formatBytes(peakMem)}${of}`}
        width={WIDTH}
        height={HEIGHT}
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      >
        <polyline points={sparkPoints(mem, memMax)} />
      </svg>
    </div>
  );
}
