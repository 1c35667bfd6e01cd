// Placement of a task's sandbox: 'local', a named host, or 'any' (least loaded
// by running sandboxes against capacity; a full or unreachable host is skipped).
import { describe, expect, it } from 'vitest';
import { placeSandbox } from '../../../main/remote/placement.js';

const box = (running: number, capacity = 1, reachable = true) => ({ name: 'box', running, capacity, reachable });

describe('sandbox placement', () => {
  it('with capacity 1 on the remote host, the first task under "any" goes there and the second stays local', () => {
    expect(placeSandbox('any', [box(0)], { running: 0, capacity: 2 })).toBe('box');
    expect(placeSandbox('any', [box(1)], { running: 0, capacity: 2 })).toBe('local');
  });

  it('picks the least loaded against capacity, and skips a host that does not answer', () => {
    const hosts = [
      { name: 'small', running: 1, capacity: 2, reachable: true },
      { name: 'big', running: 2, capacity: 8, reachable: true },
      { name: 'down', running: 0, capacity: 8, reachable: false },
    ];
    expect(placeSandbox('any', hosts, { running: 1, capacity: 2 })).toBe('big');
    expect(placeSandbox('any', [box(0, 1, false)], { running: 5, capacity: 2 })).toBe('local');
  });

  it('honours an explicit choice, local by default, and refuses a host that is not in Settings', () => {
    expect(placeSandbox(undefined, [box(0)], { running: 0, capacity: 2 })).toBe('local');
    expect(placeSandbox('box', [box(1)], { running: 0, capacity: 2 })).toBe('box');
    expect(() => placeSandbox('nowhere', [box(0)], { running: 0, capacity: 2 })).toThrow(/no sandbox host named "nowhere"/);
  });
});
