// Egress rules as the UI builds and reads them: a rule from a refusal (the
// narrowest that lets that request through), and whether a rule covers a refusal.
import { EgressRule, StepName, type EgressRefusal } from '../../../common/egress.js';

/**
 * The rule that lets a refused request through, no wider: its scheme, host and
 * port, in the step it was refused in; for plain http also its method and the
 * path's first segment. Undefined when the refusal cannot make a valid rule
 * (the host then decides nothing: the row says why).
 */
export function ruleFromRefusal(r: EgressRefusal): { rule: EgressRule } | { error: string } {
  const step = StepName.safeParse(r.step);
  if (!step.success) return { error: `the refusal names no known step ("${r.step}")` };
  const rule: EgressRule = {
    name: `${r.host}:${r.port}`.slice(0, 80),
    host: r.host.toLowerCase(),
    port: r.port,
    scheme: r.scheme,
    steps: [step.data],
    ...(r.scheme === 'http' ? { methods: [(r.method ?? 'GET').toUpperCase()], pathPrefixes: [firstSegmentPrefix(r.path)] } : {}),
  };
  const parsed = EgressRule.safeParse(rule);
  if (!parsed.success) return { error: parsed.error.issues.map((i) => `${i.path.join('.') || 'rule'}: ${i.message}`).join('; ') };
  return { rule: parsed.data };
}

/** "/debian/pool/x.deb" → "/debian/"; "/file" → "/file"; "" or "/" → "/". The query never counts. */
export function firstSegmentPrefix(path: string | undefined): string {
  const p = (path ?? '/').split(/[?#]/)[0]!;
  const m = /^\/([^/]+)(\/)?/.exec(p);
  if (!m) return '/';
  return m[2] ? `/${m[1]}/` : `/${m[1]}`;
}

function hostMatches(pattern: string, host: string): boolean {
  const h = host.toLowerCase();
  const p = pattern.toLowerCase();
  return p.startsWith('*.') ? h.endsWith(p.slice(1)) && h.length > p.length - 1 : h === p;
}

/** Whether `rule` lets the refused request through now (so its row reads as allowed). */
export function ruleCovers(rule: EgressRule, r: EgressRefusal): boolean {
  if (rule.scheme !== r.scheme || rule.port !== r.port || !hostMatches(rule.host, r.host)) return false;
  if (rule.steps && !rule.steps.some((s) => s === r.step)) return false;
  if (r.scheme === 'https') return true;
  const methods = (rule.methods ?? ['GET', 'HEAD']).map((m) => m.toUpperCase());
  if (!methods.includes((r.method ?? 'GET').toUpperCase())) return false;
  return (rule.pathPrefixes ?? ['/']).some((prefix) => (r.path ?? '/').startsWith(prefix));
}
