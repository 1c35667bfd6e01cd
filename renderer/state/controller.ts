// What the UI does, in one place: calls through the bridge and folds the
// answers and pushed events into the store. Components stay declarative.
import type { FactoryBridge } from '../../common/contract.js';
import type { Task } from '../../common/domain.js';
import { applyEvent, toErrorInfo, type Connection, type FactoryStore } from './store.js';

export class FactoryController {
  private readonly disposers: Array<() => void> = [];

  constructor(
    readonly bridge: FactoryBridge,
    readonly store: FactoryStore,
  ) {}

  /** Subscribes to events and loads the first state; `connectionChanges` comes from the web transport. */
  start(connectionChanges?: (listener: (c: Connection) => void) => () => void): void {
    this.disposers.push(this.bridge.onEvent((e) => applyEvent(this.store, e)));
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

  async refresh(): Promise<void> {
    await Promise.all([this.refreshStatus(), this.refreshTasks(), this.refreshTerminals()]);
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
  async createTask(repoPath: string, title: string): Promise<Task> {
    const task = await this.bridge.call('tasks.create', { repoPath, title });
    const s = this.store.getState();
    this.store.setState({ tasks: { ...s.tasks, [task.id]: task }, selectedTaskId: task.id });
    return task;
  }

  select(taskId: string | undefined, tab?: string): void {
    const s = this.store.getState();
    this.store.setState({
      selectedTaskId: taskId,
      ...(taskId && tab ? { activeTab: { ...s.activeTab, [taskId]: tab } } : {}),
    });
  }

  selectTab(taskId: string, sessionId: string): void {
    const s = this.store.getState();
    this.store.setState({ activeTab: { ...s.activeTab, [taskId]: sessionId } });
  }

  async openShell(taskId: string, cols = 100, rows = 30): Promise<void> {
    await this.act(taskId, 'shell', async () => {
      const info = await this.bridge.call('terminal.openShell', { taskId, cols, rows });
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

  async approve(taskId: string): Promise<void> {
    await this.act(taskId, 'approve', () => this.bridge.call('tasks.approve', { taskId }).then((t) => this.upsert(t)));
  }

  async reject(taskId: string): Promise<void> {
    await this.act(taskId, 'reject', () => this.bridge.call('tasks.reject', { taskId }).then((t) => this.upsert(t)));
  }

  async cancel(taskId: string): Promise<void> {
    await this.act(taskId, 'cancel', () => this.bridge.call('tasks.cancel', { taskId }).then((t) => this.upsert(t)));
  }

  async destroy(taskId: string): Promise<void> {
    await this.act(taskId, 'destroy', () => this.bridge.call('tasks.destroy', { taskId }).then((t) => this.upsert(t)));
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
