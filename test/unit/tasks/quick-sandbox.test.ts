// Quick sandboxes before and around their VM: what the user can get wrong, how a
// failed or cancelled boot ends, that a restart closes rather than interrupts,
// and the rule that the last shell's end destroys one (unless kept). The VM layer
// is replaced by a QEMU probe and an image store we script (no VM can boot in a
// unit test); git, the state on disk and the task service are real. The real VM
// path is in test/integration/quick-sandbox-cli.test.ts and test/e2e/quick-sandbox.test.ts.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import { QuickSandboxWatcher } from '../../../main/tasks/quick-sandbox.js';
import { stderrLogger } from '../../../main/log/logger.js';
import type { FactoryEvent } from '../../../common/contract.js';
import type { ImageStatus, Task, TerminalInfo } from '../../../common/domain.js';
import { makeRepo, tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function fakeVm(qemuOk: boolean, ensure: () => Promise<unknown>) {
  const status: ImageStatus = { state: 'missing', version: 'test' };
  return {
    images: { status: () => status, ensure },
    qemu: {
      checkInstalled: async () => (qemuOk ? { ok: true, version: '8' } : { ok: false, installHint: 'sudo apt install qemu-system-x86 qemu-utils' }),
      start: async () => { throw new Error('no VM in unit tests'); },
    },
  };
}

async function app(opts: { qemuOk?: boolean; dataDir?: string; ensure?: () => Promise<unknown> } = {}): Promise<FactoryApp> {
  const dataDir = opts.dataDir ?? tempDir();
  const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
  const a = await createFactoryApp({ host: 'web', paths, vm: fakeVm(opts.qemuOk ?? true, opts.ensure ?? (async () => { throw new Error('no image in unit tests'); })) });
  // Pushed first, so run last: dispose saves the tasks' state into the folder.
  if (!opts.dataDir) cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => a.dispose());
  return a;
}

describe('sandboxes.quick', () => {
  it('names a folder that is not a repository and a missing QEMU, and records nothing', async () => {
    const a = await app();
    const dir = tempDir();
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    await expect(a.api['sandboxes.quick']({ repoPath: dir })).rejects.toMatchObject({ name: 'NotAGitRepository', message: `${dir} is not a git repository` });
    await expect(a.api['sandboxes.quick']({ repoPath: '' })).rejects.toMatchObject({ name: 'ZodError' });
    const b = await app({ qemuOk: false });
    await expect(b.api['sandboxes.quick']({})).rejects.toMatchObject({ name: 'QemuMissing', message: expect.stringContaining('apt install qemu-system-x86') });
    expect(await a.api['tasks.list']({})).toEqual([]);
    expect(await b.api['tasks.list']({})).toEqual([]);
  });

  it('records a quick sandbox with no pipeline; a failed boot shows the reason and cannot be retried', async () => {
    const a = await app();
    const repo = await makeRepo({ files: { 'a.txt': 'a\n' } });
    cleanups.push(repo.cleanup);
    const q = await a.api['sandboxes.quick']({ repoPath: repo.dir });
    expect(q).toMatchObject({ kind: 'quick', title: `quick sandbox: ${path.basename(repo.dir)}`, stages: [], repoPath: repo.dir, baseCommit: repo.head() });
    expect(q.keep).toBeUndefined();
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: q.id })).phase).toBe('failed');
    const failed = await a.api['tasks.get']({ taskId: q.id });
    expect(failed.error?.message).toBe('no image in unit tests');
    expect(failed.sandbox.status).toBe('none');
    await expect(a.api['tasks.retry']({ taskId: q.id })).rejects.toMatchObject({ name: 'NotRetryable', message: expect.stringContaining('quick sandbox') });
  });

  it('without a repository: empty repo fields, kept when asked', async () => {
    const a = await app();
    const q = await a.api['sandboxes.quick']({ keep: true });
    expect(q).toMatchObject({ kind: 'quick', title: 'quick sandbox', repoPath: '', baseCommit: '', keep: true, stages: [] });
  });

  it('cancelling a quick sandbox while it waits for the base image closes it at once; nothing runs', async () => {
    const a = await app({ ensure: () => new Promise(() => {}) });
    const q = await a.api['sandboxes.quick']({});
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: q.id })).phase).toBe('provisioning');
    const started = Date.now();
    const ended = await a.api['tasks.cancel']({ taskId: q.id });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(ended).toMatchObject({ phase: 'closed', sandbox: { status: 'none' } });
    // A closed quick sandbox can be removed like a finished task.
    await a.api['tasks.remove']({ taskId: q.id });
    expect(await a.api['tasks.list']({})).toEqual([]);
  });

  it('a quick sandbox the app stopped under is closed at the next start, not interrupted', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const first = await app({ dataDir, ensure: () => new Promise(() => {}) });
    const q = await first.api['sandboxes.quick']({});
    await expect.poll(async () => (await first.api['tasks.get']({ taskId: q.id })).phase).toBe('provisioning');
    await first.dispose();
    const second = await app({ dataDir });
    expect(await second.api['tasks.get']({ taskId: q.id })).toMatchObject({ phase: 'closed', sandbox: { status: 'none' } });
  });

  it('a quick sandbox asked for as the app shuts down is closed by the shutdown; nothing is written after it', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const first = await app({ dataDir, ensure: () => new Promise(() => {}) });
    // Asked for, not awaited: the shutdown comes while the sandbox is being recorded.
    const asked = first.api['sandboxes.quick']({});
    await first.dispose();
    const q = await asked;
    // What the shutdown left is all there is: a run still going would write into the folder after it.
    fs.rmSync(dataDir, { recursive: true, force: true });
    await new Promise((r) => setTimeout(r, 300));
    expect(fs.existsSync(dataDir)).toBe(false);
    await expect(first.api['sandboxes.quick']({})).rejects.toMatchObject({ name: 'ShuttingDown' });
    expect(q).toMatchObject({ kind: 'quick' });
  });
});

describe('QuickSandboxWatcher', () => {
  const quick = (over: Partial<Task> = {}): Task => ({
    id: 'q1', title: 'quick sandbox', repoPath: '', baseRef: '', baseCommit: '', branch: 'factory/q1', createdAt: '2026-01-01T00:00:00Z',
    phase: 'running', sandbox: { status: 'running' }, stages: [], kind: 'quick', ...over,
  });
  const shell = (id: string, status: TerminalInfo['status']): TerminalInfo => ({ id, taskId: 'q1', kind: 'shell', title: 'shell', status, cols: 80, rows: 24 });

  function watcher(task: Task | undefined, terminals: TerminalInfo[], unopenedMs = 60_000) {
    const destroyed: string[] = [];
    const closed: string[] = [];
    const w = new QuickSandboxWatcher({
      task: (id) => (task && task.id === id ? task : undefined),
      destroy: async (id) => void destroyed.push(id),
      terminals: () => terminals,
      closeTerminal: (id) => void closed.push(id),
      log: stderrLogger('quick-test'),
      unopenedMs,
    });
    cleanups.push(() => w.dispose());
    return { w, destroyed, closed };
  }
  const statusOf = (info: TerminalInfo): FactoryEvent => ({ type: 'terminal.status', info });

  it('destroys a quick sandbox when its last shell ends, once', async () => {
    const terms = [shell('s1', 'exited')];
    const { w, destroyed } = watcher(quick(), terms);
    w.onEvent(statusOf(terms[0]!));
    w.onEvent(statusOf(terms[0]!));
    await Promise.resolve();
    expect(destroyed).toEqual(['q1']);
  });

  it('keeps it while another shell of it is still open', async () => {
    const terms = [shell('s1', 'exited'), shell('s2', 'live')];
    const { w, destroyed } = watcher(quick(), terms);
    w.onEvent(statusOf(terms[0]!));
    await Promise.resolve();
    expect(destroyed).toEqual([]);
  });

  it('keeps a kept quick sandbox, a pipeline task and a shell of another kind', async () => {
    const ended = shell('s1', 'lost');
    for (const t of [quick({ keep: true }), quick({ kind: undefined }), quick({ kind: 'pipeline' }), quick({ phase: 'closed' })]) {
      const { w, destroyed } = watcher(t, [ended]);
      w.onEvent(statusOf(ended));
      w.onEvent(statusOf({ ...ended, kind: 'host' }));
      await Promise.resolve();
      expect(destroyed, JSON.stringify(t)).toEqual([]);
    }
  });

  it('destroys a quick sandbox nobody opened a shell in after the grace period', async () => {
    const { w, destroyed } = watcher(quick(), [], 30);
    w.onEvent({ type: 'task.updated', task: quick() });
    await new Promise((r) => setTimeout(r, 80));
    expect(destroyed).toEqual(['q1']);
    const opened = watcher(quick(), [shell('s1', 'live')], 30);
    opened.w.onEvent({ type: 'task.updated', task: quick() });
    await new Promise((r) => setTimeout(r, 80));
    expect(opened.destroyed).toEqual([]);
  });

  it('destroys a quick sandbox whose first shell ended while it still started, once it runs', async () => {
    // The restore's first shell opens before the sandbox runs; its user exited (or its CLI went) before that.
    const booting = quick({ phase: 'provisioning', sandbox: { status: 'booting' } });
    const { w, destroyed } = watcher(booting, [shell('s1', 'exited')]);
    w.onEvent(statusOf(shell('s1', 'exited')));
    await Promise.resolve();
    expect(destroyed).toEqual([]);
    const { w: later, destroyed: laterDestroyed } = watcher(quick(), [shell('s1', 'exited')]);
    later.onEvent({ type: 'task.updated', task: quick() });
    await Promise.resolve();
    expect(laterDestroyed).toEqual(['q1']);
    const { w: kept, destroyed: keptDestroyed } = watcher(quick({ keep: true }), [shell('s1', 'exited')]);
    kept.onEvent({ type: 'task.updated', task: quick({ keep: true }) });
    const { w: open, destroyed: openDestroyed } = watcher(quick(), [shell('s1', 'exited'), shell('s2', 'live')]);
    open.onEvent({ type: 'task.updated', task: quick() });
    await Promise.resolve();
    expect(keptDestroyed).toEqual([]);
    expect(openDestroyed).toEqual([]);
  });

  it('ends the shell of a quick sandbox whose CLI left, but not of a kept one or a task', () => {
    const live = shell('s1', 'live');
    const q = watcher(quick(), [live]);
    q.w.viewerLeft(live);
    q.w.viewerLeft({ ...live, status: 'exited' });
    expect(q.closed).toEqual(['s1']);
    for (const t of [quick({ keep: true }), quick({ kind: 'pipeline' })]) {
      const other = watcher(t, [live]);
      other.w.viewerLeft(live);
      other.w.viewerLeft({ ...live, kind: 'stage' });
      expect(other.closed, JSON.stringify(t)).toEqual([]);
    }
  });
});
