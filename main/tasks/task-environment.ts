// A task's environment on the host side: the plan made at Start (kept with the
// task so a retry uses the same), the egress its sandbox starts with (the user's
// defaults, what the user allowed for the repository, what the user approved of
// the repository's own requests), and the cached layer it may boot on.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { type RepoEgressRules } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { EnvironmentSource, SetupInfo, Task, TaskEgress } from '../../common/domain.js';
import { EgressRule, type EgressRefusal } from '../../common/egress.js';
import { checkEgressRules } from '../credentials/egress-policy.js';
import type { LayerInfo, TaskPreflight } from '../../common/environment.js';
import type { PipelineConfig } from '../pipeline/config.js';
import type { Settings } from '../state/settings.js';
import { writeFileAtomic } from '../state/state-store.js';
import type { EgressControlPort, EnvironmentPlanPort, LayerPort, LayerStorePort, PlanEnvironment } from './environment-ports.js';

const MAX_REFUSALS = 50;

const StoredPlan = z.object({
  source: z.enum(['pipeline.json', 'devcontainer.json', 'detected', 'none']),
  summary: z.array(z.string()),
  steps: z.array(z.object({ name: z.string(), user: z.enum(['root', 'agent']), script: z.string(), display: z.string(), timeoutSeconds: z.number() })),
  env: z.record(z.string(), z.string()),
  egressRequests: z.array(EgressRule),
  unsupported: z.array(z.string()),
  cacheKey: z.string(),
  commit: z.string().optional(),
  tree: z.string().optional(),
  installDirs: z.array(z.string()).optional(),
  memoryMb: z.number().int().min(256).max(65536).optional(),
});

export interface TaskEnvironmentDeps {
  planEnvironment: PlanEnvironment;
  layers: LayerStorePort;
  egress: EgressControlPort;
  settings: () => Settings;
  setSettings: (patch: Partial<Settings>) => Settings;
  imageVersion: () => string;
  workDir: (taskId: string) => string;
}

/** Two rules name the same destination and scope (address ranges included: they widen where a host may resolve to). */
function sameRule(a: EgressRule, b: EgressRule): boolean {
  const sorted = (x?: string[]) => [...(x ?? [])].sort();
  const norm = (r: EgressRule) => JSON.stringify([r.scheme, r.host, r.port, sorted(r.methods), sorted(r.pathPrefixes), sorted(r.steps), sorted(r.addresses)]);
  return norm(a) === norm(b);
}

function describe(rule: EgressRule): string {
  return `${rule.scheme}://${rule.host}:${rule.port}`;
}

export class TaskEnvironment {
  constructor(private readonly deps: TaskEnvironmentDeps) {}

  plan(repoPath: string, commit: string, config: PipelineConfig): Promise<EnvironmentPlanPort> {
    const s = this.deps.settings();
    return this.deps.planEnvironment({ repoPath, commit, config, imageVersion: this.deps.imageVersion(), memory: { defaultMb: s.vmMemoryMb, maxMb: s.vmMemoryMaxMb } });
  }

  async preflight(repoPath: string, plan: EnvironmentPlanPort): Promise<TaskPreflight> {
    const always = this.deps.settings().repoEgress[repoPath] ?? [];
    // A layer store that cannot answer here means "not cached": Start sets up, and says why if the store still fails then.
    const cached = plan.steps.length > 0 && !!plan.tree && !!(await this.deps.layers.find(plan.cacheKey).catch(() => undefined));
    return {
      source: plan.source,
      lines: plan.summary,
      unsupported: plan.unsupported,
      egressRequests: plan.egressRequests.map((rule) => ({ rule, allowedAlways: always.some((r) => sameRule(r, rule)) })),
      cached,
    };
  }

  /**
   * At create: the user's approval may only name rules the repository asked for
   * (anything else is refused by name); remembered ones go to the repository's
   * list in the settings. Returns what the task starts with.
   */
  approve(repoPath: string, plan: EnvironmentPlanPort, approval?: { rules: EgressRule[]; remember: boolean }): TaskEgress {
    // What is granted is the repository's own request as planned, never the caller's copy of it.
    const rules = (approval?.rules ?? []).map((rule) => {
      const asked = plan.egressRequests.find((r) => sameRule(r, rule));
      if (!asked) throw new FactoryError('InvalidInput', `egressApproval: ${describe(rule)}${rule.addresses?.length ? ` with address ranges ${rule.addresses.join(', ')}` : ''} is not among the egress this repository asks for`);
      return asked;
    });
    if (approval?.remember && rules.length) this.rememberForRepo(repoPath, rules);
    return { allowed: rules, refusals: [] };
  }

  async save(taskId: string, plan: EnvironmentPlanPort): Promise<void> {
    await fsp.mkdir(this.deps.workDir(taskId), { recursive: true });
    await writeFileAtomic(path.join(this.deps.workDir(taskId), 'environment.json'), JSON.stringify(plan));
  }

  async load(taskId: string): Promise<EnvironmentPlanPort> {
    const file = path.join(this.deps.workDir(taskId), 'environment.json');
    let text: string;
    try {
      text = await fsp.readFile(file, 'utf8');
    } catch (err) {
      throw new FactoryError('SeedMissing', `the environment plan of task ${taskId} is gone (${(err as Error).message}); start a new task`);
    }
    return StoredPlan.parse(JSON.parse(text));
  }

  /** The setup info a task starts with, before anything ran. */
  initialSetup(plan: EnvironmentPlanPort): SetupInfo {
    return { status: 'pending', source: plan.source as EnvironmentSource, lines: plan.summary, unsupported: plan.unsupported };
  }

  /** Every rule the task's sandbox starts with. */
  rulesFor(task: Task): EgressRule[] {
    const s = this.deps.settings();
    return [...s.egressRules, ...(s.repoEgress[task.repoPath] ?? []), ...(task.egress?.allowed ?? [])];
  }

  /** Allows a destination for a task (and its repository from now on), live in its sandbox's proxy. */
  allow(task: Task, rule: EgressRule, scope: 'task' | 'repository'): TaskEgress {
    const egress: TaskEgress = task.egress ?? { allowed: [], refusals: [] };
    // A rule the proxy would refuse is never remembered (it would fail every later Start of the repository).
    checkEgressRules([rule]);
    try {
      this.deps.egress.allowEgress(task.id, [rule]);
    } catch (err) {
      // For the repository, a sandbox that has ended is no reason to refuse: its next tasks get the rule.
      if (scope === 'task' || !(err instanceof FactoryError && err.name === 'NotFound')) throw err;
      this.rememberForRepo(task.repoPath, [rule]);
      return egress;
    }
    if (scope === 'repository') this.rememberForRepo(task.repoPath, [rule]);
    const allowed = egress.allowed.some((r) => sameRule(r, rule)) ? egress.allowed : [...egress.allowed, rule];
    return { ...egress, allowed };
  }

  /**
   * Adds a refusal to the task's list: one row per destination and step (the newest
   * request kept, with how many were refused), at most 50. An agent's housekeeping
   * retries would otherwise fill the list with one host.
   */
  withRefusal(task: Task, refusal: EgressRefusal): TaskEgress {
    return withRefusal(task.egress ?? { allowed: [], refusals: [] }, refusal);
  }

  setStep(taskId: string, step: Parameters<EgressControlPort['setStep']>[1]): void {
    this.deps.egress.setStep(taskId, step);
  }

  /**
   * Whether a task seeded with seedCommit may boot on, or make, the layer of this plan: only when the
   * sandbox holds the very tree the plan was keyed on. A seed with uncommitted changes is another tree
   * (its setup may run other code), and a plan saved before layers were keyed on the tree has none.
   */
  layerAllowed(plan: EnvironmentPlanPort, seedCommit: string | undefined): boolean {
    return plan.steps.length > 0 && !!plan.tree && !!plan.commit && seedCommit === plan.commit;
  }

  /** The layer a task with this plan boots on, held until the returned release is called. */
  async layerFor(plan: EnvironmentPlanPort, seedCommit: string | undefined): Promise<{ layer: LayerPort; release: () => void } | undefined> {
    if (!this.layerAllowed(plan, seedCommit)) return undefined;
    const layer = await this.deps.layers.find(plan.cacheKey);
    if (!layer) return undefined;
    return { layer, release: this.deps.layers.acquire(layer.id) };
  }

  /** After a successful setup: the frozen disk (and the memory of that instant) becomes the repository's layer; older layers go past the budget. */
  async commitLayer(task: Task, plan: EnvironmentPlanPort, frozen: { disk: string; memory?: { dir: string; machineKey: string } }): Promise<LayerPort> {
    if (!plan.commit || !plan.tree) throw new Error('the plan predates layers keyed on the tree');
    const layer = await this.deps.layers.commit({
      key: plan.cacheKey,
      repo: task.repoPath,
      imageVersion: this.deps.imageVersion(),
      summary: plan.summary,
      frozenDisk: frozen.disk,
      made: { commit: plan.commit, tree: plan.tree },
      ...(frozen.memory ? { memory: frozen.memory } : {}),
    });
    await this.deps.layers.evict(this.deps.settings().layerBudgetGb * 1024 ** 3, layer.id);
    return layer;
  }

  /** The layers as the UI lists them; a folder that is not a usable layer shows as broken (deletable). */
  async layers(): Promise<LayerInfo[]> {
    const { layers, broken } = await this.deps.layers.list();
    return [
      ...layers.map((l) => ({ id: l.id, repo: l.repo, imageVersion: l.imageVersion, createdAt: l.createdAt, lastUsedAt: l.lastUsedAt, sizeBytes: l.sizeBytes, summary: l.summary, inUse: this.deps.layers.isInUse(l.id), ...(l.made ? { made: l.made } : {}) })),
      ...broken.map((b) => ({ id: b.id, repo: '(not a usable layer)', imageVersion: '', createdAt: '', lastUsedAt: '', sizeBytes: 0, summary: [b.reason], inUse: false })),
    ];
  }

  async removeLayer(id: string): Promise<void> {
    if (this.deps.layers.isInUse(id)) throw new FactoryError('LayerInUse', `layer ${id} is in use by a running sandbox; it can be deleted once that sandbox is destroyed`);
    await this.deps.layers.remove(id);
  }

  /** The rules remembered per repository, repositories in path order (empty lists left out). */
  repoRules(): RepoEgressRules[] {
    const byRepo = this.deps.settings().repoEgress;
    return Object.keys(byRepo)
      .sort()
      .filter((repoPath) => byRepo[repoPath]!.length > 0)
      .map((repoPath) => ({ repoPath, rules: byRepo[repoPath]! }));
  }

  /** Revokes a remembered rule: the repository's next tasks start without it (a running sandbox keeps what it was given). */
  removeRepoRule(repoPath: string, rule: EgressRule): RepoEgressRules[] {
    const s = this.deps.settings();
    const current = Object.prototype.hasOwnProperty.call(s.repoEgress, repoPath) ? s.repoEgress[repoPath]! : [];
    const next = current.filter((r) => !sameRule(r, rule));
    if (next.length === current.length) {
      throw new FactoryError('NotFound', `no rule for ${describe(rule)} is remembered for the repository ${JSON.stringify(repoPath)}`);
    }
    const repoEgress = { ...s.repoEgress };
    if (next.length) repoEgress[repoPath] = next;
    else delete repoEgress[repoPath];
    this.deps.setSettings({ repoEgress });
    return this.repoRules();
  }

  private rememberForRepo(repoPath: string, rules: EgressRule[]): void {
    const s = this.deps.settings();
    const current = s.repoEgress[repoPath] ?? [];
    const next = [...current, ...rules.filter((r) => !current.some((c) => sameRule(c, r)))];
    this.deps.setSettings({ repoEgress: { ...s.repoEgress, [repoPath]: next } });
  }
}

/** A task's egress with one more refusal: see TaskEnvironment.withRefusal. */
export function withRefusal(egress: TaskEgress, refusal: EgressRefusal): TaskEgress {
  const key = (r: EgressRefusal) => `${r.scheme}://${r.host}:${r.port} ${r.step}`;
  const earlier = egress.refusals.find((r) => key(r) === key(refusal));
  const count = (earlier?.count ?? (earlier ? 1 : 0)) + (refusal.count ?? 1);
  const refusals = [...egress.refusals.filter((r) => key(r) !== key(refusal)), { ...refusal, count }].slice(-MAX_REFUSALS);
  return { ...egress, refusals };
}
