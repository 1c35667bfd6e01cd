// A task run N ways (issue 32). Way 1 is the preparation: it is seeded and set
// up like any task, and its setup freezes the repository's layer (disk and saved
// memory). Ways 2..N are tasks created at once but held (queued, no slot taken)
// until that preparation ends; then they boot from the layer, each with its own
// identity, proxy, placeholders and audit log, as parallel slots allow. A
// preparation that fails fails the held ways with its reason. The group is no
// record of its own: it is the tasks that carry its tag.
import { randomBytes } from 'node:crypto';
import type { FactoryEvent } from '../../common/contract.js';
import type { PullbackReview, Task } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import { FactoryError } from '../../common/errors.js';
import { compareWay, type FanoutComparison, type WaysDiff } from '../../common/fanout.js';
import type { ReviewConfirmationKind } from '../../common/review.js';
import type { Logger } from '../log/logger.js';
import type { CreateTaskInput } from '../tasks/task-service.js';

/** What the fan-out needs of the task service. */
export interface FanoutTasks {
  create(input: CreateTaskInput): Promise<Task>;
  list(): Task[];
  get(taskId: string): Task;
  review(taskId: string): Promise<PullbackReview>;
  /** The diff from one result in review to another. */
  diffResults(fromTaskId: string, toTaskId: string): Promise<WaysDiff['diff']>;
  approve(taskId: string, opts: { confirm?: readonly ReviewConfirmationKind[] }): Promise<Task>;
  reject(taskId: string): Promise<Task>;
  cancel(taskId: string): Promise<Task>;
  destroy(taskId: string): Promise<Task>;
}

export interface FanoutServiceDeps {
  tasks: FanoutTasks;
  /** The last leak check's verdict of a task's sandbox, or undefined when none ran. */
  leakVerdict?: (taskId: string) => Promise<string | undefined>;
  log: Pick<Logger, 'warn'>;
}

export interface FanoutInput {
  repoPath: string;
  title: string;
  ways: number;
  /** One agent for every way, or one per way; absent: the repository's or the default agent. */
  agents?: string[];
  baseRef?: string;
  egressApproval?: { rules: EgressRule[]; remember: boolean };
}

/** The preparation of a group still running: settles when way 1's setup has ended. */
interface Preparation {
  taskId: string;
  settle: (err?: Error) => void;
}

const ENDED = new Set(['review', 'approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed']);

export class FanoutService {
  private readonly preparations = new Map<string, Preparation>();
  /** Approved ways whose others are being or have been ended (by approve, or on seeing the approval). */
  private readonly decided = new Set<string>();

  constructor(private readonly deps: FanoutServiceDeps) {}

  async create(input: FanoutInput): Promise<FanoutComparison> {
    const { ways } = input;
    if (!Number.isInteger(ways) || ways < 1 || ways > 8) throw new FactoryError('InvalidInput', `ways: ${ways} is not a whole number from 1 to 8`);
    const agents = input.agents ?? [];
    if (agents.length > 1 && agents.length !== ways) {
      throw new FactoryError('InvalidInput', `agents: ${agents.length} agents named for ${ways} ways; name one agent for every way, or one for all`);
    }
    const group = `fan-${groupSuffix()}`;
    const agentOf = (way: number) => agents[agents.length === 1 ? 0 : way - 1];
    const base = {
      repoPath: input.repoPath,
      title: input.title,
      ...(input.baseRef ? { baseRef: input.baseRef } : {}),
      ...(input.egressApproval ? { egressApproval: input.egressApproval } : {}),
    };
    const withAgent = (way: number) => {
      const agent = agentOf(way);
      return agent ? { agent } : {};
    };
    // Way 1 is checked (repository, agent credential, QEMU) before anything else exists.
    const first = await this.deps.tasks.create({ ...base, ...withAgent(1), fanout: { group, way: 1, ways } });
    let settle: (err?: Error) => void = () => undefined;
    const prepared = new Promise<void>((resolve, reject) => {
      settle = (err) => (err ? reject(err) : resolve());
    });
    // Nobody may wait on it (one way, or every held way cancelled): its rejection is expected then.
    prepared.catch(() => undefined);
    this.preparations.set(group, { taskId: first.id, settle });
    this.check(group);
    try {
      for (let way = 2; way <= ways; way++) {
        await this.deps.tasks.create({ ...base, ...withAgent(way), fanout: { group, way, ways }, startGate: prepared });
      }
    } catch (err) {
      // A later way refused (its agent has no credential, say): nothing of the group goes on.
      await this.endAll(group).catch((e: unknown) => this.deps.log.warn('ending a fan-out whose creation failed', { group, err: e }));
      throw err;
    }
    return this.compare(group);
  }

  /**
   * Every task event: a preparation whose setup ended lets its held ways start; a way
   * approved on its own (its review's Approve, `factory approve`) ends the others as approve does.
   */
  onEvent(e: FactoryEvent): void {
    if (e.type !== 'task.updated' || !e.task.fanout) return;
    const group = e.task.fanout.group;
    this.check(group, e.task);
    if (e.task.phase === 'approved' && !this.decided.has(e.task.id)) {
      this.decided.add(e.task.id);
      void this.endAll(group, e.task.id).catch((err: unknown) => this.deps.log.warn('ending the other ways of an approved way failed', { group, err }));
    }
  }

  async compare(group: string): Promise<FanoutComparison> {
    const tasks = this.waysOf(group);
    const ways = await Promise.all(
      tasks.map(async (t) => {
        const review = ['review', 'approved', 'rejected'].includes(t.phase) ? await this.deps.tasks.review(t.id).catch(() => undefined) : undefined;
        const leak = await this.deps.leakVerdict?.(t.id).catch(() => undefined);
        return compareWay(t, review, leak);
      }),
    );
    return { group, title: tasks[0]!.title, repoPath: tasks[0]!.repoPath, ways };
  }

  /** What way `to` changed differently from way `from`: the diff between their results, both in review. */
  async diff(group: string, from: number, to: number): Promise<WaysDiff> {
    if (from === to) throw new FactoryError('InvalidInput', `the diff of way ${from} with itself is empty: pick two different ways`);
    const [a, b] = [this.wayTask(group, from), this.wayTask(group, to)];
    return { group, from, to, diff: await this.deps.tasks.diffResults(a.id, b.id) };
  }

  private wayTask(group: string, way: number): Task {
    const t = this.deps.tasks.list().find((x) => x.fanout?.group === group && x.fanout.way === way);
    if (!t) throw new FactoryError('NotFound', `${group} has no way ${way}`);
    return t;
  }

  /** Lands one way (its review's confirmations as usual), then ends every other way and destroys its sandbox. */
  async approve(group: string, way: number, confirm?: readonly ReviewConfirmationKind[]): Promise<FanoutComparison> {
    const tasks = this.waysOf(group);
    const chosen = tasks.find((t) => t.fanout?.way === way);
    if (!chosen) throw new FactoryError('NotFound', `fan-out ${group} has no way ${way} (it has ${tasks.length})`);
    if (chosen.phase !== 'review') throw new FactoryError('InvalidTransition', `way ${way} of ${group} is ${chosen.phase}, not in review; only a way in review can be approved`);
    // Its approval's event must not end the others a second time, beside this call.
    this.decided.add(chosen.id);
    try {
      await this.deps.tasks.approve(chosen.id, confirm ? { confirm } : {});
    } catch (err) {
      this.decided.delete(chosen.id);
      throw err;
    }
    await this.endAll(group, chosen.id);
    return this.compare(group);
  }

  async rejectAll(group: string): Promise<FanoutComparison> {
    this.waysOf(group);
    await this.endAll(group);
    return this.compare(group);
  }

  // ---------------------------------------------------------------------------

  private waysOf(group: string): Task[] {
    const tasks = this.deps.tasks
      .list()
      .filter((t) => t.fanout?.group === group)
      .sort((a, b) => a.fanout!.way - b.fanout!.way);
    if (!tasks.length) throw new FactoryError('NotFound', `no fan-out group ${group}`);
    return tasks;
  }

  /**
   * Every way but `keep`: in review, rejected (the keep-after-decision setting applies
   * there); still running or queued, cancelled; then its sandbox destroyed unless a
   * rejection keeps it for a while. Failed ways stay on the board with their failure.
   */
  private async endAll(group: string, keep?: string): Promise<void> {
    this.preparations.get(group)?.settle(new FactoryError('Cancelled', 'the other ways of this task were decided before this one started'));
    this.preparations.delete(group);
    for (const t of this.waysOf(group)) {
      if (t.id === keep || t.phase === 'approved' || t.phase === 'rejected') continue;
      if (t.phase === 'review') {
        const rejected = await this.deps.tasks.reject(t.id);
        // Rejected with a keep-after-decision deadline: the task's lifetime destroys it then. Without
        // one, the rejection has started destroying it; waiting on that (one destroy per task) means
        // the decision returns with the sandbox gone.
        if (!rejected.sandbox.keptUntil && hasSandbox(rejected)) await this.deps.tasks.destroy(t.id);
        continue;
      }
      if (!ENDED.has(t.phase)) await this.deps.tasks.cancel(t.id);
      const now = this.deps.tasks.get(t.id);
      if (!now.sandbox.keptUntil && hasSandbox(now)) await this.deps.tasks.destroy(t.id);
    }
  }

  /** Settles a group's preparation once way 1's setup has ended (passed or skipped: ready; else failed). */
  private check(group: string, updated?: Task): void {
    const prep = this.preparations.get(group);
    if (!prep) return;
    let task: Task;
    try {
      task = updated?.id === prep.taskId ? updated : this.deps.tasks.get(prep.taskId);
    } catch {
      return; // removed: endAll settles it
    }
    const setup = task.setup?.status;
    if (setup === 'passed' || setup === 'skipped') {
      this.preparations.delete(group);
      prep.settle();
    } else if (setup === 'failed' || setup === 'cancelled' || ENDED.has(task.phase)) {
      this.preparations.delete(group);
      const why = task.error ? `${task.error.name}: ${task.error.message}` : `way 1 is ${task.phase}`;
      prep.settle(new FactoryError('SetupFailed', `the preparation these ways boot from did not finish (${why})`));
    }
  }
}

/** A sandbox that is up, on its way up or down, or lost with leftovers: destroying it still does something. */
function hasSandbox(t: Task): boolean {
  return t.sandbox.status !== 'none' && t.sandbox.status !== 'destroyed';
}

function groupSuffix(): string {
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  return [...randomBytes(8)].map((b) => alphabet[b % alphabet.length]).join('');
}
