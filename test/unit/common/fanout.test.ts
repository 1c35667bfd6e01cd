// The comparison of a task run N ways, from its tasks alone (common/fanout.ts),
// the API's input rules, and the CLI's --ways/--agent parsing.
import { describe, expect, it } from 'vitest';
import { STAGE_NAMES, type PullbackReview, type Task } from '../../../common/domain.js';
import { compareWay, fanoutApiInputs, testCounts, wayState } from '../../../common/fanout.js';
import { parseAgents, parseWays } from '../../../main/cli/fanout-command.js';

function task(patch: Partial<Task>): Task {
  return {
    id: 'abcdefgh',
    title: 'Add a test',
    repoPath: '/repo',
    baseRef: 'main',
    baseCommit: 'a'.repeat(40),
    branch: 'factory/abcdefgh',
    createdAt: '2026-12-02T00:00:00.000Z',
    phase: 'creating',
    sandbox: { status: 'none' },
    stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
    fanout: { group: 'fan-abcdefgh', way: 2, ways: 3 },
    ...patch,
  };
}

describe('a way in the comparison', () => {
  it('is queued until its sandbox boots, then running, and ends as its task ends', () => {
    expect(wayState('creating', false)).toBe('queued');
    expect(wayState('creating', true)).toBe('running');
    expect(wayState('pulling-back', true)).toBe('running');
    expect(wayState('review', true)).toBe('review');
    expect(wayState('interrupted', false)).toBe('failed');
  });

  it('reads the test counts from the test stage line', () => {
    expect(testCounts('12 passed, 1 failed: adds numbers')).toEqual({ passed: 12, failed: 1 });
    expect(testCounts('4 passed')).toEqual({ passed: 4, failed: 0 });
    expect(testCounts('exit status 2')).toBeUndefined();
    expect(testCounts(undefined)).toBeUndefined();
  });

  it('takes stages, tests, review verdict, change, tokens, cost, leak check and failure from its task', () => {
    const t = task({
      phase: 'failed',
      sandbox: { status: 'running' },
      error: { name: 'StageFailed', message: 'test failed' },
      setup: { status: 'skipped', source: 'detected', lines: [], unsupported: [], layer: { id: 'l1', reused: true } },
      stages: STAGE_NAMES.map((name) =>
        name === 'build'
          ? { name, status: 'passed' as const, durationMs: 1200, tokens: { input: 10, output: 5 }, costUsd: 0.01 }
          : name === 'test'
            ? { name, status: 'failed' as const, durationMs: 800, summary: '3 passed, 1 failed: way three adds', tokens: { input: 1, output: 2 } }
            : { name, status: 'skipped' as const },
      ),
    });
    const review = { added: 7, removed: 2, files: [{}, {}], filesOmitted: 1 } as unknown as PullbackReview;
    const w = compareWay(t, review, 'clean');
    expect(w).toMatchObject({
      way: 2,
      taskId: 'abcdefgh',
      state: 'failed',
      preparation: false,
      tests: { passed: 3, failed: 1 },
      reviewVerdict: { status: 'skipped' },
      change: { added: 7, removed: 2, files: 3 },
      tokens: { input: 11, output: 7 },
      costUsd: 0.01,
      leakCheck: 'clean',
      error: { name: 'StageFailed', message: 'test failed' },
    });
    expect(w.stages.find((s) => s.name === 'build')).toEqual({ name: 'build', status: 'passed', durationMs: 1200 });
  });

  it('marks the way whose setup made the layer as the preparation, and has no counts before the test stage ran', () => {
    const w = compareWay(task({ setup: { status: 'passed', source: 'detected', lines: [], unsupported: [], layer: { id: 'l1', reused: false } } }), undefined);
    expect(w.preparation).toBe(true);
    expect(w.tests).toBeUndefined();
    expect(w.change).toBeUndefined();
  });
});

describe('fanout.create input', () => {
  const create = fanoutApiInputs['fanout.create'];
  const base = { repoPath: '/repo', title: 'Add a test' };

  it('takes 1 to 8 ways, and one agent for all or one per way', () => {
    expect(create.safeParse({ ...base, ways: 3, agents: ['claude-code', 'codex', 'claude-code'] }).success).toBe(true);
    expect(create.safeParse({ ...base, ways: 3, agents: ['codex'] }).success).toBe(true);
    expect(create.safeParse({ ...base, ways: 0 }).error?.issues[0]?.message).toBe('must be at least 1');
    expect(create.safeParse({ ...base, ways: 9 }).error?.issues[0]?.message).toBe('must be at most 8');
    const wrong = create.safeParse({ ...base, ways: 3, agents: ['codex', 'claude-code'] });
    expect(wrong.error?.issues[0]).toMatchObject({ path: ['agents'], message: 'agents: name one agent for every way, or one for all' });
  });

  it('refuses a group id that is not one', () => {
    expect(fanoutApiInputs['fanout.compare'].safeParse({ group: '../x' }).success).toBe(false);
    expect(fanoutApiInputs['fanout.compare'].safeParse({ group: 'fan-abcdefgh' }).success).toBe(true);
  });
});

describe('factory run --ways', () => {
  it('takes a whole number from 1 to 8 and names what is wrong', () => {
    expect(parseWays('3')).toBe(3);
    expect(() => parseWays('0')).toThrow('--ways 0: must be a whole number from 1 to 8');
    expect(() => parseWays('2.5')).toThrow('must be a whole number');
    expect(() => parseWays('9')).toThrow('from 1 to 8');
  });

  it('takes one agent for all ways or one per way', () => {
    expect(parseAgents(undefined, 3)).toBeUndefined();
    expect(parseAgents('codex', 3)).toEqual(['codex']);
    expect(parseAgents('claude-code,codex,claude-code', 3)).toEqual(['claude-code', 'codex', 'claude-code']);
    expect(() => parseAgents('claude-code,codex', 3)).toThrow('--agent names 2 agents for 3 ways');
    expect(() => parseAgents('codex,,codex', 3)).toThrow('an agent name is empty');
  });
});
