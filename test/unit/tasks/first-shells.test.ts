// A quick sandbox's first shell (started by its restore) is handed to whoever
// asks first: the first openShell gets it at its size, a viewer attaching to
// it takes it too, and an ended one is never handed out.
import { describe, expect, it } from 'vitest';
import type { TerminalInfo } from '../../../common/domain.js';
import { FirstShells } from '../../../main/tasks/first-shells.js';
import type { RegisterSessionOptions, TerminalSource } from '../../../main/terminal/types.js';

function terminals() {
  const sessions: TerminalInfo[] = [];
  const resized: Array<[string, number, number]> = [];
  return {
    sessions,
    resized,
    register(opts: RegisterSessionOptions): TerminalInfo {
      const info: TerminalInfo = { id: `s${sessions.length + 1}`, ...(opts.taskId ? { taskId: opts.taskId } : {}), kind: opts.kind, title: opts.title, status: 'live', exitCode: null, cols: opts.cols, rows: opts.rows };
      sessions.push(info);
      return { ...info };
    },
    list: (taskId?: string) => sessions.filter((s) => taskId === undefined || s.taskId === taskId).map((s) => ({ ...s })),
    resize: (id: string, cols: number, rows: number) => void resized.push([id, cols, rows]),
  };
}
const source = {} as TerminalSource;

describe('a quick sandbox’s first shell', () => {
  it('goes to the first openShell, at its size, and only once', () => {
    const t = terminals();
    const first = new FirstShells(t);
    const opened = first.open('q1', source, { cols: 100, rows: 30 });
    expect(first.isWaiting(opened.id)).toBe(true);
    expect(first.take('q2', { cols: 80, rows: 24 })).toBeUndefined();
    expect(first.take('q1', { cols: 132, rows: 43 })).toMatchObject({ id: opened.id, kind: 'shell', taskId: 'q1', cols: 132, rows: 43 });
    expect(t.resized).toEqual([[opened.id, 132, 43]]);
    expect(first.isWaiting(opened.id)).toBe(false);
    expect(first.take('q1', { cols: 80, rows: 24 })).toBeUndefined();
  });

  it('is taken by a viewer attaching to it, and an ended one is never handed out', () => {
    const t = terminals();
    const first = new FirstShells(t);
    const a = first.open('q1', source, { cols: 100, rows: 30 });
    first.attached('another-session');
    expect(first.isWaiting(a.id)).toBe(true);
    first.attached(a.id);
    expect(first.isWaiting(a.id)).toBe(false);
    expect(first.take('q1', { cols: 80, rows: 24 })).toBeUndefined();
    const b = first.open('q2', source, { cols: 100, rows: 30 });
    t.sessions.find((s) => s.id === b.id)!.status = 'lost';
    expect(first.take('q2', { cols: 80, rows: 24 })).toBeUndefined();
    expect(t.resized).toEqual([]);
    const c = first.open('q3', source, { cols: 100, rows: 30 });
    first.forget('q3');
    expect(first.isWaiting(c.id)).toBe(false);
  });
});
