import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { StateStore, type TaskRecord } from '../../../main/state/state-store.js';
import { SettingsStore } from '../../../main/state/settings.js';
import { tempDir as makeTempDir } from '../../support/repo.js';

const made: string[] = [];
function tempDir(): string {
  const d = makeTempDir('factory-state-');
  made.push(d);
  return d;
}
afterAll(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});

function record(id: string, title = 'do it'): TaskRecord {
  return {
    version: 1,
    task: {
      id,
      title,
      repoPath: '/repo',
      baseRef: 'HEAD',
      baseCommit: 'a'.repeat(40),
      branch: `factory/${id}`,
      createdAt: new Date(0).toISOString(),
      phase: 'running',
      sandbox: { status: 'running', sshPort: 2222 },
      stages: [{ name: 'request', status: 'passed', durationMs: 5, exitCode: 0 }],
    },
    qemuPid: 1234,
  };
}

describe('StateStore', () => {
  it('round-trips records through disk and leaves no temp files', async () => {
    const dir = tempDir();
    const store = new StateStore({ dir });
    await store.saveTask(record('t1'));
    await Promise.all([store.saveTask(record('t2', 'a')), store.saveTask(record('t2', 'b')), store.saveTask(record('t2', 'c'))]);
    const loaded = await new StateStore({ dir }).loadTasks();
    expect(loaded.map((r) => r.task.id)).toEqual(['t1', 't2']);
    expect(loaded[1]!.task.title).toBe('c');
    expect(fs.readdirSync(path.join(dir, 'tasks')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    await store.deleteTask('t1');
    expect((await new StateStore({ dir }).loadTasks()).map((r) => r.task.id)).toEqual(['t2']);
  });

  it('keeps a corrupt or invalid file aside and reports it', async () => {
    const dir = tempDir();
    const store = new StateStore({ dir });
    await store.saveTask(record('good'));
    fs.writeFileSync(path.join(dir, 'tasks', 'broken.json'), '{"version":1,"task":');
    fs.writeFileSync(path.join(dir, 'tasks', 'wrong.json'), JSON.stringify({ ...record('wrong'), task: { ...record('wrong').task, phase: 'dancing' } }));
    const reader = new StateStore({ dir });
    const loaded = await reader.loadTasks();
    expect(loaded.map((r) => r.task.id)).toEqual(['good']);
    expect(reader.problems).toHaveLength(2);
    expect(reader.problems.find((p) => p.file.endsWith('wrong.json'))!.error).toContain('task.phase');
    for (const p of reader.problems) expect(fs.existsSync(p.keptAs!)).toBe(true);
  });

  it('refuses an unsafe id', async () => {
    await expect(new StateStore({ dir: tempDir() }).saveTask(record('../x'))).rejects.toThrow(/unsafe task id/);
  });
});

describe('SettingsStore', () => {
  it('has defaults, persists changes and ignores a bad hand-edited value', () => {
    const dir = tempDir();
    const s = new SettingsStore({ dir });
    expect(s.get()).toMatchObject({ maxParallelTasks: 2, defaultAgent: 'command' });
    s.set({ maxParallelTasks: 3 });
    expect(new SettingsStore({ dir }).get().maxParallelTasks).toBe(3);
    const file = path.join(dir, 'settings.json');
    fs.writeFileSync(file, JSON.stringify({ maxParallelTasks: 'lots', defaultAgent: 'claude' }));
    expect(new SettingsStore({ dir }).get()).toMatchObject({ maxParallelTasks: 2, defaultAgent: 'claude' });
  });
});
