// A subagent's sandbox whose leak check was not clean is kept for inspection,
// as a session's is: nothing of it goes into the session's sandbox, and the
// session's end, which destroys the subagents' sandboxes left over, leaves it
// alone. The task service is a recording double (the Claude Code integration
// test boots the real sandboxes).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { LeakReport } from '../../../common/credentials.js';
import type { HookSession, Task } from '../../../common/domain.js';
import { SessionHoldExecutor } from '../../../main/sessions/session-hold.js';
import { SessionService } from '../../../main/sessions/session-service.js';
import { SessionStore } from '../../../main/sessions/session-store.js';

let dir: string;
const calls: string[] = [];
const destroyed = new Set<string>();
/** The session records the service keeps with each task, as the task service saves them. */
const notes = new Map<string, HookSession>();
const task = (id: string) => ({ id, phase: 'running', baseCommit: 'a'.repeat(40), sandbox: { status: destroyed.has(id) ? 'destroyed' : 'running' } }) as unknown as Task;
const report = (id: string, verdict: LeakReport['verdict']) =>
  ({ verdict, hits: verdict === 'leak' ? [{ credentialId: 'anthropic', encoding: 'base64@1', source: 'memory', offset: 4096 }] : [], scanned: [{ source: 'memory', bytes: 2048 }], credentialIds: [], sandboxId: id, at: '', durationMs: 0 }) as LeakReport;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'subagent-keep-'));
  calls.length = 0;
  destroyed.clear();
  notes.clear();
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

it('a subagent sandbox with a finding is kept: nothing comes over, and the session end does not destroy it', async () => {
  const store = new SessionStore(path.join(dir, 'sessions.json'));
  await store.put({ sessionId: 's1', taskId: 't1', repoPath: '/r', createdAt: '', state: 'active', agents: { a1: 't2', a2: 't3' } });
  const service = new SessionService({
    store,
    hold: new SessionHoldExecutor(),
    graceMs: 60_000,
    log: { info: () => {}, warn: () => {} },
    ports: {
      createTask: async () => task('tx'),
      getTask: (id) => task(id),
      cancelTask: async (id) => (calls.push(`cancel ${id}`), task(id)),
      destroyTask: async (id) => (calls.push(`destroy ${id}`), destroyed.add(id), task(id)),
      leakCheck: async (id) => (calls.push(`leakcheck ${id}`), report(id, id === 't2' ? 'leak' : 'clean')),
      sandboxSsh: (id) => {
        throw new Error(`no command may run in ${id} here`);
      },
      noteSession: async (id, change) => notes.set(id, change(notes.get(id))),
    },
  });
  notes.set('t2', { sessionId: 's1', turns: 0, checks: [], subagent: { parentTaskId: 't1', agentId: 'a1', agentType: 'Explore' } });
  const r = await service.subagentStop({ sessionId: 's1', agentId: 'a1' });
  expect(r).toMatchObject({ commits: 0, destroyed: false });
  expect(r.report?.verdict).toBe('leak');
  expect(calls).toEqual(['leakcheck t2', 'cancel t2']);
  expect(store.get('s1')?.agents).toEqual({ a2: 't3' });
  // Its later commands are refused, not run in the session's sandbox instead.
  await expect(service.run({ sessionId: 's1', agentId: 'a1', command: 'true', dir: '' })).rejects.toThrow(/subagent a1 of session s1 has no running sandbox of its own/);
  // Its card says why it was kept, naming the finding (never a value), and shows the check.
  expect(notes.get('t2')?.checks.map((c) => [c.hook, c.verdict, c.findings[0]?.credentialId])).toEqual([['SubagentStop', 'leak', 'anthropic']]);
  expect(notes.get('t2')?.subagent?.outcome).toEqual({ kind: 'kept', reason: 'the leak check found anthropic (memory)' });
  calls.length = 0;
  await service.end('s1');
  // The leftover subagent (a2) goes with the session; the kept one (t2) stays.
  expect(calls).toContain('destroy t3');
  expect(calls).toContain('destroy t1');
  expect(calls).not.toContain('destroy t2');
  expect(notes.get('t1')?.checks.map((c) => [c.hook, c.verdict])).toEqual([['SessionEnd', 'clean']]);
  await service.dispose();
});

it("a Codex session's sandbox and its subagent's are named Codex's; a hook that names no agent gets Claude Code's", async () => {
  execFileSync('git', ['init', '-q', dir]);
  const titles: string[] = [];
  const store = new SessionStore(path.join(dir, 'sessions.json'));
  const service = new SessionService({
    store,
    // Every sandbox is ready at once (held for the session, as the task service's hold does).
    hold: { holding: () => true, release: () => false } as unknown as SessionHoldExecutor,
    graceMs: 60_000,
    log: { info: () => {}, warn: () => {} },
    ports: {
      createTask: async (input) => (titles.push(input.title ?? ''), task(`t${titles.length}`)),
      getTask: (id) => task(id),
      cancelTask: async (id) => task(id),
      destroyTask: async (id) => task(id),
      leakCheck: async (id) => report(id, 'clean'),
      sandboxSsh: (id) => {
        throw new Error(`no command may run in ${id} here`);
      },
      noteSession: async (id, change) => notes.set(id, change(notes.get(id))),
    },
  });
  await service.start({ sessionId: 'cx', cwd: dir, agent: 'codex' });
  await service.subagentStart({ sessionId: 'cx', agentId: 'a1', agentType: 'worker', agent: 'codex' });
  await service.start({ sessionId: 'cc', cwd: dir });
  expect(titles).toEqual(['Codex session cx', 'Codex subagent worker a1 of session cx', 'Claude Code session cc']);
  await service.dispose();
});
