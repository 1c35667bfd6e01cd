// `factory sandbox` against a scripted app: the client answers calls from the
// task it holds and pushes the events a test makes the sandbox go through, so
// when the shell opens (and how often it is asked for) is seen without a VM.
// The real app and VM are exercised by test/integration/quick-sandbox-cli.test.ts.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { FactoryEvent } from '../../../common/contract.js';
import type { Task, TerminalInfo } from '../../../common/domain.js';
import { Listeners } from '../../../common/listeners.js';
import type { FactoryClient, TerminalChunk } from '../../../main/cli/client.js';
import { cmdSandbox } from '../../../main/cli/sandbox-command.js';

const tick = (ms = 20) => new Promise((r) => setTimeout(r, ms));

class ScriptedApp {
  readonly events = new Listeners<FactoryEvent>();
  /** As the real client's: the attached terminal ends when the connection is lost (never here). */
  readonly disconnected = new Listeners<Error>();
  readonly terminal = new Listeners<TerminalChunk>();
  /** Each call with the task's phase when it came. */
  readonly calls: Array<{ method: string; input: any; phase: string }> = [];
  task: Task = {
    id: 'q1', title: 'quick sandbox', repoPath: '', baseRef: '', baseCommit: '', branch: 'factory/q1',
    createdAt: '2026-01-01T00:00:00.000Z', phase: 'creating', sandbox: { status: 'none' }, stages: [], kind: 'quick',
  };
  shell: TerminalInfo = { id: 's1', taskId: 'q1', kind: 'shell', title: 'shell', status: 'live', cols: 80, rows: 24 };

  /** `boot` runs once sandboxes.quick has answered: the sandbox's way to running. */
  constructor(private readonly boot: (app: ScriptedApp) => Promise<void>) {}

  async watch(): Promise<void> {}

  async call(method: string, input: any): Promise<unknown> {
    this.calls.push({ method, input, phase: this.task.phase });
    switch (method) {
      case 'sandboxes.quick':
        setTimeout(() => void this.boot(this), 0);
        return this.task;
      case 'tasks.get':
        return this.task;
      case 'tasks.list':
        return [this.task];
      case 'terminal.openShell':
        return this.shell;
      case 'terminal.attach':
        // The user exits the shell at once.
        setTimeout(() => this.events.emit({ type: 'terminal.status', info: { ...this.shell, status: 'exited', exitCode: 0 } }), 0);
        return { info: this.shell, scrollback: '' };
      default:
        return undefined;
    }
  }

  update(over: Partial<Task>): void {
    this.task = { ...this.task, ...over };
    this.events.emit({ type: 'task.updated', task: this.task });
  }

  openShells(): Array<{ input: any; phase: string }> {
    return this.calls.filter((c) => c.method === 'terminal.openShell');
  }
}

async function sandbox(app: ScriptedApp) {
  const stderr = new PassThrough();
  let err = '';
  stderr.on('data', (d) => (err += String(d)));
  const code = await cmdSandbox(app as unknown as FactoryClient, { stdout: new PassThrough(), stderr, json: false }, { keep: false });
  return { code, stderr: err };
}

describe('factory sandbox', () => {
  it('opens its shell once the sandbox runs when no shell opened before', async () => {
    const app = new ScriptedApp(async (a) => {
      a.update({ phase: 'provisioning', sandbox: { status: 'booting' } });
      await tick();
      a.update({ phase: 'running', sandbox: { status: 'running', bootMs: 1500 } });
    });
    const r = await sandbox(app);
    expect(r.code).toBe(0);
    expect(app.openShells().map((c) => [c.input.taskId, c.phase])).toEqual([['q1', 'running']]);
    expect(r.stderr).toContain('sandbox running (booted in 1.5 s); exit the shell to destroy it');
  });

  it('opens the shell the app opened while the sandbox boots, before it runs, and asks for it once', async () => {
    const app = new ScriptedApp(async (a) => {
      a.update({ phase: 'provisioning', sandbox: { status: 'booting', coldBootReason: 'restored from a snapshot' } });
      a.shell = { ...a.shell, id: 'early' };
      a.events.emit({ type: 'terminal.opened', info: a.shell });
      await tick(200);
      a.update({ phase: 'running', sandbox: { status: 'running' } });
    });
    const r = await sandbox(app);
    expect(r.code).toBe(0);
    expect(app.openShells().map((c) => [c.input.taskId, c.phase])).toEqual([['q1', 'provisioning']]);
    // The line says what is true then: not yet running.
    expect(r.stderr).toContain('shell ready; the sandbox is still starting; exit the shell to destroy it\nrestored from a snapshot\n');
    expect(r.stderr).not.toContain('sandbox running');
    expect(app.calls.filter((c) => c.method === 'terminal.attach').map((c) => c.input.sessionId)).toEqual(['early']);
  });

  it('takes no other task’s shell for its own, and says so when the sandbox fails', async () => {
    const app = new ScriptedApp(async (a) => {
      a.update({ phase: 'provisioning', sandbox: { status: 'booting' } });
      a.events.emit({ type: 'terminal.opened', info: { ...a.shell, id: 'other', taskId: 'q0' } });
      await tick();
      a.update({ phase: 'failed', sandbox: { status: 'none' }, error: { name: 'SandboxBootFailed', message: 'no boot' } });
    });
    await expect(sandbox(app)).rejects.toThrow('the quick sandbox q1 ended before its shell opened (failed): no boot');
    expect(app.openShells()).toEqual([]);
  });
});
