// The tray's menu as data: a pure function of the live task list (and the clock),
// so it is tested as data and the Electron tray only turns it into a Menu. It
// lists the running sandboxes (title or "quick sandbox", where it is, for how
// long) with Open and Destroy, "Quick sandbox" (destroyed when its shell closes, or
// kept until destroyed), the recent repositories (a quick sandbox of either kind
// seeded with one), then the window and Quit.
import path from 'node:path';
import { isQuickSandbox, STAGE_NAMES, type Task } from '../../common/domain.js';

export type TrayAction =
  /** keep: the sandbox outlives its shell, until the user destroys it. */
  | { type: 'quick'; repoPath?: string; keep?: boolean }
  | { type: 'open'; taskId: string }
  | { type: 'destroy'; taskId: string }
  | { type: 'newTask' }
  | { type: 'show' }
  | { type: 'quit' };

export type TrayItem =
  | { kind: 'separator' }
  /** A line that says something and does nothing (a heading, "no running sandboxes"). */
  | { kind: 'label'; label: string }
  | { kind: 'action'; label: string; action: TrayAction }
  | { kind: 'submenu'; label: string; items: TrayItem[] };

export interface TrayInput {
  tasks: readonly Task[];
  now: Date;
  /** How many recent repositories to offer (default 5). */
  maxRecent?: number;
}

/** Longest label the menu shows; task titles are the user's text, possibly long. */
export const MAX_LABEL = 60;

export function trayMenu(input: TrayInput): TrayItem[] {
  const running = input.tasks.filter((t) => t.sandbox.status === 'booting' || t.sandbox.status === 'running');
  const items: TrayItem[] = [];
  items.push({ kind: 'label', label: running.length ? `Running sandboxes (${running.length})` : 'No running sandboxes' });
  // Newest first: the one just started is the one the user looks for.
  for (const t of [...running].sort((a, b) => b.createdAt.localeCompare(a.createdAt))) {
    items.push({
      kind: 'submenu',
      label: menuLabel(`${isQuickSandbox(t) && !t.repoPath ? 'quick sandbox' : t.title} — ${where(t)}, ${elapsed(t.createdAt, input.now)}`),
      items: [
        { kind: 'action', label: 'Open', action: { type: 'open', taskId: t.id } },
        { kind: 'action', label: 'Destroy', action: { type: 'destroy', taskId: t.id } },
      ],
    });
  }
  items.push({ kind: 'separator' });
  items.push({ kind: 'action', label: 'Quick sandbox', action: { type: 'quick' } });
  items.push({ kind: 'action', label: 'Quick sandbox (keep until destroyed)', action: { type: 'quick', keep: true } });
  const recent = recentRepos(input.tasks, input.maxRecent ?? 5);
  if (recent.length) {
    // The same two kinds as above, each seeded with one of the recent repositories.
    for (const keep of [false, true]) {
      items.push({
        kind: 'submenu',
        label: keep ? 'Quick sandbox with a repository (keep until destroyed)' : 'Quick sandbox with a repository',
        items: recent.map((repoPath) => ({ kind: 'action' as const, label: menuLabel(shortPath(repoPath)), action: { type: 'quick' as const, repoPath, ...(keep ? { keep } : {}) } })),
      });
    }
  }
  items.push({ kind: 'action', label: 'New task…', action: { type: 'newTask' } });
  items.push({ kind: 'separator' });
  items.push({ kind: 'action', label: 'Show window', action: { type: 'show' } });
  items.push({ kind: 'action', label: 'Quit', action: { type: 'quit' } });
  return items;
}

/** The repositories of the newest tasks, newest first, each once; quick sandboxes without one add none. */
export function recentRepos(tasks: readonly Task[], max: number): string[] {
  const out: string[] = [];
  for (const t of [...tasks].sort((a, b) => b.createdAt.localeCompare(a.createdAt))) {
    if (t.repoPath && !out.includes(t.repoPath)) out.push(t.repoPath);
    if (out.length >= max) break;
  }
  return out;
}

/** Where a running sandbox is: its running stage or setup, else its phase ("shell", or "kept", for a quick sandbox that runs). */
function where(t: Task): string {
  if (isQuickSandbox(t)) return t.phase === 'running' && t.sandbox.status === 'running' ? (t.keep ? 'kept' : 'shell') : t.sandbox.status === 'booting' ? 'booting' : t.phase;
  if (t.setup?.status === 'running') return 'setup';
  const stage = t.stages.find((s) => s.status === 'running');
  if (stage && (STAGE_NAMES as readonly string[]).includes(stage.name)) return stage.name;
  return t.phase;
}

/** "12 s", "3 min", "2 h 05 min"; a clock that went back reads as 0 s. */
export function elapsed(since: string, now: Date): string {
  const ms = now.getTime() - Date.parse(since);
  const s = Number.isFinite(ms) ? Math.max(0, Math.floor(ms / 1000)) : 0;
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min`;
  return `${Math.floor(min / 60)} h ${String(min % 60).padStart(2, '0')} min`;
}

/** "…/parent/name" for a long path; the name is what the user recognizes. */
function shortPath(p: string): string {
  const base = path.basename(p);
  const parent = path.basename(path.dirname(p));
  return parent && parent !== path.sep ? `${base} (…/${parent})` : base;
}

/**
 * One line of plain text: control and bidirectional-override characters go (a
 * title or folder name could reorder or hide what the menu shows), whitespace
 * runs become one space, '&' is doubled (a mnemonic marker on some platforms),
 * and the label is cut at MAX_LABEL characters.
 */
export function menuLabel(text: string): string {
  const clean = text
    .replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  const chars = [...clean];
  const cut = chars.length > MAX_LABEL ? chars.slice(0, MAX_LABEL - 1).join('') + '…' : clean;
  return cut.replace(/&/g, '&&');
}
