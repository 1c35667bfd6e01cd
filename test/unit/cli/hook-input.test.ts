// What `factory hook ...` accepts on stdin: Claude Code's hook input. Anything
// else — not JSON, a session id that could name a path, a missing cwd, a flood —
// is refused with the field named, before the app is asked anything.
import { describe, expect, it } from 'vitest';
import { parseHookInput, sessionContext } from '../../../main/cli/hooks/hook-commands.js';
import type { Task } from '../../../common/domain.js';

const ok = { session_id: 'd0019866-7667-40ec-bf11-2f6c84cccf7a', transcript_path: '/h/x.jsonl', cwd: '/r/repo', hook_event_name: 'SessionStart', source: 'startup' };

describe('the hook input', () => {
  it("reads Claude Code's SessionStart and Stop input, ignoring fields it does not use", () => {
    expect(parseHookInput(Buffer.from(JSON.stringify(ok)))).toMatchObject({ session_id: ok.session_id, cwd: '/r/repo', source: 'startup' });
    const stop = { ...ok, hook_event_name: 'Stop', stop_hook_active: true, last_assistant_message: 'done', background_tasks: [] };
    expect(parseHookInput(Buffer.from(JSON.stringify(stop))).stop_hook_active).toBe(true);
  });

  it.each([
    ['not JSON', 'session_id=abc', /not JSON/],
    ['an empty stdin', '', /not JSON/],
    ['a session id that walks out of a folder', JSON.stringify({ ...ok, session_id: '../../etc' }), /session_id: must be 1 to 128 letters/],
    ['a session id with a newline', JSON.stringify({ ...ok, session_id: 'a\nb' }), /session_id/],
    ['no cwd', JSON.stringify({ session_id: 'abc' }), /cwd/],
    ['a number for the session id', JSON.stringify({ ...ok, session_id: 7 }), /session_id/],
  ])('refuses %s, naming the problem', (_what, text, message) => {
    expect(() => parseHookInput(Buffer.from(text))).toThrow(message);
    try {
      parseHookInput(Buffer.from(text));
    } catch (err) {
      expect((err as Error).name).toBe('HookInputInvalid');
    }
  });

  it('refuses a flood of input', () => {
    const big = Buffer.from(JSON.stringify({ ...ok, pad: 'x'.repeat(2 * 1024 * 1024) }));
    expect(() => parseHookInput(big)).toThrow(/larger than/);
  });
});

describe('the context the session receives', () => {
  it('says how to run commands in the sandbox and how the work comes back', () => {
    const text = sessionContext({ id: 'q26rg9b4', baseCommit: 'a'.repeat(40), branch: 'factory/q26rg9b4' } as Task, false);
    expect(text).toContain('Every command you run with the Bash tool runs in that sandbox');
    expect(text).toContain('factory diff q26rg9b4');
    expect(text).toContain('approves it into a branch');
  });
});
