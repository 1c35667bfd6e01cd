// The Claude Code session hooks fail closed, as Claude Code runs them: the CLI
// (`factory hook stop|session-end`, hook input on stdin) against a scripted app
// whose sessions are the real session service over a recording task service.
// Only a leak check that completed and found nothing exits 0; a check that
// could not scan everything, one that threw, or an app that cannot be reached
// exits 2 with what happened on stderr, and the sandbox is not destroyed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LeakReport } from '../../../common/credentials.js';
import type { Task } from '../../../common/domain.js';
import type { FactoryClient } from '../../../main/cli/client.js';
import { hookDeadlineMs } from '../../../main/cli/hooks/hook-events.js';
import { withDeadline } from '../../../main/cli/hooks/hook-commands.js';
import { runCli } from '../../../main/cli/run-cli.js';
import { SessionHoldExecutor } from '../../../main/sessions/session-hold.js';
import { SessionService } from '../../../main/sessions/session-service.js';
import { SessionStore } from '../../../main/sessions/session-store.js';

let dir: string;
let calls: string[];
/** What the next leak check does: a verdict, or an error it throws. */
let nextCheck: LeakReport['verdict'] | Error;
let store: SessionStore;
let service: SessionService;

const task = (id: string) => ({ id, phase: 'running', sandbox: { status: 'running' } }) as unknown as Task;
const report = (verdict: LeakReport['verdict']): LeakReport =>
  ({
    verdict,
    hits: [],
    scanned: verdict === 'incomplete' ? [{ source: 'memory', error: 'the scan stopped at its cap of 4 GiB inflated (compressed data filled the memory)' }] : [],
    credentialIds: [],
    sandboxId: 'vm1',
    at: '',
    durationMs: 0,
  }) as unknown as LeakReport;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hooks-fail-closed-'));
  calls = [];
  nextCheck = 'clean';
  store = new SessionStore(path.join(dir, 'sessions.json'));
  await store.put({ sessionId: 's1', taskId: 't1', repoPath: '/r', createdAt: '', state: 'active' });
  service = new SessionService({
    store,
    hold: new SessionHoldExecutor(),
    graceMs: 0,
    log: { info: () => {}, warn: () => {} },
    ports: {
      createTask: async () => task('t1'),
      getTask: (id) => task(id),
      cancelTask: async (id) => (calls.push(`cancel ${id}`), task(id)),
      destroyTask: async (id) => (calls.push(`destroy ${id}`), task(id)),
      sandboxSsh: () => {
        throw new Error('this test runs no command in a sandbox');
      },
      noteSession: async () => undefined,
      leakCheck: async (id) => {
        calls.push(`leakcheck ${id}`);
        if (nextCheck instanceof Error) throw nextCheck;
        return report(nextCheck);
      },
    },
  });
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The app as the hook reaches it over its socket: the session calls, answered by the real session service. */
function scriptedApp(): FactoryClient {
  return {
    call: async (method: string, input: { sessionId: string }) => {
      if (method === 'sessions.check') return service.check(input.sessionId);
      if (method === 'sessions.end') return service.end(input.sessionId);
      throw new Error(`unexpected call ${method}`);
    },
    close: () => {},
  } as unknown as FactoryClient;
}

function sink() {
  let text = '';
  const stream = new Writable({ write: (c: Buffer, _e, cb) => ((text += c.toString('utf8')), cb()) });
  return { stream, text: () => text };
}

/** Claude Code runs the hook: its JSON on stdin, our exit status and stderr back. */
async function hook(which: 'stop' | 'session-end', opts: { connect?: () => Promise<FactoryClient>; args?: string[] } = {}) {
  const out = sink();
  const err = sink();
  const stdin = Readable.from([Buffer.from(JSON.stringify({ session_id: 's1', cwd: '/r', hook_event_name: which }))]);
  const code = await runCli([...(opts.args ?? []), 'hook', which], { stdout: out.stream, stderr: err.stream, stdin }, { connect: opts.connect ?? (async () => scriptedApp()) });
  return { code, stdout: out.text(), stderr: err.text() };
}

describe('the session hooks fail closed', () => {
  it('a clean check passes: Stop exits 0, SessionEnd exits 0 and destroys the sandbox', async () => {
    const stop = await hook('stop');
    expect([stop.code, stop.stderr]).toEqual([0, '']);
    const end = await hook('session-end');
    expect(end.code, end.stderr).toBe(0);
    expect(calls).toEqual(['leakcheck t1', 'leakcheck t1', 'destroy t1']);
  });

  it('a check that exceeded its caps blocks Stop (exit 2, saying so) and keeps the sandbox through SessionEnd', async () => {
    nextCheck = 'incomplete';
    const stop = await hook('stop');
    expect(stop.code).toBe(2);
    expect(stop.stderr).toContain('could not scan everything (memory: the scan stopped at its cap');
    expect(stop.stderr).toContain('kept for inspection');
    expect(store.get('s1')?.state).toBe('quarantined');
    // The guest looks clean by the time the session ends: the earlier check still keeps the sandbox.
    nextCheck = 'clean';
    const end = await hook('session-end');
    expect(end.code).toBe(2);
    expect(end.stderr).toContain('kept for inspection: an earlier leak check of this session was not clean');
    expect(calls.filter((c) => c.startsWith('destroy'))).toEqual([]);
  });

  it('SessionEnd whose own check exceeded its caps exits 2 and does not destroy the sandbox', async () => {
    nextCheck = 'incomplete';
    const end = await hook('session-end');
    expect(end.code).toBe(2);
    expect(end.stderr).toContain('LEAK CHECK INCOMPLETE');
    expect(calls).toEqual(['leakcheck t1', 'cancel t1']);
    expect(store.get('s1')?.state).toBe('quarantined');
  });

  it('a check that threw exits 2 naming the error, on Stop and on SessionEnd, and nothing is destroyed', async () => {
    nextCheck = new Error('the guest stopped answering the scan');
    const stop = await hook('stop');
    expect(stop.code).toBe(2);
    expect(stop.stderr).toContain('could not complete the leak check');
    expect(stop.stderr).toContain('the guest stopped answering the scan');
    const end = await hook('session-end');
    expect(end.code).toBe(2);
    expect(end.stderr).toContain('the guest stopped answering the scan');
    expect(end.stderr).toContain('the sandbox was not destroyed');
    expect(calls.filter((c) => c.startsWith('destroy'))).toEqual([]);
    expect(store.get('s1')?.state).toBe('quarantined');
  });

  it('an app that cannot be reached exits 2 saying so, on Stop and on SessionEnd', async () => {
    const empty = path.join(dir, 'no-app');
    for (const which of ['stop', 'session-end'] as const) {
      // The real launcher, told not to start an app, on a data folder where none runs.
      const err = sink();
      const code = await runCli(['--data-dir', empty, '--no-start', 'hook', which], { stdout: sink().stream, stderr: err.stream });
      const stderr = err.text();
      expect(code, stderr).toBe(2);
      expect(stderr).toContain(`the ${which} hook could not complete the leak check`);
      expect(stderr).toContain('AppNotRunning');
      expect(stderr).toContain('The app could not be reached, so nothing was checked');
    }
    expect(calls).toEqual([]);
  });

  it('a hook input that is not Claude Code\'s exits 2 too', async () => {
    const err = sink();
    const code = await runCli(['hook', 'stop'], { stdout: sink().stream, stderr: err.stream, stdin: Readable.from([Buffer.from('not json')]) }, { connect: async () => scriptedApp() });
    expect(code).toBe(2);
    expect(err.text()).toContain('HookInputInvalid');
  });

  it('gives up before Claude Code would kill it, saying it had no answer', async () => {
    await expect(withDeadline(new Promise(() => {}), 50, 'stop')).rejects.toMatchObject({ name: 'HookTimeout', message: 'no answer from the app within 0 s' });
    // Under Claude Code's limits: the settings' timeout, and SessionEnd's own (60 s unless raised).
    expect(hookDeadlineMs('stop', {})).toBe(280_000);
    expect(hookDeadlineMs('session-end', {})).toBe(45_000);
    expect(hookDeadlineMs('session-end', { CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS: '600000' })).toBe(580_000);
  });
});
