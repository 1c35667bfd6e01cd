// The parallel-task limit. Tasks wait for a free slot; a task cancelled while
// it waits leaves the queue and must never take a freed slot's wake-up with it.
import { describe, expect, it } from 'vitest';
import { Slots } from '../../../main/tasks/slots.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('Slots', () => {
  it('lets no more than the limit run, and the next waiter in when one ends', async () => {
    const slots = new Slots(() => 1);
    const release = await slots.acquire(new AbortController().signal);
    let second = false;
    const waiting = slots.acquire(new AbortController().signal).then((r) => ((second = true), r));
    await tick();
    expect(second).toBe(false);
    release();
    (await waiting)();
    expect(second).toBe(true);
  });

  it('passes a slot on when the task it was freed for is cancelled in the same moment', async () => {
    const slots = new Slots(() => 1);
    const releaseA = await slots.acquire(new AbortController().signal);
    const b = new AbortController();
    const waitB = slots.acquire(b.signal);
    let cStarted = false;
    const waitC = slots.acquire(new AbortController().signal).then((r) => ((cStarted = true), r));
    await tick();
    // The user cancels A and B together: A's end wakes B, which is cancelled before it can run.
    releaseA();
    b.abort();
    await expect(waitB).rejects.toMatchObject({ name: 'Cancelled' });
    await tick();
    expect(cStarted).toBe(true);
    (await waitC)();
  });

  it('a waiter cancelled while queued leaves the queue', async () => {
    const slots = new Slots(() => 1);
    const releaseA = await slots.acquire(new AbortController().signal);
    const b = new AbortController();
    const waitB = slots.acquire(b.signal);
    b.abort();
    await expect(waitB).rejects.toMatchObject({ name: 'Cancelled' });
    let cStarted = false;
    const waitC = slots.acquire(new AbortController().signal).then((r) => ((cStarted = true), r));
    releaseA();
    (await waitC)();
    expect(cStarted).toBe(true);
  });
});
