// The app's icons, from one set (lucide): a status icon for stages, setup,
// ways and checks, and the icons of the main actions. Icons are decoration:
// hidden from assistive technology, the text or accessible name beside them
// says the same.
import { Ban, Check, CircleCheck, CircleMinus, CircleX, Circle, LoaderCircle, Play, RotateCcw, SquareTerminal, Trash2, X, Zap, type LucideIcon } from 'lucide-react';

const STATUS: Record<string, LucideIcon> = {
  pending: Circle,
  running: LoaderCircle,
  passed: CircleCheck,
  failed: CircleX,
  skipped: CircleMinus,
  cancelled: Ban,
  interrupted: Zap,
};

/** A stage's, setup's, way's or check's status as an icon (an unknown status: the pending circle). */
export function StatusIcon({ status, size = 14 }: { status: string; size?: number }) {
  const Icon = STATUS[status] ?? Circle;
  return <Icon className={`status-icon status-icon-${status}`} size={size} aria-hidden="true" focusable="false" strokeWidth={2.25} />;
}

const ACTION = { start: Play, quick: SquareTerminal, approve: Check, reject: X, retry: RotateCcw, destroy: Trash2 } satisfies Record<string, LucideIcon>;

/** The icon of one of the main actions, before its label. */
export function ActionIcon({ action }: { action: keyof typeof ACTION }) {
  const Icon = ACTION[action];
  return <Icon className="action-icon" size={15} aria-hidden="true" focusable="false" strokeWidth={2.25} />;
}
