// A task's environment as the UI sees it: what setup does (or why it is skipped),
// the cached layer it used or made, the egress the repository asks for, and the
// destinations the sandbox was refused. Pure zod + TS.
import { z } from 'zod';
import { EnvironmentSource } from './domain.js';
import { EgressRule } from './egress.js';

export { EnvironmentSource, SetupInfo, TaskEgress } from './domain.js';

/** A repository's request for more egress, and whether the user already allowed it for that repository. */
export const EgressRequestView = z.object({ rule: EgressRule, allowedAlways: z.boolean() });
export type EgressRequestView = z.infer<typeof EgressRequestView>;

/** What Start will do, shown before the task is created. */
export const TaskPreflight = z.object({
  source: EnvironmentSource,
  lines: z.array(z.string()),
  unsupported: z.array(z.string()),
  egressRequests: z.array(EgressRequestView),
  /** True when a cached environment for this repository and key exists: setup will be skipped. */
  cached: z.boolean(),
  /** The agent the task would get (the form's choice, else pipeline.json's, else the settings'), and the credential it lacks, in words. */
  agent: z.object({ name: z.string(), credentialMissing: z.string().optional() }).optional(),
});
export type TaskPreflight = z.infer<typeof TaskPreflight>;

/** A cached environment layer (base image ← layer ← task overlay). */
export const LayerInfo = z.object({
  id: z.string(),
  repo: z.string(),
  imageVersion: z.string(),
  createdAt: z.string(),
  lastUsedAt: z.string(),
  sizeBytes: z.number(),
  summary: z.array(z.string()),
  inUse: z.boolean(),
  /** The commit whose setup made the layer, and its tree (the layer is only used for that tree); absent for older layers. */
  made: z.object({ commit: z.string(), tree: z.string() }).optional(),
});
export type LayerInfo = z.infer<typeof LayerInfo>;
