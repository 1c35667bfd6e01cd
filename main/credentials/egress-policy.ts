// EgressPolicy: the allow-list of one sandbox's proxy for destinations that
// get no credential (package registries). It holds the rules and the current
// pipeline step and decides one request at a time, naming why it refuses.
// The address guard (net-guard.ts) runs after it on every destination.
import { EgressRule, egressHostMatches, egressHostProblem, plainPathProblem, type EgressRefusal, type StepName } from '../../common/egress.js';
import { FactoryError } from '../../common/errors.js';
import { Listeners } from '../../common/listeners.js';
import type { AuditLog } from './audit.js';
import { rangeAllowance } from './net-guard.js';

export interface EgressRequest {
  scheme: 'http' | 'https';
  /** As the guest sent it; lowercased here. */
  host: string;
  port: number;
  method?: string;
  /** The raw request target's path (and query), exactly as sent. */
  path?: string;
}

export type EgressDecision = { allowed: true; rule: EgressRule } | { allowed: false; reason: string };

const DEFAULT_METHODS = ['GET', 'HEAD'];
const DEFAULT_PREFIXES = ['/'];

function prefixMatches(prefix: string, path: string): boolean {
  if (prefix.endsWith('/')) return path.startsWith(prefix);
  // "/debian" covers "/debian" and "/debian/...", never "/debian-evil".
  return path === prefix || path.startsWith(prefix + '/');
}

export class EgressPolicy {
  private readonly list: EgressRule[] = [];
  private current: StepName;

  constructor(rules: EgressRule[] = [], step: StepName = 'setup') {
    this.current = step;
    this.allow(rules);
  }

  get step(): StepName {
    return this.current;
  }

  setStep(step: StepName): void {
    this.current = step;
  }

  /** Adds rules (validated; a bad one throws naming the problem) for the rest of the sandbox's life. */
  allow(rules: EgressRule[]): void {
    const parsed = rules.map((r, i) => {
      const result = EgressRule.safeParse(r);
      if (!result.success) {
        const issue = result.error.issues[0];
        throw new Error(`egress rule ${i} (${JSON.stringify((r as { name?: unknown })?.name ?? '?')}) is invalid: ${issue?.path.join('.') || 'rule'}: ${issue?.message}`);
      }
      try {
        rangeAllowance(result.data.addresses);
      } catch (err) {
        throw new Error(`egress rule ${i} (${JSON.stringify(result.data.name)}) is invalid: addresses: ${(err as Error).message}`);
      }
      return result.data;
    });
    this.list.push(...parsed);
  }

  rules(): readonly EgressRule[] {
    return this.list;
  }

  decide(req: EgressRequest): EgressDecision {
    const host = req.host.toLowerCase();
    const problem = egressHostProblem(host);
    if (problem) return { allowed: false, reason: problem };
    const where = `${req.scheme}://${host}:${req.port}`;
    const forHost = this.list.filter((r) => egressHostMatches(r.host, host));
    const candidates = forHost.filter((r) => r.scheme === req.scheme && r.port === req.port);
    if (candidates.length === 0) {
      const others = forHost.map((r) => `${r.scheme} port ${r.port}`);
      const hint = others.length ? ` (rules for ${host} allow only ${[...new Set(others)].join(', ')})` : '';
      return { allowed: false, reason: `no egress rule for ${where}${hint}` };
    }
    const inStep = candidates.filter((r) => !r.steps || r.steps.includes(this.current));
    if (inStep.length === 0) {
      const r = candidates[0]!;
      return { allowed: false, reason: `rule "${r.name}" does not apply in step ${this.current} (only in ${r.steps!.join(', ')})` };
    }
    if (req.scheme === 'https') return { allowed: true, rule: inStep[0]! };

    const method = (req.method ?? 'GET').toUpperCase();
    const target = req.path ?? '/';
    const pathOnly = target.split('?', 1)[0]!;
    // Checked on the raw target, as the credentialed routes do: no dot segments or encoded separators to normalise away.
    const pathProblem = plainPathProblem(pathOnly) ?? (/[\x00-\x20\x7f-\uffff#\\]/.test(target) ? `the query of ${JSON.stringify(target.slice(0, 120))} has control characters, spaces, "#" or backslashes` : undefined);
    if (pathProblem) return { allowed: false, reason: pathProblem };
    const byMethod = inStep.filter((r) => (r.methods ?? DEFAULT_METHODS).includes(method));
    if (byMethod.length === 0) {
      const r = inStep[0]!;
      return { allowed: false, reason: `rule "${r.name}" does not allow method ${method} (only ${(r.methods ?? DEFAULT_METHODS).join(', ')})` };
    }
    const byPath = byMethod.find((r) => (r.pathPrefixes ?? DEFAULT_PREFIXES).some((p) => prefixMatches(p, pathOnly)));
    if (!byPath) {
      const r = byMethod[0]!;
      return { allowed: false, reason: `rule "${r.name}" allows only paths under ${(r.pathPrefixes ?? DEFAULT_PREFIXES).join(', ')}, not ${pathOnly.slice(0, 200)}` };
    }
    return { allowed: true, rule: byPath };
  }
}

/**
 * Refuses rules a sandbox's proxy would refuse (as InvalidInput, naming the rule
 * and the problem), so a bad rule is refused where it is saved, not at every
 * later Start.
 */
export function checkEgressRules(rules: EgressRule[]): void {
  try {
    new EgressPolicy(rules);
  } catch (err) {
    throw new FactoryError('InvalidInput', (err as Error).message);
  }
}

/** What the tunnel and the forwarder share: the policy, the sandbox, and where refusals and audit entries go. */
export interface EgressGate {
  sandboxId: string;
  policy: EgressPolicy;
  audit?: AuditLog;
  refusals: Listeners<EgressRefusal>;
}

export interface EgressOutcome {
  scheme: 'http' | 'https';
  host: string;
  port: number;
  method: string;
  path?: string;
  started: number;
  /** The step when the exchange began (a tunnel can outlive it); the current one when absent. */
  step?: StepName;
  status: number;
  bytesIn: number;
  bytesOut: number;
  /** Set when allowed. */
  rule?: string;
  /** Set when refused. */
  refused?: string;
  note?: string;
}

/** One audit entry per tunnel or forward; a refusal also goes to the onRefused listeners. */
export function recordEgress(gate: EgressGate, o: EgressOutcome): void {
  const step = o.step ?? gate.policy.step;
  gate.audit?.record({
    time: new Date(o.started).toISOString(),
    sandboxId: gate.sandboxId,
    method: o.method,
    host: o.host.slice(0, 300),
    port: o.port,
    path: (o.path ?? '').slice(0, 512),
    rule: o.refused !== undefined ? `refused: ${o.refused.slice(0, 200)}` : (o.rule ?? '(none)'),
    status: o.status,
    bytesIn: o.bytesIn,
    bytesOut: o.bytesOut,
    durationMs: Date.now() - o.started,
    step,
    ...(o.note ? { note: o.note.slice(0, 300) } : {}),
  });
  if (o.refused !== undefined) {
    gate.refusals.emit({
      time: new Date(o.started).toISOString(),
      sandboxId: gate.sandboxId,
      step,
      scheme: o.scheme,
      host: o.host.slice(0, 300),
      port: o.port,
      method: o.method,
      ...(o.path !== undefined ? { path: o.path.slice(0, 512) } : {}),
      reason: o.refused,
    });
  }
}
