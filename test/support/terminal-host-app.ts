// A HostedApp whose terminal methods are the real TerminalService and whose one
// task exists only to give the real UI a terminal pane: the terminal flood test
// and benchmark drive real sources (a host pty or a sandbox's SSH channel)
// through the real web host into the real renderer in Chromium.
import { type FactoryApi, type FactoryEvent, type TerminalDataEvent } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type Task, type TerminalInfo } from '../../common/domain.js';
import type { HostedApp } from '../../main/host/hosted-app.js';
import { TerminalService, type TerminalServiceOptions } from '../../main/terminal/terminal-service.js';
import type { TerminalSource } from '../../main/terminal/types.js';
import { Listeners } from '../../common/listeners.js';

export const TERMINAL_TASK_ID = 'task-terminal';

export interface TerminalHostAppOptions {
  logDir: string;
  /** Source for the "Shell" button. */
  openShell: (cols: number, rows: number) => Promise<TerminalSource>;
  service?: Partial<TerminalServiceOptions>;
}

export class TerminalHostApp implements HostedApp {
  readonly api: FactoryApi;
  readonly terminals: TerminalService;
  private readonly events = new Listeners<FactoryEvent>();
  private readonly data = new Listeners<TerminalDataEvent>();
  private task: Task;

  constructor(opts: TerminalHostAppOptions) {
    this.terminals = new TerminalService({
      logDir: opts.logDir,
      emit: (e) => this.events.emit(e),
      emitData: (e) => this.data.emit(e),
      ...(opts.service ? { options: opts.service } : {}),
    });
    this.task = {
      id: TERMINAL_TASK_ID,
      title: 'terminal checks',
      repoPath: '/nonexistent',
      baseRef: 'HEAD',
      baseCommit: '0000000000000000',
      branch: `factory/${TERMINAL_TASK_ID}`,
      createdAt: new Date().toISOString(),
      phase: 'running',
      sandbox: { status: 'running', accel: 'tcg' },
      stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
    };
    const t = this.terminals;
    const handlers: Partial<Record<keyof FactoryApi, (input: any) => Promise<unknown>>> = {
      'system.status': async () => ({
        qemu: { ok: true, version: 'test' },
        accel: 'tcg',
        image: { state: 'ready', version: 'test' },
        dataDir: '/nonexistent',
        host: 'web',
      }),
      'tasks.list': async () => [this.task],
      'tasks.get': async ({ taskId }) => this.get(taskId),
      'terminal.list': async ({ taskId }) => t.list(taskId),
      'terminal.openShell': async ({ taskId, cols, rows }) => {
        this.get(taskId);
        return t.register({ taskId, kind: 'shell', title: 'shell', cols, rows, source: await opts.openShell(cols, rows) });
      },
      'terminal.attach': async ({ sessionId }) => t.attach(sessionId),
      'terminal.write': async ({ sessionId, data }) => t.write(sessionId, data),
      'terminal.resize': async ({ sessionId, cols, rows }) => t.resize(sessionId, cols, rows),
      'terminal.ack': async ({ sessionId, bytes }) => t.ack(sessionId, bytes),
      'terminal.close': async ({ sessionId }) => t.close(sessionId),
    };
    this.api = new Proxy({} as FactoryApi, {
      get: (_t, method: string) =>
        handlers[method as keyof FactoryApi] ??
        (async () => {
          throw FactoryError.carried('NotImplemented', `${method} is not part of the terminal test app`);
        }),
    });
  }

  /** Runs a source as the task's "build" stage; the UI's pane follows the running stage. */
  runStage(source: TerminalSource, title = 'build', size = { cols: 120, rows: 30 }): TerminalInfo {
    const info = this.terminals.register({ taskId: TERMINAL_TASK_ID, kind: 'stage', title, ...size, source });
    this.setStage('build', { status: 'running', sessionId: info.id, startedAt: new Date().toISOString() });
    void this.terminals.waitForExit(info.id).then(({ code }) => {
      this.setStage('build', { status: code === 0 ? 'passed' : 'failed', exitCode: code, endedAt: new Date().toISOString() });
    });
    return info;
  }

  onEvent(l: (e: FactoryEvent) => void) {
    return this.events.add(l);
  }
  onTerminalData(l: (e: TerminalDataEvent) => void) {
    return this.data.add(l);
  }
  async dispose() {
    await this.terminals.dispose();
  }

  private get(taskId: string): Task {
    if (taskId !== TERMINAL_TASK_ID) throw new FactoryError('NotFound', `no task ${taskId}`);
    return this.task;
  }

  private setStage(name: string, patch: Partial<Task['stages'][number]>) {
    this.task = { ...this.task, stages: this.task.stages.map((s) => (s.name === name ? { ...s, ...patch } : s)) };
    this.events.emit({ type: 'task.updated', task: this.task });
  }
}
