// How a Claude Code session's leak checks and a subagent's end read on the
// board and in the task view: one line per check, what it found named (the
// credential, where, in which form; never a value), what it scanned.
import type { SessionCheck, SubagentOutcome, Task } from '../../../common/domain.js';
import { formatBytes } from '../format.js';

/** "Turn 3", "Session end (after turn 3)", "Subagent stop (turn 3)". */
export function checkLabel(c: SessionCheck): string {
  if (c.hook === 'Stop') return `Turn ${c.turn}`;
  if (c.hook === 'SessionEnd') return c.turn > 0 ? `Session end (after turn ${c.turn})` : 'Session end';
  return c.turn > 0 ? `Subagent stop (turn ${c.turn})` : 'Subagent stop';
}

/** The verdict in a few words; a check that is not clean says what it found or why it could not finish. */
export function verdictWords(c: SessionCheck): string {
  switch (c.verdict) {
    case 'clean':
      return 'clean';
    case 'leak': {
      const named = [...new Set(c.findings.map((f) => `${f.credentialId} in ${f.source} (${f.encoding})`))];
      const more = c.findingCount - c.findings.length;
      const what = named.length ? named.slice(0, 3).join(', ') + (named.length > 3 || more > 0 ? `, ${c.findingCount - Math.min(3, named.length)} more` : '') : 'a credential';
      return `leak found: ${what}`;
    }
    case 'incomplete':
      return `incomplete: not scanned in full: ${c.scanned.limited.map((l) => `${l.source} (${l.reason})`).join('; ') || 'a source'}`;
    case 'error':
      return `the check could not finish: ${c.error ?? 'an error'}`;
  }
}

/** "scanned 6 sources, 1.2 GiB" and the sources a cap cut short, or "nothing scanned". */
export function scannedWords(c: SessionCheck): string {
  if (c.verdict === 'error' && c.scanned.sources === 0) return 'nothing scanned';
  const base = `scanned ${c.scanned.sources} source${c.scanned.sources === 1 ? '' : 's'}, ${formatBytes(c.scanned.bytes)}`;
  return c.scanned.limited.length ? `${base}; caps reached: ${c.scanned.limited.map((l) => l.source).join(', ')}` : base;
}

/** Where a finished subagent's work went, or why its sandbox was kept. */
export function outcomeWords(o: SubagentOutcome): string {
  switch (o.kind) {
    case 'merged':
      return `its work is branch ${o.branch ?? '?'} in the session's sandbox (${o.commits ?? 0} commit${o.commits === 1 ? '' : 's'})`;
    case 'no-work':
      return 'it changed nothing; its sandbox is gone';
    case 'kept':
      return `sandbox kept: ${o.reason ?? 'for inspection'}`;
    case 'ended':
      return o.reason ?? 'its sandbox went with the session';
  }
}

/** A subagent's name on its card: "Explore ag1" or "ag1". */
export function subagentName(t: Task): string {
  const s = t.session?.subagent;
  if (!s) return t.title;
  return s.agentType ? `${s.agentType} ${s.agentId}` : s.agentId;
}

/** The newest check of a session's task, or undefined. */
export function lastCheck(t: Task): SessionCheck | undefined {
  return t.session?.checks.at(-1);
}
