// Egress rules: where a sandbox may go without a credential (package registries,
// Debian mirrors), per pipeline step. Pure zod + TS, shared by host and UI.
// (Provisional shape from the issue 9 brief; the egress policy fills it in.)
import { z } from 'zod';

export const STEP_NAMES = ['setup', 'request', 'plan', 'build', 'test', 'review', 'document'] as const;
export const StepName = z.enum(STEP_NAMES);
export type StepName = z.infer<typeof StepName>;

export const EgressRule = z.strictObject({
  name: z.string().min(1).max(80),
  host: z.string().min(1).max(253),
  port: z.number().int().min(1).max(65535),
  scheme: z.enum(['https', 'http']),
  methods: z.array(z.string()).optional(),
  pathPrefixes: z.array(z.string()).optional(),
  steps: z.array(StepName).optional(),
});
export type EgressRule = z.infer<typeof EgressRule>;

export const EgressRefusal = z.object({
  time: z.string(),
  sandboxId: z.string(),
  step: z.string(),
  scheme: z.enum(['https', 'http']),
  host: z.string(),
  port: z.number(),
  method: z.string().optional(),
  path: z.string().optional(),
  reason: z.string(),
});
export type EgressRefusal = z.infer<typeof EgressRefusal>;

export function defaultEgressRules(): EgressRule[] {
  return [];
}
