// When a CLI-started app ends by itself: only after nothing has run for the
// whole stated time; anything running (a task, a kept or quick sandbox, a
// session's) starts the count again.
import { describe, expect, it } from 'vitest';
import type { Task } from '../../../common/domain.js';
import { IdleExit, idleExitMs, runningTasks } from '../../../main/instance/idle-exit.js';

const task = (phase: Task['phase'], sandbox: Task['sandbox']['status']) => ({ id: `${phase}-${sandbox}`, phase, sandbox: { status: sandbox } }) as Task;

describe('what keeps a CLI-started app up', () => {
  it('counts running tasks and every sandbox that is up, not finished ones', () => {
    const tasks = [task('running', 'running'), task('review', 'running'), task('closed', 'destroyed'), task('review', 'destroyed'), task('provisioning', 'none'), task('failed', 'lost')];
    expect(runningTasks(tasks).map((t) => t.id)).toEqual(['running-running', 'review-running', 'provisioning-none']);
  });

  it('reads the time from FACTORY_IDLE_EXIT_SEC, 10 minutes otherwise', () => {
    expect(idleExitMs({ FACTORY_IDLE_EXIT_SEC: '30' })).toBe(30_000);
    expect(idleExitMs({ FACTORY_IDLE_EXIT_SEC: 'soon' })).toBe(600_000);
    expect(idleExitMs({})).toBe(600_000);
  });
});

describe('the idle exit', () => {
  it('ends the app once nothing ran for the whole time, and not before', () => {
    let now = 0;
    let busy = true;
    let ended = 0;
    const idle = new IdleExit({ afterMs: 1000, busy: () => busy, onIdle: () => ended++, now: () => now });
    idle.check();
    now = 5000;
    idle.check();
    expect(ended).toBe(0);
    busy = false;
    idle.check(); // idle from 5000
    now = 5900;
    idle.check();
    expect(idle.idleForMs()).toBe(900);
    expect(ended).toBe(0);
    // Something ran in between: the count starts again.
    busy = true;
    idle.check();
    expect(idle.idleForMs()).toBe(0);
    busy = false;
    now = 6000;
    idle.check();
    now = 6999;
    idle.check();
    expect(ended).toBe(0);
    now = 7000;
    idle.check();
    expect(ended).toBe(1);
  });
});
