// Recent repositories in the new-task form (issue 13): the last five paths a
// user started tasks in, and the path being typed, survive a reload (jsdom's
// real localStorage; a recording bridge in place of a host).
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type Task } from '../../common/domain.js';
import { RECENT_REPOS_KEY } from '../../renderer/state/recent-repos.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

let created = 0;

/** A page load: a fresh app over a host that accepts every task except in a repository called /broken. */
function load() {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'tasks.create': ({ repoPath, title }: { repoPath: string; title: string }) => {
      if (repoPath === '/broken') throw new FactoryError('InvalidInput', `${repoPath} is not a git repository`);
      return { id: `t${++created}`, title, repoPath, baseRef: 'main', baseCommit: 'a'.repeat(40), branch: 'factory/x', createdAt: '2026-01-01T00:00:00.000Z', phase: 'creating', sandbox: { status: 'none' }, stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' })) } as Task;
    },
  });
  mountWith(bridge);
  return bridge;
}

function reload() {
  cleanup();
  return load();
}

const repoInput = () => screen.getByTestId('repo-path-input') as HTMLInputElement;
const recentTitles = () => screen.queryAllByTestId('recent-repo').map((b) => b.getAttribute('title'));

async function start(repoPath: string) {
  fireEvent.change(repoInput(), { target: { value: repoPath } });
  fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: `work in ${repoPath}` } });
  fireEvent.click(screen.getByTestId('start-button'));
  await waitFor(() => expect(screen.getByTestId('start-button').textContent).toBe('Start'));
}

beforeEach(() => localStorage.clear());
afterEach(cleanup);

describe('recent repositories', () => {
  it('keeps the typed path across a reload', async () => {
    load();
    fireEvent.change(await screen.findByTestId('repo-path-input'), { target: { value: '/home/me/half-typed' } });
    reload();
    expect((await screen.findByTestId('repo-path-input') as HTMLInputElement).value).toBe('/home/me/half-typed');
  });

  it('offers the last five repositories a task started in, newest first, each once, after a reload', async () => {
    load();
    await screen.findByTestId('repo-path-input');
    for (const p of ['/r/one', '/r/two', '/r/three', '/r/two', '/r/four', '/r/five', '/r/six', '/broken']) await start(p);
    expect(screen.getByTestId('new-task-error')).toBeTruthy();
    reload();
    await screen.findByTestId('recent-repos');
    expect(recentTitles()).toEqual(['/r/six', '/r/five', '/r/four', '/r/two', '/r/three']);
    expect(screen.getAllByTestId('recent-repo')[0]!.textContent).toBe('six');
    const options = [...screen.getByTestId('recent-repos-datalist').querySelectorAll('option')].map((o) => o.value);
    expect(options).toEqual(recentTitles());
    expect(repoInput().getAttribute('list')).toBe('recent-repos');
  });

  it('fills the path from a recent repository with one click', async () => {
    localStorage.setItem(RECENT_REPOS_KEY, JSON.stringify(['/srv/api', '/srv/web/']));
    load();
    const buttons = await screen.findAllByTestId('recent-repo');
    expect(buttons.map((b) => b.textContent)).toEqual(['api', 'web']);
    fireEvent.click(buttons[1]!);
    expect(repoInput().value).toBe('/srv/web/');
    expect(buttons[1]!.getAttribute('aria-pressed')).toBe('true');
  });

  it('reads garbage in storage as no history, and drops entries that are not paths', async () => {
    for (const stored of ['{not json', '"a string"', '{"0":"/x"}', 'null']) {
      localStorage.setItem(RECENT_REPOS_KEY, stored);
      reload();
      await screen.findByTestId('repo-path-input');
      expect(screen.queryByTestId('recent-repos')).toBeNull();
    }
    localStorage.setItem(RECENT_REPOS_KEY, JSON.stringify([42, null, '', '   ', '/ok', '/evil\u001b[2J', '/nl\nx', 'x'.repeat(5000), '/ok', '/also-ok']));
    reload();
    await screen.findByTestId('recent-repos');
    expect(recentTitles()).toEqual(['/ok', '/also-ok']);
  });
});
