// A task's timeline: setup and the six stages as bars on one time axis (a small
// Gantt chart), the running one growing live, failed ones marked, a retry shown
// as its attempt. The list is the text alternative: each row says the step, its
// state and how long it took; the bars are decoration.
import { useEffect, useState } from 'react';
import { STAGE_NAMES, type StageStatus, type Task } from '../../common/domain.js';
import { formatDuration } from './format.js';
import { StatusIcon } from './icons.js';
import './look.css';

export interface TimelineRow {
  name: string;
  status: StageStatus;
  /** ms since the epoch; absent for a step that never started. */
  start?: number;
  end?: number;
  attempt?: number;
}

function time(iso: string | undefined): number | undefined {
  if (!iso) return undefined;
  const t = Date.parse(iso);
  return Number.isFinite(t) ? t : undefined;
}

/** The rows of a task at `now`: a running step ends now, a finished one at its end (or start + duration). */
export function timelineRows(task: Task, now: number): TimelineRow[] {
  const steps: Array<{ name: string; status: StageStatus; startedAt?: string; endedAt?: string; durationMs?: number; attempt?: number }> = [];
  if (task.setup) steps.push({ ...task.setup, name: 'setup' });
  for (const name of STAGE_NAMES) steps.push(task.stages.find((s) => s.name === name) ?? { name, status: 'pending' });
  return steps.map((s) => {
    const start = time(s.startedAt);
    let end: number | undefined;
    if (start !== undefined) {
      if (s.status === 'running') end = Math.max(start, now);
      else end = time(s.endedAt) ?? (s.durationMs !== undefined ? start + s.durationMs : undefined);
      if (end !== undefined && end < start) end = start; // a clock step back draws no negative bar
    }
    return {
      name: s.name,
      status: s.status,
      ...(start !== undefined ? { start } : {}),
      ...(end !== undefined ? { end } : {}),
      ...(s.attempt !== undefined ? { attempt: s.attempt } : {}),
    };
  });
}

/** Re-renders every `ms` while `on`, for the running step's growing bar. */
function useNow(on: boolean, ms = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!on) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [on, ms]);
  return on ? now : Date.now();
}

export function StageTimeline({ task }: { task: Task }) {
  const running = task.stages.some((s) => s.status === 'running') || task.setup?.status === 'running';
  const now = useNow(running);
  if (task.kind === 'quick') return null;
  const rows = timelineRows(task, now);
  const started = rows.filter((r) => r.start !== undefined);
  if (!started.length) return null;
  const t0 = Math.min(...started.map((r) => r.start!));
  const t1 = Math.max(...started.map((r) => r.end ?? r.start!));
  const span = Math.max(t1 - t0, 1);
  const label = `Stage timeline, ${formatDuration(t1 - t0) || '0 ms'} from the first step to the last`;
  return (
    <section className="stage-timeline" data-testid="stage-timeline" aria-label={label}>
      <h3 className="timeline-head">
        Timeline <span className="muted">{formatDuration(t1 - t0)}</span>
      </h3>
      <ol>
        {rows.map((r) => {
          const ms = r.start !== undefined && r.end !== undefined ? r.end - r.start : undefined;
          const left = r.start !== undefined ? ((r.start - t0) / span) * 100 : 0;
          const width = ms !== undefined ? Math.max((ms / span) * 100, 0.5) : 0;
          const state = r.status === 'running' ? `running for ${formatDuration(ms)}` : ms !== undefined && r.status !== 'skipped' ? `${r.status} in ${formatDuration(ms)}` : r.status;
          return (
            <li key={r.name} className={`timeline-row tl-${r.status}`} data-testid={`timeline-${r.name}`} data-status={r.status} data-ms={ms !== undefined ? Math.round(ms) : undefined}>
              <span className="tl-name">{r.name}</span>
              <span className="tl-track" aria-hidden="true">
                {r.start !== undefined ? <span className="tl-bar" data-testid={`timeline-bar-${r.name}`} style={{ left: `${left}%`, width: `${width}%` }} /> : null}
              </span>
              <span className="tl-text">
                <StatusIcon status={r.status} />{' '}
                {state}
                {r.attempt !== undefined && r.attempt > 1 ? <span className="tl-attempt"> · attempt {r.attempt}</span> : null}
              </span>
            </li>
          );
        })}
      </ol>
    </section>
  );
}
