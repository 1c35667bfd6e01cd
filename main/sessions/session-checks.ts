// The record of a Claude Code session's leak checks, kept with its task so the
// board shows a verdict per turn: what each check scanned, what it could not
// scan in full, and what it found (by credential name and place, never the
// value). Bounded: the newest SESSION_CHECKS_KEPT checks, a few findings and
// limits each, their texts cut short (they come from scans of untrusted guests).
import type { LeakReport } from '../../common/credentials.js';
import type { InteractiveAgent } from '../../common/agent-session.js';
import { SESSION_CHECKS_KEPT, type HookSession, type SessionCheck } from '../../common/domain.js';

/** Findings and limited sources kept per check; the count says how many there were. */
const FINDINGS_KEPT = 20;
const LIMITS_KEPT = 10;
const TEXT_MAX = 300;

export type CheckHook = SessionCheck['hook'];

function cut(text: string, max = TEXT_MAX): string {
  const flat = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** A completed check, as the card shows it. */
export function checkFromReport(report: LeakReport, at: { hook: CheckHook; turn: number }): SessionCheck {
  const limited = report.scanned
    .filter((s) => s.error || (s.notInflatedCount ?? s.notInflated?.length ?? 0) > 0)
    .map((s) => ({ source: cut(s.source, 64), reason: cut(s.error ?? `${s.notInflatedCount ?? s.notInflated?.length} compressed streams not inflated (${s.notInflated?.[0]?.reason ?? 'a cap'})`) }));
  return {
    turn: at.turn,
    hook: at.hook,
    at: report.at || new Date().toISOString(),
    verdict: report.verdict,
    durationMs: report.durationMs,
    scanned: {
      sources: report.scanned.length,
      bytes: report.scanned.reduce((n, s) => n + (Number.isFinite(s.bytes) ? s.bytes : 0), 0),
      limited: limited.slice(0, LIMITS_KEPT),
    },
    findings: report.hits.slice(0, FINDINGS_KEPT).map((h) => ({ credentialId: cut(h.credentialId, 128), source: h.source, encoding: cut(h.encoding, 64) })),
    findingCount: report.hits.length,
  };
}

/** A check that could not finish (it threw): the hook blocked and the sandbox is kept. */
export function checkFromError(err: unknown, at: { hook: CheckHook; turn: number }): SessionCheck {
  return {
    turn: at.turn,
    hook: at.hook,
    at: new Date().toISOString(),
    verdict: 'error',
    scanned: { sources: 0, bytes: 0, limited: [] },
    findings: [],
    findingCount: 0,
    error: cut(err instanceof Error ? err.message : String(err)),
  };
}

/** A session's record with one more check; a Stop counts a turn. The oldest checks past the bound are dropped. */
export function withCheck(session: HookSession, check: SessionCheck): HookSession {
  const checks = [...session.checks, check];
  return {
    ...session,
    turns: check.hook === 'Stop' ? Math.max(session.turns, check.turn) : session.turns,
    checks: checks.slice(Math.max(0, checks.length - SESSION_CHECKS_KEPT)),
  };
}

/** The record a session's task starts with (a subagent's names its session's task and the agent). */
export function newHookSession(sessionId: string, subagent?: HookSession['subagent'], agent?: InteractiveAgent): HookSession {
  return { sessionId, turns: 0, checks: [], ...(agent === 'codex' ? { agent } : {}), ...(subagent ? { subagent } : {}) };
}
