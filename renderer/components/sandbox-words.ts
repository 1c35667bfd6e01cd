// How the card and the task view name a sandbox's state: "sandbox running",
// "sandbox destroyed", or, for one kept after the decision, until when; and
// where it runs when that is a sandbox host ("sandbox running on kvm-box").
import type { SandboxInfo } from '../../common/domain.js';

/** HH:MM in local time (24 h), as the card shows a deadline at most a day ahead. */
export function clockTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '?';
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
}

export function sandboxWords(s: SandboxInfo): string {
  const where = s.host ? ` on ${s.host}` : '';
  if (s.keptUntil && s.status === 'running') return `sandbox${where} kept until ${clockTime(s.keptUntil)}`;
  return `sandbox ${s.status}${where}`;
}

/** The full local date and time of a kept sandbox's deadline (a tooltip), or undefined. */
export function keptUntilTitle(s: SandboxInfo): string | undefined {
  if (!s.keptUntil || s.status !== 'running') return undefined;
  const d = new Date(s.keptUntil);
  return Number.isNaN(d.getTime()) ? undefined : `destroyed at ${d.toLocaleString()} (setting keepSandboxAfterDecisionMinutes)`;
}
