// What the task service needs from the environment planner, the layer store and
// the credential broker's egress policy, as narrow interfaces (the real
// planEnvironment, LayerStore and CredentialBroker satisfy them structurally).
import type { EgressRule, StepName } from '../../common/egress.js';
import type { EnvironmentSource } from '../../common/domain.js';
import type { LayerInfo } from '../../common/environment.js';
import type { PipelineConfig } from '../pipeline/config.js';
import type { SetupStepSpec } from './setup-step.js';

/** The plan of a repository's environment (main/environment/environment-plan.ts). */
export interface EnvironmentPlanPort {
  source: EnvironmentSource;
  summary: string[];
  steps: SetupStepSpec[];
  env: Record<string, string>;
  egressRequests: EgressRule[];
  unsupported: string[];
  cacheKey: string;
  /** The commit the plan was made at and its tree (absent in a plan saved before layers were keyed on the tree: such a plan gets no layer). */
  commit?: string;
  tree?: string;
  /** Install folders (by name) a task on a layer takes over from it; nothing else of the layer's repository is kept. */
  installDirs?: string[];
  /** Guest memory the repository asked for, already held to the user's cap. */
  memoryMb?: number;
}

export type PlanEnvironment = (input: {
  repoPath: string;
  commit: string;
  config: PipelineConfig;
  imageVersion: string;
  memory?: { defaultMb: number; maxMb: number };
}) => Promise<EnvironmentPlanPort>;

export interface LayerPort {
  id: string;
  /** The layer's read-only qcow2 disk (backed by the base image). */
  disk: string;
  createdAt: string;
  /** The guest's memory saved with the disk, when the layer has it (a new sandbox restores it instead of booting). */
  warm?: { dir: string; machineKey: string };
}

export interface LayerStorePort {
  find(key: string): Promise<LayerPort | undefined>;
  /** Marks a layer in use until the returned function is called (eviction and delete keep it). */
  acquire(id: string): () => void;
  commit(input: { key: string; repo: string; imageVersion: string; summary: string[]; frozenDisk: string; memory?: { dir: string; machineKey: string }; made?: { commit: string; tree: string } }): Promise<LayerPort>;
  evict(budgetBytes: number, keep?: string): Promise<unknown>;
  list(): Promise<{ layers: Array<Omit<LayerInfo, 'inUse'>>; broken: Array<{ id: string; reason: string }> }>;
  isInUse(id: string): boolean;
  remove(id: string): Promise<void>;
}

/** The broker's per-sandbox egress policy, keyed by task id. */
export interface EgressControlPort {
  setStep(taskId: string, step: StepName): void;
  allowEgress(taskId: string, rules: EgressRule[]): void;
}
