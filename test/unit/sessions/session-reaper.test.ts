// The reaper and the teardown rule of session sandboxes, with real session
// processes (a real `sleep` stands for Claude Code) and a real session file.
// The task service is a recording double here (booting VMs is the integration
// test's job: test/integration/hooks-claude-code.test.ts).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LeakReport } from '../../../common/credentials.js';
import type { Task } from '../../../common/domain.js';
import { SessionHoldExecutor } from '../../../main/sessions/session-hold.js';
import { SessionService, type SessionPorts } from '../../../main/sessions/session-service.js';
import { readStat } from '../../../main/sessions/session-process.js';
import { SessionStore } from '../../../main/sessions/session-store.js';

let dir: string;
const calls: string[] = [];
let verdict: LeakReport['verdict'] = 'clean';
const task = (id: string, sandbox = 'running', phase = 'running') => ({ id, phase, sandbox: { status: sandbox } }) as unknown as Task;
const ports: SessionPorts = {
  createTask: async () => task('t1'),
  getTask: (id) => task(id),
  cancelTask: async (id) => (calls.push(`cancel ${id}`), task(id)),
  destroyTask: async (id) => (calls.push(`destroy ${id}`), task(id, 'destroyed')),
  sandboxSsh: () => {
    throw new Error('this test runs no command in a sandbox');
  },
  noteSession: async () => undefined,
  leakCheck: async (id) => (calls.push(`leakcheck ${id}`), { verdict, hits: [], scanned: [], credentialIds: [], sandboxId: id, at: '', durationMs: 0 }) as LeakReport,
};
const log = { info: () => {}, warn: () => {} };

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-reaper-'));
  calls.length = 0;
  verdict = 'clean';
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

async function sessionWith(pidAlive: boolean) {
  const proc = spawn('sleep', ['60']);
  const start = readStat(proc.pid!)?.start;
  const store = new SessionStore(path.join(dir, 'sessions.json'));
  await store.put({ sessionId: 's1', taskId: 't1', repoPath: '/r', pid: proc.pid!, ...(start ? { pidStart: start } : {}), createdAt: '', state: 'active' });
  if (!pidAlive) {
    proc.kill('SIGKILL');
    await new Promise((r) => proc.on('exit', r));
  }
  return { proc, store };
}

describe('the reaper of session sandboxes', () => {
  it('leaves the sandbox of a live session alone', async () => {
    const { proc, store } = await sessionWith(true);
    const svc = new SessionService({ store, hold: new SessionHoldExecutor(), ports, graceMs: 0, log });
    await svc.reap();
    await svc.reap(Date.now() + 60_000);
    expect(calls).toEqual([]);
    proc.kill('SIGKILL');
  });

  it('destroys the sandbox of a session whose process died, only after the grace period, and forgets the session', async () => {
    const { store } = await sessionWith(false);
    const svc = new SessionService({ store, hold: new SessionHoldExecutor(), ports, graceMs: 60_000, log });
    const t0 = Date.now();
    await svc.reap(t0);
    await svc.reap(t0 + 59_000);
    expect(calls).toEqual([]);
    await svc.reap(t0 + 60_000);
    expect(calls).toEqual(['leakcheck t1', 'destroy t1']);
    // Also after a restart: the record is gone from the file.
    expect(new SessionStore(path.join(dir, 'sessions.json')).all()).toEqual([]);
  });

  it('keeps a sandbox whose leak check found a credential, ends its spare fork, and never reaps it', async () => {
    const { store } = await sessionWith(false);
    verdict = 'leak';
    const withSpare: SessionPorts = { ...ports, dropSpareFork: async (id) => void calls.push(`drop spare ${id}`) };
    const svc = new SessionService({ store, hold: new SessionHoldExecutor(), ports: withSpare, graceMs: 0, log });
    await svc.reap();
    // The spare was forked before the finding: it holds what was found and goes at once.
    expect(calls).toEqual(['leakcheck t1', 'drop spare t1', 'cancel t1']);
    expect(new SessionStore(path.join(dir, 'sessions.json')).get('s1')?.state).toBe('quarantined');
    await svc.reap(Date.now() + 3_600_000);
    expect(calls).toHaveLength(3);
  });

  it('keeps, as for a leak, a sandbox whose leak check could not scan everything or threw', async () => {
    const { store } = await sessionWith(false);
    verdict = 'incomplete';
    const svc = new SessionService({ store, hold: new SessionHoldExecutor(), ports, graceMs: 0, log });
    await svc.reap();
    expect(calls).toEqual(['leakcheck t1', 'cancel t1']);
    expect(store.get('s1')?.state).toBe('quarantined');
    await store.put({ sessionId: 's2', taskId: 't2', repoPath: '/r', createdAt: '', state: 'active' });
    const failing = new SessionService({ store, hold: new SessionHoldExecutor(), ports: { ...ports, leakCheck: async () => Promise.reject(new Error('the scan stopped')) }, graceMs: 0, log });
    await expect(failing.end('s2')).rejects.toThrow('the scan stopped');
    expect(store.get('s2')?.state).toBe('quarantined');
    expect(calls.filter((c) => c.startsWith('destroy'))).toEqual([]);
  });

  it('after the user destroyed a sandbox kept for a leak, the resumed session gets a new one and the old record goes', async () => {
    const store = new SessionStore(path.join(dir, 'sessions.json'));
    const hold = new SessionHoldExecutor();
    // The task service as the user left it: t1 quarantined, then destroyed in the app.
    const status: Record<string, string> = { t1: 'running' };
    let next = 1;
    const svc = new SessionService({
      store,
      hold,
      ports: {
        ...ports,
        getTask: (id) => task(id, status[id], id === 't1' ? 'cancelled' : 'running'),
        createTask: async () => {
          const id = `t${++next}`;
          status[id] = 'running';
          void hold.runStage({ stage: 'request', task: task(id), signal: new AbortController().signal } as never);
          return task(id);
        },
      },
      graceMs: 0,
      log,
    });
    await store.put({ sessionId: 's1', taskId: 't1', repoPath: '/r', createdAt: '', state: 'quarantined' });
    // While the sandbox is kept, the session is refused, and the reaper keeps the record.
    await expect(svc.start({ sessionId: 's1', cwd: process.cwd(), source: 'resume' })).rejects.toMatchObject({ name: 'InvalidTransition' });
    await svc.reap();
    expect(store.get('s1')?.state).toBe('quarantined');
    status.t1 = 'destroyed';
    const again = await svc.start({ sessionId: 's1', cwd: process.cwd(), source: 'resume' });
    expect([again.task.id, again.resumed]).toEqual(['t2', false]);
    expect(new SessionStore(path.join(dir, 'sessions.json')).get('s1')).toMatchObject({ taskId: 't2', state: 'active' });
    hold.release('t2');
    // A quarantined session that never comes back is forgotten once its sandbox is gone.
    await store.put({ sessionId: 's2', taskId: 't1', repoPath: '/r', createdAt: '', state: 'quarantined' });
    await svc.reap();
    expect(new SessionStore(path.join(dir, 'sessions.json')).get('s2')).toBeUndefined();
  });

  it('Stop only checks; SessionEnd checks, then destroys', async () => {
    const { proc, store } = await sessionWith(true);
    const svc = new SessionService({ store, hold: new SessionHoldExecutor(), ports, graceMs: 0, log });
    expect((await svc.check('s1')).report.verdict).toBe('clean');
    expect(calls).toEqual(['leakcheck t1']);
    expect((await svc.end('s1')).destroyed).toBe(true);
    expect(calls).toEqual(['leakcheck t1', 'leakcheck t1', 'destroy t1']);
    await expect(svc.check('s1')).rejects.toMatchObject({ name: 'SessionNotFound' });
    proc.kill('SIGKILL');
  });

  it('a resumed session reconnects to its sandbox instead of making another, with its new process recorded', async () => {
    const store = new SessionStore(path.join(dir, 'sessions.json'));
    const hold = new SessionHoldExecutor();
    let created = 0;
    const svc = new SessionService({ store, hold, ports: { ...ports, createTask: async () => (created++, task('t1')) }, graceMs: 0, log });
    // The task's pipeline reaches its held stage (as the real runner does after seeding).
    const stage = hold.runStage({ stage: 'request', task: task('t1'), signal: new AbortController().signal } as never);
    const first = await svc.start({ sessionId: 's9', cwd: process.cwd(), source: 'startup', pid: 111 });
    const again = await svc.start({ sessionId: 's9', cwd: process.cwd(), source: 'resume', pid: 222 });
    expect([first.resumed, again.resumed, again.task.id, created]).toEqual([false, true, 't1', 1]);
    expect(new SessionStore(path.join(dir, 'sessions.json')).get('s9')?.pid).toBe(222);
    hold.release('t1');
    expect((await stage).status).toBe('passed');
  });

  it('a session outside any git repository is refused by name', async () => {
    const svc = new SessionService({ store: new SessionStore(path.join(dir, 'sessions.json')), hold: new SessionHoldExecutor(), ports, graceMs: 0, log });
    await expect(svc.start({ sessionId: 's', cwd: dir })).rejects.toMatchObject({ name: 'NotAGitRepository' });
  });

  it('a session file that is not ours is moved aside, not trusted', () => {
    const file = path.join(dir, 'sessions.json');
    fs.writeFileSync(file, JSON.stringify({ version: 1, sessions: [{ sessionId: 's', taskId: 't', pid: -1 }] }));
    expect(new SessionStore(file).all()).toEqual([]);
    expect(fs.readdirSync(dir).some((f) => f.startsWith('sessions.json.unreadable-'))).toBe(true);
  });
});
