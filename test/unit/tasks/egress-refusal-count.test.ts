// An agent's housekeeping (update checks, telemetry) retries the same refused host
// many times; the task's list shows each destination once, with how many requests
// were refused, and the newest request's details.
import { describe, expect, it } from 'vitest';
import type { TaskEgress } from '../../../common/domain.js';
import type { EgressRefusal } from '../../../common/egress.js';
import { withRefusal } from '../../../main/tasks/task-environment.js';

const refusal = (over: Partial<EgressRefusal> = {}): EgressRefusal => ({
  time: '2026-12-02T10:00:00.000Z', sandboxId: 't1', step: 'build', scheme: 'https', host: 'chatgpt.com', port: 443, reason: 'no rule allows it', ...over,
});

describe('refused destinations of a task', () => {
  it('are listed once per destination and step, counted, the newest request kept', () => {
    let egress: TaskEgress = { allowed: [], refusals: [] };
    for (let i = 0; i < 16; i++) {
      const host = ['github.com', 'api.github.com', 'chatgpt.com', 'ab.chatgpt.com'][i % 4]!;
      egress = withRefusal(egress, refusal({ host, time: `2026-12-02T10:00:${String(i).padStart(2, '0')}.000Z` }));
    }
    expect(egress.refusals.map((r) => [r.host, r.count, r.time.slice(17, 19)])).toEqual([
      ['github.com', 4, '12'],
      ['api.github.com', 4, '13'],
      ['chatgpt.com', 4, '14'],
      ['ab.chatgpt.com', 4, '15'],
    ]);
    // Another step is another row; a record from before counts had no count and counts as one.
    egress = withRefusal({ allowed: [], refusals: [refusal()] }, refusal({ step: 'test' }));
    expect(egress.refusals.map((r) => [r.step, r.count])).toEqual([['build', undefined], ['test', 1]]);
    expect(withRefusal(egress, refusal()).refusals.map((r) => [r.step, r.count])).toEqual([['test', 1], ['build', 2]]);
  });
});
