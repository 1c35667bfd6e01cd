// A FactoryApp-shaped app that plays a pipeline on timers, for fast UI checks in
// Chromium (CSP, token handling, escaping, the flow of the screens). The real
// app is driven by web-ui.test.ts; this one never boots a VM.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type FactoryApi, type FactoryEvent, type TerminalDataEvent } from '../../../common/contract.js';
import { FactoryError } from '../../../common/errors.js';
import { STAGE_NAMES, type KeychainStatus, type PullbackReview, type SessionCheck, type Task, type TerminalInfo } from '../../../common/domain.js';
import type { HostedApp } from '../../../main/host/hosted-app.js';
import { Listeners } from '../../../common/listeners.js';
import type { ReviewConfirmationKind } from '../../../common/review.js';
import { defaultEgressRules } from '../../../common/egress.js';
import type { LayerInfo } from '../../../common/environment.js';
import { SandboxStatsMonitor } from '../../../main/tasks/sandbox-stats.js';
import { attemptTitle, stageExitLine, stageHeader } from '../../../main/pipeline/stage-frame.js';
import { nextStepApi } from '../../../main/tasks/next-step-api.js';
import { FanoutService } from '../../../main/fanout/fanout-service.js';
import { agentHistory, HOSTILE_REVIEW, hostileFile, hostileReview, HUGE_REVIEW, hugeReview } from './scripted-reviews.js';

export const SCRIPTED_MARKER = 'FACTORY-SCRIPTED-MARKER';
/** In a task's title: its stages finish but its result comes back only on release(). */
export const HELD = '[held]';
/** In a task's title: its test stage fails with exit status 3. */
export const FAILS = '[fails]';
/** In the title of a task run N ways: that way's test stage fails (`[fails way 3]`); the others pass with counts. */
export const failsWay = (way: number) => `[fails way ${way}]`;
/** What each scripted stage "runs", as the header line of its terminal shows it. */
export const SCRIPTED_COMMANDS: Record<(typeof STAGE_NAMES)[number], string> = {
  request: 'cat "$FACTORY_TASK_FILE"', plan: 'make plan', build: 'make build', test: 'npm test', review: 'git diff --stat', document: 'make docs',
};
/**
 * What a task run by Claude Code prints in its build stage: the event stream the
 * real CLI printed (test/fixtures/agents), which the task view reads as a transcript.
 */
export const CLAUDE_STREAM = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/agents/claude-success.jsonl'), 'utf8');
export const HOSTILE_PATCH_LINE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">';

export class ScriptedApp implements HostedApp {
  readonly api: FactoryApi;
  private readonly events = new Listeners<FactoryEvent>();
  private readonly data = new Listeners<TerminalDataEvent>();
  private readonly tasks = new Map<string, Task>();
  private readonly terminals = new Map<string, TerminalInfo>();
  private readonly scrollback = new Map<string, string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private seq = 0;
  /** Every approval the app accepted, with the confirmations it named. */
  readonly approvals: Array<{ taskId: string; confirm?: ReviewConfirmationKind[] }> = [];
  /** Everything the UI wrote to each terminal session, as sent. */
  readonly written = new Map<string, string>();
  /** The environment layers layers.list answers (none unless a spec lists some). */
  layers: LayerInfo[] = [];
  /** What system.status says of the keychain (absent: nothing, as an older host); a spec sets it. */
  keychain?: KeychainStatus;
  /** The settings as settings.get answers (the web host validates settings.set with the real contract first). */
  readonly settings: Record<string, unknown> = {
    defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 1024, vmMemoryMaxMb: 4096, vmCpus: 2, terminalLogRetentionDays: 30,
    egressRules: defaultEgressRules(), layerBudgetGb: 20, guestTrustsHostCertificates: true,
    keepSandboxAfterDecisionMinutes: 0, editorCommand: 'code', warmPoolSize: 1, warmPoolMemoryBudgetMb: 0,
    agents: ['command', 'claude-code', 'codex'],
  };
  /** Every settings.set the host accepted, as received. */
  readonly settingsSaved: unknown[] = [];
  private monitor?: SandboxStatsMonitor;
  /** Per running sandbox, the real process the host's sampler measures in place of its QEMU. */
  private readonly standIns = new Map<string, ChildProcess>();
  /** Approve creates factory/<id> in the (real) repository, so the next steps run real git on it. */
  realBranches = false;
  /** As the setting keepSandboxAfterDecisionMinutes: 0 destroys the sandbox at the decision. */
  keepMinutes = 0;
  /** As the setting editorCommand: what "Open in editor" runs (a spec points it at a recording script). */
  editorCommand = 'no-editor-in-scripted-app';

  /**
   * @param stageMs how long each stage runs
   * @param chatterLines lines of output each stage prints while it runs, spread over its time
   */
  constructor(
    private readonly stageMs = 150,
    private readonly chatterLines = 0,
  ) {
    const handlers: Partial<Record<keyof FactoryApi, (input: any) => Promise<unknown>>> = {
      'system.status': async () => ({
        qemu: { ok: true, version: '7.2 (scripted)' },
        accel: 'tcg',
        image: { state: 'ready', version: 'scripted-1' },
        ...(this.keychain ? { keychain: this.keychain } : {}),
        dataDir: '/nonexistent',
        host: 'web',
      }),
      'tasks.list': async () => [...this.tasks.values()],
      'tasks.get': async ({ taskId }) => this.task(taskId),
      'tasks.create': async ({ repoPath, title, agent }) => this.create(repoPath, title, undefined, agent),
      // A task run N ways: the real fan-out service over these scripted tasks.
      'fanout.create': async (input) => this.fanout.create(input),
      'fanout.compare': async ({ group }) => this.fanout.compare(group),
      'fanout.approve': async ({ group, way, confirm }) => this.fanout.approve(group, way, confirm),
      'fanout.rejectAll': async ({ group }) => this.fanout.rejectAll(group),
      'fanout.diff': async ({ group, from, to }) => this.fanout.diff(group, from, to),
      // A repository with no environment and no egress requests: Start goes straight on.
      'tasks.preflight': async () => ({ source: 'none', lines: [], unsupported: [], egressRequests: [], cached: false }),
      'layers.list': async () => this.layers,
      'tasks.review': async ({ taskId }) => this.review(taskId),
      'tasks.reviewFile': async ({ taskId, path }) => {
        const file = this.task(taskId).title.includes(HOSTILE_REVIEW) ? hostileFile(path) : undefined;
        if (!file) throw new FactoryError('NotFound', `no file ${JSON.stringify(path)} in the review of ${taskId}`);
        return file;
      },
      'tasks.approve': async ({ taskId, confirm }) => {
        // As the real host: refused unless `confirm` names every confirmation kind of the review.
        const missing = this.review(taskId).confirmations.map((c) => c.kind).filter((k) => !confirm?.includes(k));
        if (missing.length) throw new FactoryError('ApproveNeedsConfirmation', `approving needs the user to confirm: ${[...new Set(missing)].join(', ')}`);
        this.approvals.push({ taskId, confirm });
        let commit = 'c0ffee00c0ffee00';
        if (this.realBranches) {
          // What the real approve leaves: the branch in the repository, HEAD and work tree untouched.
          const repo = this.task(taskId).repoPath;
          execFileSync('git', ['branch', `factory/${taskId}`], { cwd: repo });
          commit = execFileSync('git', ['rev-parse', `factory/${taskId}`], { cwd: repo }).toString().trim();
        }
        this.update(taskId, { phase: 'approved', decision: { kind: 'approved', at: new Date().toISOString(), branch: `factory/${taskId}`, commit } });
        return this.afterDecision(taskId);
      },
      'tasks.reject': async ({ taskId }) => {
        this.update(taskId, { phase: 'rejected', decision: { kind: 'rejected', at: new Date().toISOString() } });
        return this.afterDecision(taskId);
      },
      'tasks.archive': async ({ taskId, archived }) => {
        if (archived && ['provisioning', 'running'].includes(this.task(taskId).phase)) throw new FactoryError('TaskActive', `task ${taskId} is running; cancel it or let it finish before archiving it`);
        const { archivedAt: _was, ...rest } = this.task(taskId);
        this.tasks.set(taskId, rest);
        return this.update(taskId, archived ? { archivedAt: new Date().toISOString() } : {});
      },
      'tasks.remove': async ({ taskId }) => {
        if (['provisioning', 'running'].includes(this.task(taskId).phase)) throw new FactoryError('TaskActive', `task ${taskId} is running; cancel it before removing it`);
        this.tasks.delete(taskId);
        this.emit({ type: 'task.removed', taskId });
      },
      // The next steps are the host's own, on the real repository (realBranches).
      ...nextStepApi((taskId) => this.task(taskId), () => this.editorCommand),
      'tasks.cancel': async ({ taskId }) => this.update(taskId, { phase: 'cancelled' }),
      'tasks.destroy': async ({ taskId }) => this.update(taskId, { sandbox: { status: 'destroyed' } }),
      'tasks.retry': async ({ taskId }) => {
        this.update(taskId, { phase: 'running', error: undefined });
        this.runStage(taskId, STAGE_NAMES.indexOf('test'));
        return this.task(taskId);
      },
      // Credentials as references only, as the real broker lists them.
      'credentials.list': async () => [
        {
          id: 'anthropic-main', kind: 'anthropic', label: 'Anthropic (work)', target: { upstream: 'https://api.anthropic.com' },
          createdAt: '2025-01-02T03:04:05.000Z', updatedAt: '2025-01-02T03:04:05.000Z',
        },
      ],
      'settings.get': async () => ({ ...this.settings }),
      'settings.set': async (patch: Record<string, unknown>) => {
        this.settingsSaved.push(patch);
        Object.assign(this.settings, patch);
        return { ...this.settings };
      },
      'tasks.stats': async ({ taskId }) => {
        this.task(taskId);
        return this.monitor?.stats(taskId) ?? { taskId, intervalMs: 2000, live: false, samples: [] };
      },
      'audit.list': async () => [],
      'leakcheck.get': async () => null,
      'terminal.list': async ({ taskId }) => [...this.terminals.values()].filter((t) => !taskId || t.taskId === taskId),
      'terminal.attach': async ({ sessionId }) => {
        const info = this.terminals.get(sessionId);
        if (!info) throw new FactoryError('NotFound', `no terminal session ${sessionId}`);
        return { info, scrollback: Buffer.from(this.scrollback.get(sessionId) ?? '').toString('base64') };
      },
      'terminal.openShell': async ({ taskId, cols, rows }) => {
        this.task(taskId);
        const info = this.openTerminal(taskId, 'shell', 'shell', cols, rows);
        this.output(info.id, 'root@sandbox:/work/repo# ');
        return info;
      },
      'terminal.write': async ({ sessionId, data }) => this.typed(sessionId, data),
      'terminal.resize': async () => undefined,
      'terminal.ack': async () => undefined,
      'terminal.close': async () => undefined,
    };
    this.api = new Proxy({} as FactoryApi, {
      get: (_t, method: string) =>
        handlers[method as keyof FactoryApi] ??
        (async () => {
          throw FactoryError.carried('NotImplemented', `${method} is not scripted`);
        }),
    });
  }

  /** As the host after a decision: the sandbox destroyed, or kept until a deadline (keepMinutes). */
  private afterDecision(taskId: string): Task {
    const t = this.task(taskId);
    if (t.sandbox.status !== 'running') return t;
    if (this.keepMinutes > 0) return this.update(taskId, { sandbox: { ...t.sandbox, keptUntil: new Date(Date.now() + this.keepMinutes * 60_000).toISOString() } });
    this.update(taskId, { sandbox: { ...t.sandbox, status: 'stopping' } });
    this.later(this.stageMs, () => {
      const { keptUntil: _k, ...sandbox } = this.task(taskId).sandbox;
      this.update(taskId, { sandbox: { ...sandbox, status: 'destroyed' } });
    });
    return this.task(taskId);
  }

  /** Lets a task whose title says HELD, and whose stages are done, come back for review. */
  release(taskId: string): void {
    if (!this.held.delete(taskId)) throw new Error(`${taskId} is not held`);
    this.update(taskId, { phase: 'review' });
  }

  /**
   * A Claude Code session's sandbox (hooks mode) as the host records it, with one
   * subagent's sandbox nested under it: the session's turns checked clean, then a
   * leak, then a check that could not scan everything; the subagent's check clean
   * and its work merged. Both running, as while the session goes on.
   */
  addSession(repoPath: string): { sessionId: string; subagentId: string } {
    const at = (min: number) => new Date(Date.now() - (10 - min) * 60_000).toISOString();
    const MIB = 2 ** 20;
    const check = (turn: number, hook: SessionCheck['hook'], verdict: SessionCheck['verdict'], min: number, over: Partial<SessionCheck> = {}): SessionCheck => ({
      turn, hook, at: at(min), verdict, durationMs: 1400, scanned: { sources: 6, bytes: 40 * MIB, limited: [] }, findings: [], findingCount: 0, ...over,
    });
    const base = (id: string, title: string): Task => ({
      id, title, repoPath, baseRef: 'HEAD', baseCommit: 'abcdef0123456789', branch: `factory/${id}`, createdAt: new Date().toISOString(),
      phase: 'running', sandbox: { status: 'running', accel: 'tcg', bootMs: 1234 }, agent: 'claude-session',
      stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
    });
    const sessionId = `task-${++this.seq}`;
    this.tasks.set(sessionId, {
      ...base(sessionId, 'Claude Code session 5f0c2a'),
      session: {
        sessionId: '5f0c2a', turns: 3,
        checks: [
          check(1, 'Stop', 'clean', 1),
          check(2, 'Stop', 'leak', 3, { findings: [{ credentialId: 'anthropic-main', source: 'disk', encoding: 'base64' }], findingCount: 1 }),
          check(3, 'Stop', 'incomplete', 5, { scanned: { sources: 6, bytes: 512 * MIB, limited: [{ source: 'memory', reason: 'cap of 512 MiB reached' }] } }),
        ],
      },
    });
    this.update(sessionId, {});
    const subagentId = `task-${++this.seq}`;
    this.tasks.set(subagentId, {
      ...base(subagentId, 'Subagent ag1 of Claude Code session 5f0c2a'),
      session: {
        sessionId: '5f0c2a', turns: 0,
        checks: [check(2, 'SubagentStop', 'clean', 2)],
        subagent: { parentTaskId: sessionId, agentId: 'ag1', agentType: 'Explore', outcome: { kind: 'merged', branch: 'factory/ag1', commits: 2 } },
      },
    });
    this.update(subagentId, {});
    return { sessionId, subagentId };
  }

  /** Whether a HELD task finished its stages and waits for release(). */
  isHeld(taskId: string): boolean {
    return this.held.has(taskId);
  }

  onEvent(l: (e: FactoryEvent) => void) {
    return this.events.add(l);
  }
  onTerminalData(l: (e: TerminalDataEvent) => void) {
    return this.data.add(l);
  }
  async dispose() {
    for (const t of this.timers) clearTimeout(t);
    this.monitor?.dispose();
    for (const p of this.standIns.values()) p.kill('SIGKILL');
  }

  /**
   * From now on every sandbox that runs is measured by the host's real sampler
   * (main/tasks/sandbox-stats.ts) every `intervalMs`. There is no QEMU here: a
   * small node process that keeps one core about a third busy stands in for it.
   */
  sampleSandboxes(intervalMs = 500): void {
    this.monitor = new SandboxStatsMonitor({
      pidOf: (taskId) => this.standIns.get(taskId)?.pid,
      onSample: (taskId, sample, guestMemoryBytes) => this.emit({ type: 'sandbox.stats', taskId, sample, ...(guestMemoryBytes ? { guestMemoryBytes } : {}) }),
      intervalMs,
    });
  }

  private followSandbox(t: Task): void {
    if (!this.monitor) return;
    const proc = this.standIns.get(t.id);
    if (t.sandbox.status === 'running' && !proc) {
      const code = 'const keep = Buffer.alloc(64 << 20, 1); setInterval(() => { const s = Date.now(); while (Date.now() - s < 30) keep[0]++; }, 90)';
      this.standIns.set(t.id, spawn(process.execPath, ['-e', code, '--', '-m', '1024'], { stdio: 'ignore' }));
      this.monitor.watch(t.id);
    } else if (t.sandbox.status !== 'running' && proc) {
      proc.kill('SIGKILL');
      this.standIns.delete(t.id);
      this.monitor.stop(t.id);
    }
  }

  private emit(e: FactoryEvent) {
    this.events.emit(e);
  }

  private task(id: string): Task {
    const t = this.tasks.get(id);
    if (!t) throw new FactoryError('NotFound', `no task ${id}`);
    return t;
  }

  private update(id: string, patch: Partial<Task>): Task {
    const t = { ...this.task(id), ...patch };
    this.tasks.set(id, t);
    this.emit({ type: 'task.updated', task: t });
    this.followSandbox(t);
    return t;
  }

  private openTerminal(taskId: string, kind: TerminalInfo['kind'], title: string, cols = 100, rows = 30): TerminalInfo {
    const info: TerminalInfo = { id: `term-${++this.seq}`, taskId, kind, title, status: 'live', cols, rows };
    this.terminals.set(info.id, info);
    this.emit({ type: 'terminal.opened', info });
    return info;
  }

  private output(sessionId: string, text: string) {
    this.scrollback.set(sessionId, (this.scrollback.get(sessionId) ?? '') + text);
    const bytes = new TextEncoder().encode(text);
    this.data.emit({ sessionId, data: bytes });
  }

  private readonly lines = new Map<string, string>();
  private huge: ReturnType<typeof hugeReview> | undefined;
  private readonly held = new Set<string>();
  /** FAILS tasks whose test stage already failed once: a retry passes. */
  private readonly failedOnce = new Set<string>();

  /** A line-editing echo shell: echoes keys, answers each line on Enter. */
  private typed(sessionId: string, data: string) {
    this.written.set(sessionId, (this.written.get(sessionId) ?? '') + data);
    for (const ch of data) {
      if (ch === '\r') {
        const line = this.lines.get(sessionId) ?? '';
        this.lines.set(sessionId, '');
        this.output(sessionId, `\r\nyou typed: ${line}\r\nroot@sandbox:/work/repo# `);
      } else {
        this.lines.set(sessionId, (this.lines.get(sessionId) ?? '') + ch);
        this.output(sessionId, ch);
      }
    }
  }

  private later(ms: number, fn: () => void) {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private readonly fanout = new FanoutService({
    tasks: {
      create: async (input) => this.create(input.repoPath, input.title, input.fanout),
      list: () => [...this.tasks.values()],
      get: (taskId) => this.task(taskId),
      review: (taskId) => this.api['tasks.review']({ taskId }),
      // A stand-in for the quarantine's git diff (tested with real results in the unit tests): one way's added lines against the other's.
      diffResults: async (from, to) => ({ patch: scriptedWaysDiff(this.review(from).patch, this.review(to).patch, this.task(from).fanout?.way, this.task(to).fanout?.way), patchTruncated: false }),
      approve: (taskId, opts) => this.api['tasks.approve']({ taskId, ...(opts.confirm ? { confirm: [...opts.confirm] } : {}) }),
      reject: (taskId) => this.api['tasks.reject']({ taskId }),
      cancel: (taskId) => this.api['tasks.cancel']({ taskId }),
      destroy: (taskId) => this.api['tasks.destroy']({ taskId }),
    },
    log: { warn: () => undefined },
  });

  private create(repoPath: string, title: string, fanout?: Task['fanout'], agent?: string): Task {
    if (!existsSync(path.join(repoPath, '.git'))) {
      throw new FactoryError('NotAGitRepository', `${repoPath} is not a git repository`, 'git rev-parse: fatal: not a git repository');
    }
    const id = `task-${++this.seq}`;
    const task: Task = {
      id, title, repoPath, baseRef: 'HEAD', baseCommit: 'abcdef0123456789', branch: `factory/${id}`,
      createdAt: new Date().toISOString(), phase: 'provisioning', sandbox: { status: 'booting' },
      stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
      ...(fanout ? { fanout } : {}),
      ...(agent ? { agent } : {}),
    };
    this.tasks.set(id, task);
    this.later(this.stageMs, () => {
      this.update(id, { phase: 'running', sandbox: { status: 'running', accel: 'tcg', bootMs: 1234 } });
      this.runStage(id, 0);
    });
    return task;
  }

  private runStage(id: string, i: number) {
    if (i >= STAGE_NAMES.length) {
      if (this.task(id).title.includes(HELD)) this.held.add(id);
      else this.update(id, { phase: 'review' });
      return;
    }
    const name = STAGE_NAMES[i]!;
    // As the host's runner: each run of a stage is the next attempt, titled so from the second on.
    const attempt = (this.task(id).stages.find((s) => s.name === name)?.attempt ?? 0) + 1;
    const info = this.openTerminal(id, 'stage', attemptTitle(name, attempt));
    const set = (patch: object) =>
      this.update(id, { stages: this.task(id).stages.map((s) => (s.name === name ? { ...s, ...patch } : s)) });
    set({ status: 'running', sessionId: info.id, startedAt: new Date().toISOString(), attempt });
    // The host's header and exit lines, made by the same code the runner uses.
    this.output(info.id, stageHeader(SCRIPTED_COMMANDS[name]));
    const end = (code: number) => this.output(info.id, stageExitLine({ code, lost: false, timedOut: false, cancelled: false }));
    this.output(info.id, `\x1b[1m== ${name}\x1b[0m\r\n`);
    if (name === 'build') this.output(info.id, `${SCRIPTED_MARKER}\r\n`);
    if (name === 'build' && this.task(id).agent === 'claude-code') this.output(info.id, CLAUDE_STREAM.replace(/\r?\n/g, '\r\n'));
    for (let n = 0; n < this.chatterLines; n += 50) {
      const upTo = Math.min(n + 50, this.chatterLines);
      this.later((this.stageMs * n) / this.chatterLines, () => {
        let text = '';
        for (let k = n; k < upTo; k++) text += `${id} ${name} line ${k} ${'.'.repeat(60)}\r\n`;
        this.output(info.id, text);
      });
    }
    const way = this.task(id).fanout?.way;
    if (name === 'test' && (this.task(id).title.includes(FAILS) || (way !== undefined && this.task(id).title.includes(failsWay(way)))) && !this.failedOnce.has(id)) {
      this.failedOnce.add(id);
      this.later(this.stageMs, () => {
        // Coloured as a test runner prints it: the terminal must keep ANSI red and grey readable (4.5:1).
        this.output(info.id, 'npm test\r\n\x1b[32m  3 passing\x1b[0m\r\n\x1b[31m  1 failing\x1b[0m\r\n\x1b[90m    at Context.<anonymous> (test/add.test.js:7:12)\x1b[0m\r\n');
        end(3);
        this.terminals.set(info.id, { ...info, status: 'exited', exitCode: 3 });
        this.emit({ type: 'terminal.status', info: this.terminals.get(info.id)! });
        set({ status: 'failed', exitCode: 3, summary: way !== undefined ? '3 passed, 1 failed: adds numbers' : '1 failing', durationMs: this.stageMs, endedAt: new Date().toISOString() });
        this.update(id, { phase: 'failed', error: { name: 'StageFailed', message: 'stage test exited with status 3' } });
      });
      return;
    }
    this.later(this.stageMs, () => {
      end(0);
      this.terminals.set(info.id, { ...info, status: 'exited', exitCode: 0 });
      this.emit({ type: 'terminal.status', info: this.terminals.get(info.id)! });
      // A way's test stage says its counts, as a real runner's line does.
      set({ status: 'passed', exitCode: 0, durationMs: this.stageMs, endedAt: new Date().toISOString(), ...(name === 'test' && way !== undefined ? { summary: `${3 + way} passed` } : {}) });
      this.runStage(id, i + 1);
    });
  }

  /** The review a task's title asks for: a huge one, a hostile one, or the small default. */
  private review(id: string): PullbackReview {
    const t = this.task(id);
    const ids = { taskId: id, branch: t.branch, baseCommit: t.baseCommit, headCommit: '0123456789abcdef' };
    if (t.title.includes(HUGE_REVIEW)) return { ...ids, ...(this.huge ??= hugeReview()) };
    if (t.title.includes(HOSTILE_REVIEW)) return { ...ids, ...hostileReview() };
    return {
      taskId: id, branch: t.branch, baseCommit: t.baseCommit, headCommit: '0123456789abcdef',
      files: [{ path: 'hello.txt', status: 'modified', added: 2, removed: 1, binary: false }],
      added: 2, removed: 1,
      patch: [
        'diff --git a/hello.txt b/hello.txt',
        '--- a/hello.txt',
        '+++ b/hello.txt',
        '@@ -1 +1,2 @@',
        '-hello',
        '+hello, factory',
        `+${HOSTILE_PATCH_LINE}`,
      ].join('\n'),
      patchTruncated: false, bundleBytes: 812,
      checks: [{ name: 'bundle verify', ok: true, message: 'only refs/heads/' + t.branch }],
      filesOmitted: 0, flags: [], secrets: [], confirmations: [], history: agentHistory(),
    };
  }
}

/** The scripted diff between two ways: each way's added lines (marked with its way) as one file's change. */
function scriptedWaysDiff(fromPatch: string, toPatch: string, fromWay = 1, toWay = 2): string {
  const added = (patch: string, way: number) => patch.split('\n').filter((l) => l.startsWith('+') && !l.startsWith('+++')).map((l) => `${l} (way ${way})`);
  const minus = added(fromPatch, fromWay).map((l) => `-${l.slice(1)}`);
  const plus = added(toPatch, toWay);
  return ['diff --git a/hello.txt b/hello.txt', '--- a/hello.txt', '+++ b/hello.txt', `@@ -1,${minus.length} +1,${plus.length} @@`, ...minus, ...plus, ''].join('\n');
}
