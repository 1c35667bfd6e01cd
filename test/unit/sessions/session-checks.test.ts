// The record of a Claude Code session's leak checks (issue 27): one per turn
// (Stop), one at the end, one per subagent stop, bounded, and saved with the
// task so it is still there after the app restarts. The session service runs
// for real over the real task book and state store; the leak check and the
// sandbox are doubles (booting VMs is test/integration/hooks-claude-code.test.ts's job).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LeakReport } from '../../../common/credentials.js';
import { SESSION_CHECKS_KEPT, type HookSession, type Task } from '../../../common/domain.js';
import { checkFromError, checkFromReport, newHookSession, withCheck } from '../../../main/sessions/session-checks.js';
import { SessionHoldExecutor } from '../../../main/sessions/session-hold.js';
import { SessionService } from '../../../main/sessions/session-service.js';
import { SessionStore } from '../../../main/sessions/session-store.js';
import { StateStore } from '../../../main/state/state-store.js';
import { TaskBook } from '../../../main/tasks/task-book.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-checks-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function leakReport(over: Partial<LeakReport> = {}): LeakReport {
  return {
    sandboxId: 't1',
    at: '2026-12-02T21:00:00.000Z',
    verdict: 'clean',
    scanned: [
      { source: 'overlay', bytes: 3000 },
      { source: 'memory', bytes: 5000 },
    ],
    credentialIds: ['anthropic'],
    hits: [],
    durationMs: 40,
    ...over,
  };
}

describe('a check as the card shows it', () => {
  it('sums what was scanned and names the sources a cap or an error cut short', () => {
    const c = checkFromReport(
      leakReport({
        verdict: 'incomplete',
        scanned: [
          { source: 'overlay', bytes: 3000 },
          { source: 'memory', bytes: 5000, error: 'stopped at its cap of 4 GiB\ninflated' },
          { source: 'stage-log', bytes: 10, notInflated: [{ offset: 0, kind: 'gzip', reason: 'bigger than 64 MiB' }], notInflatedCount: 3 },
        ],
      }),
      { hook: 'Stop', turn: 2 },
    );
    expect(c.scanned).toEqual({
      sources: 3,
      bytes: 8010,
      limited: [
        // A control character from the scan does not reach the card.
        { source: 'memory', reason: 'stopped at its cap of 4 GiB inflated' },
        { source: 'stage-log', reason: '3 compressed streams not inflated (bigger than 64 MiB)' },
      ],
    });
    expect([c.verdict, c.turn, c.hook, c.findingCount]).toEqual(['incomplete', 2, 'Stop', 0]);
  });

  it('keeps the first 20 findings by name and place, and counts them all', () => {
    const hits = Array.from({ length: 25 }, (_, i) => ({ credentialId: `key${i}`, encoding: 'raw', source: 'overlay' as const, offset: i }));
    const c = checkFromReport(leakReport({ verdict: 'leak', hits }), { hook: 'SessionEnd', turn: 4 });
    expect(c.findings).toHaveLength(20);
    expect(c.findings[0]).toEqual({ credentialId: 'key0', source: 'overlay', encoding: 'raw' });
    expect(c.findingCount).toBe(25);
  });

  it('a check that threw is an error verdict with its message', () => {
    const c = checkFromError(new Error('the guest did not answer'), { hook: 'Stop', turn: 1 });
    expect([c.verdict, c.error, c.scanned.sources]).toEqual(['error', 'the guest did not answer', 0]);
  });
});

it(`keeps the newest ${SESSION_CHECKS_KEPT} checks and still counts every turn`, () => {
  let s: HookSession = newHookSession('s1');
  for (let turn = 1; turn <= SESSION_CHECKS_KEPT + 50; turn++) s = withCheck(s, checkFromReport(leakReport(), { hook: 'Stop', turn }));
  expect(s.turns).toBe(SESSION_CHECKS_KEPT + 50);
  expect(s.checks).toHaveLength(SESSION_CHECKS_KEPT);
  expect(s.checks[0]?.turn).toBe(51);
  expect(s.checks.at(-1)?.turn).toBe(SESSION_CHECKS_KEPT + 50);
  // The end follows the last turn and does not count one.
  s = withCheck(s, checkFromReport(leakReport(), { hook: 'SessionEnd', turn: s.turns }));
  expect([s.turns, s.checks.length, s.checks.at(-1)?.hook]).toEqual([SESSION_CHECKS_KEPT + 50, SESSION_CHECKS_KEPT, 'SessionEnd']);
});

it('each Stop is recorded with the session task, a subagent stop on its own, and all of it is there after a restart', async () => {
  const store = new StateStore({ dir });
  const book = new TaskBook({ store, emit: () => {} });
  const added = async (id: string, session: HookSession): Promise<Task> => {
    const task = { ...book.newTask({ title: id, repoPath: '/r', baseRef: 'main', baseCommit: 'a'.repeat(40), agent: 'claude-session', allowPush: false }), id, session };
    await book.add({ version: 1, task: { ...task, phase: 'running', sandbox: { status: 'running' } } });
    return book.get(id).task;
  };
  let verdict: LeakReport['verdict'] = 'clean';
  const sessions = new SessionStore(path.join(dir, 'sessions.json'));
  const service = new SessionService({
    store: sessions,
    hold: new SessionHoldExecutor(),
    graceMs: 60_000,
    log: { info: () => {}, warn: () => {} },
    // Nothing holds the subagent's sandbox here: its start gives up waiting at once (the record is made before).
    readyTimeoutMs: 1,
    ports: {
      createTask: async (input) => added('t2', input.session),
      getTask: (id) => book.get(id).task,
      cancelTask: async (id) => book.get(id).task,
      destroyTask: async (id) => book.get(id).task,
      leakCheck: async (id) =>
        leakReport({ sandboxId: id, verdict, hits: verdict === 'leak' ? [{ credentialId: 'anthropic', encoding: 'base64@1', source: 'memory', offset: 8 }] : [] }),
      sandboxSsh: (id) => {
        throw new Error(`no command runs in ${id} in this test`);
      },
      noteSession: async (id, change) => book.update(book.get(id), { session: change(book.get(id).task.session) }),
    },
  });
  await added('t1', newHookSession('s1'));
  await sessions.put({ sessionId: 's1', taskId: 't1', repoPath: '/r', createdAt: '', state: 'active' });
  await service.check('s1');
  await service.check('s1');
  // A subagent in turn 3: its sandbox's task names its session's, and its stop's check is its own.
  await service.subagentStart({ sessionId: 's1', agentId: 'ag1', agentType: 'Explore' }).catch(() => undefined);
  verdict = 'leak';
  await service.subagentStop({ sessionId: 's1', agentId: 'ag1' });
  await expect(service.check('s1')).resolves.toMatchObject({ report: { verdict: 'leak' } });
  await store.flush();
  await service.dispose();

  // The app restarts: the records are read back from disk.
  const again = new TaskBook({ store: new StateStore({ dir }), emit: () => {} });
  await again.loadAfterRestart(async () => {});
  const parent = again.get('t1').task.session!;
  expect(parent.turns).toBe(3);
  expect(parent.checks.map((c) => [c.turn, c.hook, c.verdict])).toEqual([
    [1, 'Stop', 'clean'],
    [2, 'Stop', 'clean'],
    [3, 'Stop', 'leak'],
  ]);
  expect(parent.checks[2]?.findings).toEqual([{ credentialId: 'anthropic', source: 'memory', encoding: 'base64@1' }]);
  expect(parent.checks[0]?.scanned).toEqual({ sources: 2, bytes: 8000, limited: [] });
  const child = again.get('t2').task.session!;
  expect(child.subagent).toMatchObject({ parentTaskId: 't1', agentId: 'ag1', agentType: 'Explore', outcome: { kind: 'kept' } });
  expect(child.checks.map((c) => [c.turn, c.hook, c.verdict])).toEqual([[3, 'SubagentStop', 'leak']]);
});
