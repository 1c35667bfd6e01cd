// The app in jsdom with a recording bridge in place of a host, opened on one
// task in review, for the review screen's tests.
import { render, screen } from '@testing-library/react';
import { FactoryError, type FactoryBridge, type FactoryEvent, type TerminalDataEvent } from '../../../common/contract.js';
import { STAGE_NAMES, type Task } from '../../../common/domain.js';
import type { PullbackReview } from '../../../common/review.js';
import { Listeners } from '../../../common/listeners.js';
import { App } from '../../../renderer/App.js';
import { FactoryController } from '../../../renderer/state/controller.js';
import { ControllerContext } from '../../../renderer/state/context.js';
import { createFactoryStore } from '../../../renderer/state/store.js';

/**
 * jsdom has no layout engine: boxes measure 0 and elements cannot scroll by
 * themselves. This stands in for the browser's scrollTo (the one thing the
 * review's lists need from layout) by setting scrollTop and firing "scroll".
 * Real layout and scrolling are tested in Chromium (test/e2e/review-*.test.ts).
 */
export function installScrollTo(): void {
  (Element.prototype as { scrollTo?: unknown }).scrollTo = function scrollTo(this: Element, opts: ScrollToOptions) {
    if (opts.top !== undefined) this.scrollTop = opts.top;
    this.dispatchEvent(new Event('scroll'));
  };
}

/** Scrolls a virtualised list as a user's wheel would: moves scrollTop and fires "scroll". */
export function scrollBox(box: HTMLElement, top: number): void {
  box.scrollTop = top;
  box.dispatchEvent(new Event('scroll'));
}

export class RecordingBridge implements FactoryBridge {
  calls: Array<{ method: string; input: unknown }> = [];
  events = new Listeners<FactoryEvent>();
  data = new Listeners<TerminalDataEvent>();
  constructor(public handlers: Record<string, (input: any) => unknown>) {}
  async call(method: any, input: any): Promise<any> {
    this.calls.push({ method, input });
    const h = this.handlers[method];
    if (!h) throw FactoryError.carried('NotImplemented', method);
    return h(input);
  }
  onEvent(l: (e: FactoryEvent) => void) {
    return this.events.add(l);
  }
  onTerminalData(l: (e: TerminalDataEvent) => void) {
    return this.data.add(l);
  }
  inputs(method: string): unknown[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.input);
  }
}

export function reviewTask(over: Partial<Task> = {}): Task {
  return {
    id: 't1', title: 'Returned work', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
    branch: 'factory/t1', createdAt: '2026-01-01T00:00:00.000Z', phase: 'review', sandbox: { status: 'running', accel: 'tcg' },
    stages: STAGE_NAMES.map((name) => ({ name, status: 'passed' as const })),
    ...over,
  } as Task;
}

export function review(over: Partial<PullbackReview> = {}): PullbackReview {
  return {
    taskId: 't1', branch: 'factory/t1', baseCommit: 'a'.repeat(40), headCommit: 'b'.repeat(40),
    files: [{ path: 'hello.txt', status: 'modified', added: 1, removed: 1, binary: false }],
    filesOmitted: 0, added: 1, removed: 1,
    patch: 'diff --git a/hello.txt b/hello.txt\n--- a/hello.txt\n+++ b/hello.txt\n@@ -1 +1 @@\n-hello\n+hello, world\n',
    patchTruncated: false, bundleBytes: 100, checks: [{ name: 'bundle verify', ok: true, message: 'one ref' }],
    flags: [], secrets: [], confirmations: [],
    ...over,
  };
}

/** Mounts the app with one task in review and opens it; resolves when the review is drawn. */
export async function openReview(handlers: Record<string, (input: any) => unknown>) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [reviewTask()],
    'terminal.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
    'tasks.approve': () => reviewTask({ phase: 'approved', decision: { kind: 'approved', at: 'now', branch: 'factory/t1' } }),
    ...handlers,
  });
  const controller = new FactoryController(bridge, createFactoryStore());
  controller.start();
  render(
    <ControllerContext.Provider value={controller}>
      <App />
    </ControllerContext.Provider>,
  );
  (await screen.findByTestId('task-select-t1')).click();
  await screen.findByTestId('review-files');
  return { bridge, controller };
}

/** The rows a virtualised list has in the DOM right now. */
export function rowsOf(box: HTMLElement): HTMLElement[] {
  return [...box.querySelectorAll<HTMLElement>('.vrows-sizer > *')];
}
