// UI state: metadata only. Terminal bytes never pass through here (they go
// straight from the bridge to the terminal views).
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { FactoryEvent, SettingsView } from '../../common/contract.js';
import type { AuditEntry, CredentialRef, LeakReport } from '../../common/credentials.js';
import type { ErrorInfo, PullbackReview, SystemStatus, Task, TerminalInfo } from '../../common/domain.js';
import type { LayerInfo } from '../../common/environment.js';
import type { ReviewFileDetail } from '../../common/review.js';
import { SANDBOX_SAMPLE_INTERVAL_MS, SANDBOX_SAMPLES_KEPT, type SandboxStats } from '../../common/sandbox-stats.js';

export type Connection = 'connecting' | 'open' | 'closed';

/** One file of a review, asked for on its own (its patch, its leading bytes). */
export type ReviewFileState = { state: 'loading' } | { state: 'loaded'; detail: ReviewFileDetail } | { state: 'failed'; error: ErrorInfo };

export interface FactoryState {
  connection: Connection;
  status?: SystemStatus;
  statusError?: ErrorInfo;
  tasks: Record<string, Task>;
  selectedTaskId?: string;
  terminals: Record<string, TerminalInfo>;
  /** The terminal tab shown per task (session id). */
  activeTab: Record<string, string | undefined>;
  reviews: Record<string, PullbackReview | undefined>;
  /** Per task, the files asked for one at a time, by stored path. */
  reviewFiles: Record<string, Record<string, ReviewFileState> | undefined>;
  /** Last failed action per task (approve, destroy, ...), shown next to it. */
  actionErrors: Record<string, ErrorInfo | undefined>;
  /** Per-task action in flight, so buttons can disable themselves. */
  busy: Record<string, string | undefined>;
  /** References only: credential values never reach the renderer. */
  credentials?: CredentialRef[];
  /** The proxy's audit log per sandbox (task id), newest last, capped. */
  audit: Record<string, AuditEntry[] | undefined>;
  leakReports: Record<string, LeakReport | null | undefined>;
  view: View;
  /** Cached environment layers (the Environments screen); absent until loaded. */
  layers?: LayerInfo[];
  /** User settings and the agents a task may choose; absent until loaded (or when the host lacks them). */
  settings?: SettingsView;
  /** CPU and memory samples of each task's sandbox (its QEMU on the host), newest last. */
  stats: Record<string, SandboxStats | undefined>;
  /** A settings change the host refused. */
  settingsError?: ErrorInfo;
  /**
   * Where keyboard focus goes once the element exists (after Start, the new
   * task's title; after a decision, its line), so focus never falls to the page
   * body when the element that had it goes away. `n` makes each request new.
   */
  focusRequest?: FocusRequest;
  /** A keyboard shortcut asked to approve or reject this task: its view asks the user to confirm first. */
  decisionAsk?: { taskId: string; kind: 'approve' | 'reject'; n: number };
  /** Bumped by the new-task shortcut: the form takes the focus. */
  formFocus?: number;
  /** The new-task form is open (Alt+N, its heading) or folded (after Start); unset: open while there is no task. */
  formOpen?: boolean;
  /** The "Keyboard shortcuts" list is open. */
  shortcutsOpen?: boolean;
}

export type View = 'tasks' | 'credentials' | 'environments' | 'settings';

export type FocusTarget = 'task-title' | 'decision' | 'sandbox-status';
export interface FocusRequest {
  target: FocusTarget;
  taskId: string;
  n: number;
  /** Scroll the task view to the top of the window first (the user asked to see this task). */
  reveal?: boolean;
}

export const MAX_AUDIT_ROWS = 500;

export type FactoryStore = StoreApi<FactoryState>;

export function createFactoryStore(): FactoryStore {
  return createStore<FactoryState>(() => ({
    connection: 'connecting',
    tasks: {},
    terminals: {},
    activeTab: {},
    reviews: {},
    reviewFiles: {},
    actionErrors: {},
    busy: {},
    audit: {},
    leakReports: {},
    stats: {},
    view: 'tasks',
  }));
}

/**
 * Newest first; a Claude Code subagent's sandbox right after its session's (the
 * board nests it there), its siblings newest first too. A task whose parents
 * loop back to it (a damaged record) heads its own group at its place by age.
 */
export function taskOrder(tasks: Record<string, Task>): Task[] {
  const newest = Object.values(tasks).sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  const parentOf = (t: Task) => {
    const p = t.session?.subagent?.parentTaskId;
    return p && p !== t.id && tasks[p] ? p : undefined;
  };
  const onCycle = (t: Task) => {
    const seen = new Set<string>();
    for (let p = parentOf(t); p && !seen.has(p); p = parentOf(tasks[p]!)) {
      if (p === t.id) return true;
      seen.add(p);
    }
    return false;
  };
  const children = new Map<string, Task[]>();
  for (const t of newest) {
    const p = parentOf(t);
    if (p) children.set(p, [...(children.get(p) ?? []), t]);
  }
  const out: Task[] = [];
  const placed = new Set<string>();
  const place = (t: Task) => {
    if (placed.has(t.id)) return;
    placed.add(t.id);
    out.push(t);
    for (const c of children.get(t.id) ?? []) place(c);
  };
  for (const t of newest) if (!parentOf(t) || onCycle(t)) place(t);
  // Whatever a damaged record left out still shows.
  for (const t of newest) place(t);
  return out;
}

export function applyEvent(store: FactoryStore, event: FactoryEvent): void {
  const s = store.getState();
  switch (event.type) {
    case 'task.updated':
      store.setState({ tasks: { ...s.tasks, [event.task.id]: event.task } });
      break;
    case 'task.removed': {
      const { [event.taskId]: _gone, ...rest } = s.tasks;
      const { [event.taskId]: _samples, ...stats } = s.stats;
      store.setState({
        tasks: rest,
        stats,
        selectedTaskId: s.selectedTaskId === event.taskId ? undefined : s.selectedTaskId,
      });
      break;
    }
    case 'image.progress':
      if (s.status) store.setState({ status: { ...s.status, image: event.status } });
      break;
    case 'pool.status':
      if (s.status) store.setState({ status: { ...s.status, pool: event.status } });
      break;
    case 'terminal.opened':
    case 'terminal.status':
      store.setState({ terminals: { ...s.terminals, [event.info.id]: event.info } });
      break;
    case 'credentials.changed':
      store.setState({ credentials: event.credentials });
      break;
    case 'audit.appended': {
      const rows = [...(s.audit[event.entry.sandboxId] ?? []), event.entry].slice(-MAX_AUDIT_ROWS);
      store.setState({ audit: { ...s.audit, [event.entry.sandboxId]: rows } });
      break;
    }
    case 'sandbox.stats': {
      const was = s.stats[event.taskId];
      const samples = [...(was?.samples ?? []), event.sample].slice(-SANDBOX_SAMPLES_KEPT);
      const size = event.guestMemoryBytes ?? was?.guestMemoryBytes;
      const next: SandboxStats = { intervalMs: SANDBOX_SAMPLE_INTERVAL_MS, ...was, taskId: event.taskId, live: true, samples, ...(size ? { guestMemoryBytes: size } : {}) };
      store.setState({ stats: { ...s.stats, [event.taskId]: next } });
      break;
    }
    case 'leakcheck.finished':
      store.setState({ leakReports: { ...s.leakReports, [event.report.sandboxId]: event.report } });
      break;
  }
}

export function toErrorInfo(err: unknown): ErrorInfo {
  if (err instanceof Error) {
    const detail = (err as { detail?: unknown }).detail;
    return { name: err.name || 'Error', message: err.message, ...(typeof detail === 'string' ? { detail } : {}) };
  }
  return { name: 'Error', message: String(err) };
}
