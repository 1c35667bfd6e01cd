// What the UI does, in one place: calls through the bridge and folds the
// answers and pushed events into the store. Components stay declarative.
import type { ApiInput, FactoryBridge } from '../../common/contract.js';
import type { CredentialSetInput, CredentialTestResult } from '../../common/credentials.js';
import type { StageName, Task, TerminalInfo } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import type { TaskPreflight } from '../../common/environment.js';
import type { ReviewConfirmationKind } from '../../common/review.js';
import { askNotificationPermission, notifyTaskChange } from './notifications.js';
import { applyEvent, MAX_AUDIT_ROWS, toErrorInfo, type Connection, type FactoryStore, type FocusTarget, type ReviewFileState, type View } from './store.js';

export class FactoryController {
  private readonly disposers: Array<() => void> = [];
  /** Quick sandboxes this window asked for: their shell opens here once they run. */
  private readonly quickShellPending = new Set<string>();

  constructor(
    readonly bridge: FactoryBridge,
    readonly store: FactoryStore,
  ) {}

  /** Subscribes to events and loads the first state; `connectionChanges` comes from the web transport. */
  start(connectionChanges?: (listener: (c: Connection) => void) => () => void): void {
    this.disposers.push(
      this.bridge.onEvent((e) => {
        const before = e.type === 'task.updated' ? this.store.getState().tasks[e.task.id] : undefined;
        applyEvent(this.store, e);
        this.afterEvent(e, before);
      }),
    );
    if (connectionChanges) {
      this.disposers.push(
        connectionChanges((c) => {
          const was = this.store.getState().connection;
          this.store.setState({ connection: c });
          // After a reconnect, events may have been missed: reload everything.
          if (c === 'open' && was !== 'open') void this.refresh();
        }),
      );
    } else {
      this.store.setState({ connection: 'open' });
      void this.refresh();
    }
  }

  dispose(): void {
    for (const d of this.disposers.splice(0)) d();
  }

  /** Notifications (web UI), and the shells of quick sandboxes. */
  private afterEvent(e: Parameters<typeof applyEvent>[1], before: Task | undefined): void {
    if (e.type === 'task.updated') {
      // In Electron the main process notifies (the desktop's own notifications).
      if (this.store.getState().status?.host === 'web') notifyTaskChange(before, e.task);
      const t = e.task;
      if (!this.quickShellPending.has(t.id)) return;
      if (t.phase === 'running' && t.sandbox.status === 'running') {
        this.quickShellPending.delete(t.id);
        void this.openShell(t.id);
      } else if (!['creating', 'provisioning', 'seeding', 'running'].includes(t.phase)) {
        this.quickShellPending.delete(t.id);
      }
    } else if (e.type === 'terminal.opened' && e.info.kind === 'shell' && e.info.taskId) {
      // A shell that opened while the sandbox boots (restored from a snapshot) is its shell: none opens at running.
      this.quickShellPending.delete(e.info.taskId);
      // A quick sandbox's shell opened elsewhere (the tray, the CLI) is shown, so the user sees where it went.
      const task = this.store.getState().tasks[e.info.taskId];
      if (task?.kind === 'quick' || task?.kind === 'agent') {
        this.select(e.info.taskId);
        this.selectTab(e.info.taskId, e.info.id);
      }
    }
  }

  /**
   * A quick sandbox (with the repository at `repoPath`, if given): selected at once,
   * its shell opened here when it runs. Closing that shell (exit) destroys it, unless
   * `keep`: then it stays until the user destroys it.
   */
  async quickSandbox(repoPath?: string, keep = false): Promise<Task> {
    askNotificationPermission();
    const task = await this.bridge.call('sandboxes.quick', { ...(repoPath ? { repoPath } : {}), ...(keep ? { keep: true } : {}) });
    const s = this.store.getState();
    // Its updates may have come before the answer: the newest known wins.
    this.store.setState({ tasks: { ...s.tasks, [task.id]: s.tasks[task.id] ?? task }, selectedTaskId: task.id });
    // Its shell may have opened before the answer (the event's reducer stored it): show that one.
    const early = Object.values(this.store.getState().terminals).find((t) => t.taskId === task.id && t.kind === 'shell');
    if (early) {
      this.selectTab(task.id, early.id);
      return task;
    }
    this.quickShellPending.add(task.id);
    const now = this.store.getState().tasks[task.id]!;
    if (now.phase === 'running' && now.sandbox.status === 'running') {
      this.quickShellPending.delete(task.id);
      void this.openShell(task.id);
    }
    return task;
  }

  /**
   * An agent session: the agent's own TUI in a fresh sandbox with the repository
   * (its terminal shows here once it runs); when the agent exits, its work goes to review.
   */
  async agentSession(repoPath: string, agent: 'claude-code' | 'codex', includeUncommitted = false): Promise<Task> {
    askNotificationPermission();
    const task = await this.bridge.call('sandboxes.agent', { agent, repoPath, ...(includeUncommitted ? { includeUncommitted: true } : {}), cols: 100, rows: 30 });
    const s = this.store.getState();
    this.store.setState({ tasks: { ...s.tasks, [task.id]: s.tasks[task.id] ?? task }, selectedTaskId: task.id });
    return task;
  }

  async refresh(): Promise<void> {
    await Promise.all([this.refreshStatus(), this.refreshTasks(), this.refreshTerminals(), this.refreshSettings()]);
  }

  async refreshSettings(): Promise<void> {
    try {
      this.store.setState({ settings: await this.bridge.call('settings.get', {}) });
    } catch {
      // Optional for the form: without settings it offers the plain "Default" choice.
    }
  }

  /** The agent new tasks get when neither the form nor the repository's pipeline.json chooses one. */
  async setDefaultAgent(agent: string): Promise<void> {
    try {
      this.store.setState({ settings: await this.bridge.call('settings.set', { defaultAgent: agent }), settingsError: undefined });
    } catch (err) {
      this.store.setState({ settingsError: toErrorInfo(err) });
    }
  }

  async refreshStatus(): Promise<void> {
    try {
      const status = await this.bridge.call('system.status', {});
      this.store.setState({ status, statusError: undefined });
    } catch (err) {
      this.store.setState({ statusError: toErrorInfo(err) });
    }
  }

  async refreshTasks(): Promise<void> {
    try {
      const list = await this.bridge.call('tasks.list', {});
      const tasks: Record<string, Task> = {};
      for (const t of list) tasks[t.id] = t;
      this.store.setState({ tasks });
    } catch (err) {
      this.store.setState({ statusError: toErrorInfo(err) });
    }
  }

  async refreshTerminals(): Promise<void> {
    try {
      const list = await this.bridge.call('terminal.list', {});
      const terminals = { ...this.store.getState().terminals };
      for (const t of list) terminals[t.id] = t;
      this.store.setState({ terminals });
    } catch {
      // Terminals are optional for the board; their tabs show their own errors.
    }
  }

  async buildImage(): Promise<void> {
    try {
      await this.bridge.call('image.ensure', {});
    } catch (err) {
      this.store.setState({ statusError: toErrorInfo(err) });
    } finally {
      void this.refreshStatus();
    }
  }

  /** Throws so the form can show the error where the user typed. */
  /** `agent` overrides the repo's .factory/pipeline.json and the default in settings; omit it to use those. */
  /** `allowPush` lets the sandbox push new branches under factory/<id>/ through the proxy; off unless the user ticks it. */
  /** `egressApproval`: the repository's egress requests the user allowed (none are added without it). */
  async createTask(
    repoPath: string,
    title: string,
    agent?: string,
    opts: { allowPush?: boolean; egressApproval?: { rules: EgressRule[]; remember: boolean }; host?: string } = {},
  ): Promise<Task> {
    askNotificationPermission();
    const task = await this.bridge.call('tasks.create', {
      repoPath,
      title,
      ...(agent ? { agent } : {}),
      ...(opts.allowPush ? { allowPush: true } : {}),
      ...(opts.egressApproval ? { egressApproval: opts.egressApproval } : {}),
      ...(opts.host ? { host: opts.host } : {}),
    });
    const s = this.store.getState();
    this.store.setState({ tasks: { ...s.tasks, [task.id]: task }, selectedTaskId: task.id });
    this.requestFocus('task-title', task.id);
    return task;
  }

  /** A task run N ways (common/fanout.ts): the ways join the board; the first is selected, with the comparison on top. */
  async createFanout(repoPath: string, title: string, ways: number, agent?: string, egressApproval?: { rules: EgressRule[]; remember: boolean }): Promise<void> {
    askNotificationPermission();
    const created = await this.bridge.call('fanout.create', { repoPath, title, ways, ...(agent ? { agents: [agent] } : {}), ...(egressApproval ? { egressApproval } : {}) });
    const tasks = await this.bridge.call('tasks.list', {});
    const s = this.store.getState();
    const mine = Object.fromEntries(tasks.filter((t) => t.fanout?.group === created.group).map((t) => [t.id, t]));
    const first = created.ways[0]!.taskId;
    this.store.setState({ tasks: { ...s.tasks, ...mine }, selectedTaskId: first });
    this.requestFocus('task-title', first);
  }

  select(taskId: string | undefined, tab?: string): void {
    const s = this.store.getState();
    this.store.setState({
      selectedTaskId: taskId,
      ...(taskId && tab ? { activeTab: { ...s.activeTab, [taskId]: tab } } : {}),
    });
  }

  /** The user picked a task on the board: show its view at the top of the window, focus on its title. */
  open(taskId: string, tab?: string): void {
    this.select(taskId, tab);
    this.requestFocus('task-title', taskId, { reveal: true });
  }

  selectTab(taskId: string, sessionId: string): void {
    const s = this.store.getState();
    this.store.setState({ activeTab: { ...s.activeTab, [taskId]: sessionId } });
  }

  async openShell(taskId: string, cols = 100, rows = 30): Promise<void> {
    await this.openTerminalTab(taskId, 'shell', () => this.bridge.call('terminal.openShell', { taskId, cols, rows }));
  }

  /** A shell on the host in the task's repository folder; only ever opened by this explicit request. */
  async openHostShell(taskId: string, cols = 100, rows = 30): Promise<void> {
    await this.openTerminalTab(taskId, 'host shell', () => this.bridge.call('terminal.openHostShell', { taskId, cols, rows }));
  }

  /** Opens a terminal session and shows it as the task's active tab. */
  private async openTerminalTab(taskId: string, what: string, open: () => Promise<TerminalInfo>): Promise<void> {
    await this.act(taskId, what, async () => {
      const info = await open();
      const s = this.store.getState();
      this.store.setState({
        terminals: { ...s.terminals, [info.id]: info },
        activeTab: { ...s.activeTab, [taskId]: info.id },
      });
    });
  }


  async loadReview(taskId: string): Promise<void> {
    await this.act(taskId, 'review', async () => {
      const review = await this.bridge.call('tasks.review', { taskId });
      this.store.setState({ reviews: { ...this.store.getState().reviews, [taskId]: review } });
    });
  }

  /**
   * `confirm` names the review's confirmations the user acknowledged in the
   * second step. When the host still asks for one (the review changed), the
   * error is shown and the review is loaded again so the user sees what it is.
   */
  async approve(taskId: string, confirm?: ReviewConfirmationKind[]): Promise<void> {
    await this.act(taskId, 'approve', async () => {
      try {
        this.upsert(await this.bridge.call('tasks.approve', { taskId, ...(confirm?.length ? { confirm } : {}) }));
        this.requestFocus('decision', taskId);
      } catch (err) {
        if (err instanceof Error && err.name === 'ApproveNeedsConfirmation') await this.reloadReview(taskId);
        throw err;
      }
    });
  }

  private async reloadReview(taskId: string): Promise<void> {
    try {
      const review = await this.bridge.call('tasks.review', { taskId });
      this.store.setState({ reviews: { ...this.store.getState().reviews, [taskId]: review } });
    } catch {
      // The approve error is what the user needs to see; the old review stays.
    }
  }

  /** One file of the review on its own (its patch, its leading bytes); asked once, kept. */
  async loadReviewFile(taskId: string, path: string): Promise<void> {
    const current = this.store.getState().reviewFiles[taskId]?.[path];
    if (current && current.state !== 'failed') return;
    const set = (v: ReviewFileState) => {
      const all = this.store.getState().reviewFiles;
      this.store.setState({ reviewFiles: { ...all, [taskId]: { ...all[taskId], [path]: v } } });
    };
    set({ state: 'loading' });
    try {
      set({ state: 'loaded', detail: await this.bridge.call('tasks.reviewFile', { taskId, path }) });
    } catch (err) {
      set({ state: 'failed', error: toErrorInfo(err) });
    }
  }

  async reject(taskId: string): Promise<void> {
    await this.act(taskId, 'reject', async () => {
      this.upsert(await this.bridge.call('tasks.reject', { taskId }));
      this.requestFocus('decision', taskId);
    });
  }

  async cancel(taskId: string): Promise<void> {
    await this.act(taskId, 'cancel', () => this.bridge.call('tasks.cancel', { taskId }).then((t) => this.upsert(t)));
  }

  async destroy(taskId: string): Promise<void> {
    await this.act(taskId, 'destroy', async () => {
      this.upsert(await this.bridge.call('tasks.destroy', { taskId }));
      // The Destroy button is disabled now: focus the line that says what happened.
      this.requestFocus('sandbox-status', taskId);
    });
  }

  /** Asks the element named `target` of the task's view to take focus once it is shown (useFocusRequest). */
  requestFocus(target: FocusTarget, taskId: string, opts: { reveal?: boolean } = {}): void {
    this.store.setState({ focusRequest: { target, taskId, n: (this.store.getState().focusRequest?.n ?? 0) + 1, ...opts } });
  }

  /** Called by the element that took the focus, so it is not taken again on its next render. */
  focusDone(n: number): void {
    if (this.store.getState().focusRequest?.n === n) this.store.setState({ focusRequest: undefined });
  }

  /** `overrideReview`: accept a change the review stage failed and go on with the next stage. */
  async retry(taskId: string, fromStage?: StageName, opts: { overrideReview?: boolean } = {}): Promise<void> {
    await this.act(taskId, 'retry', () =>
      this.bridge.call('tasks.retry', { taskId, ...(fromStage ? { fromStage } : {}), ...(opts.overrideReview ? { overrideReview: true } : {}) }).then((t) => this.upsert(t)),
    );
  }

  showView(view: View): void {
    this.store.setState({ view });
    // The screen asks again and shows its own error; this early load only saves a wait.
    if (view === 'credentials') void this.loadCredentials().catch(() => {});
  }

  /** What Start will do for a repository (environment, egress it asks for); throws so the form shows it where the user typed. */
  preflight(repoPath: string, baseRef?: string, agent?: string): Promise<TaskPreflight> {
    return this.bridge.call('tasks.preflight', { repoPath, ...(baseRef ? { baseRef } : {}), ...(agent ? { agent } : {}) });
  }

  /** Lets a task's sandbox reach a destination it was refused; throws so the refusal's row shows the error. */
  async allowEgress(taskId: string, rule: EgressRule, scope: 'task' | 'repository'): Promise<Task> {
    const task = await this.bridge.call('egress.allow', { taskId, rule, scope });
    this.upsert(task);
    return task;
  }

  /** One of a task's artifacts (plan, review); throws so the artifact's row shows the error. */
  artifact(taskId: string, name: string): Promise<{ name: string; text: string; truncated: boolean }> {
    return this.bridge.call('tasks.artifact', { taskId, name });
  }

  /**
   * A sandbox's samples so far (the view opened after it started); live ones arrive as
   * events. Samples that came in while this was asked are kept.
   */
  async loadStats(taskId: string): Promise<void> {
    try {
      const stats = await this.bridge.call('tasks.stats', { taskId });
      const s = this.store.getState();
      const seen = s.stats[taskId]?.samples ?? [];
      const after = seen.filter((x) => x.at > (stats.samples.at(-1)?.at ?? 0));
      this.store.setState({ stats: { ...s.stats, [taskId]: { ...stats, samples: [...stats.samples, ...after] } } });
    } catch {
      // A host without samples (an older one, or not Linux): the view shows none.
    }
  }

  /** Throws so the Environments screen can show the error. */
  async loadLayers(): Promise<void> {
    this.store.setState({ layers: await this.bridge.call('layers.list', {}) });
  }

  async removeLayer(id: string): Promise<void> {
    await this.bridge.call('layers.remove', { id });
    await this.loadLayers();
  }

  /** Saves some settings; throws (the host's refusal names the setting) so the screen that changed them shows it. */
  async saveSettings(change: ApiInput<'settings.set'>): Promise<void> {
    this.store.setState({ settings: await this.bridge.call('settings.set', change) });
  }

  /** Throws so the credentials screen can show the error where it happened. */
  async loadCredentials(): Promise<void> {
    this.store.setState({ credentials: await this.bridge.call('credentials.list', {}) });
  }

  /** The value is write-only: it goes to the host once and is never read back. */
  async saveCredential(input: CredentialSetInput): Promise<void> {
    await this.bridge.call('credentials.set', input);
    await this.loadCredentials();
  }

  async deleteCredential(id: string): Promise<void> {
    await this.bridge.call('credentials.delete', { id });
    await this.loadCredentials();
  }

  testCredential(id: string, callUpstream: boolean): Promise<CredentialTestResult> {
    return this.bridge.call('credentials.test', { id, callUpstream });
  }

  /** Audit log and last leak-check report of one sandbox. */
  async loadSecurity(taskId: string): Promise<void> {
    const [audit, report] = await Promise.all([
      this.bridge.call('audit.list', { sandboxId: taskId, limit: MAX_AUDIT_ROWS }),
      this.bridge.call('leakcheck.get', { taskId }),
    ]);
    const s = this.store.getState();
    this.store.setState({ audit: { ...s.audit, [taskId]: audit }, leakReports: { ...s.leakReports, [taskId]: report } });
  }

  async runLeakCheck(taskId: string): Promise<void> {
    await this.act(taskId, 'leak check', async () => {
      const report = await this.bridge.call('leakcheck.run', { taskId });
      this.store.setState({ leakReports: { ...this.store.getState().leakReports, [taskId]: report } });
    });
  }

  private upsert(task: Task): void {
    this.store.setState({ tasks: { ...this.store.getState().tasks, [task.id]: task } });
  }

  private async act(taskId: string, what: string, fn: () => Promise<void>): Promise<void> {
    const s = this.store.getState();
    this.store.setState({ busy: { ...s.busy, [taskId]: what }, actionErrors: { ...s.actionErrors, [taskId]: undefined } });
    try {
      await fn();
    } catch (err) {
      const st = this.store.getState();
      this.store.setState({ actionErrors: { ...st.actionErrors, [taskId]: { ...toErrorInfo(err), message: `${what}: ${toErrorInfo(err).message}` } } });
    } finally {
      const st = this.store.getState();
      this.store.setState({ busy: { ...st.busy, [taskId]: undefined } });
    }
  }
}
