// The extra destinations a repository asks for, in the proxy's rule shape. They
// are requests: shown to the user at Start and added only when approved.
// EgressRule mirrors common/egress.ts (owned by the egress policy); the lead
// replaces this local copy with that module when the two meet.
import type { EgressRequest } from './env-schema.js';

const STEP_NAMES = ['setup', 'request', 'plan', 'build', 'test', 'review', 'document'] as const;
export type StepName = (typeof STEP_NAMES)[number];

export interface EgressRule {
  name: string;
  host: string;
  port: number;
  scheme: 'https' | 'http';
  methods?: string[];
  pathPrefixes?: string[];
  steps?: StepName[];
}

/** Fills the defaults (https, its port) and labels each request as the repository's. */
export function requestsToRules(requests: readonly EgressRequest[]): EgressRule[] {
  return requests.map((r) => {
    const scheme = r.scheme ?? 'https';
    return {
      name: `asked by the repository: ${r.host}`.slice(0, 80),
      host: r.host,
      port: r.port ?? (scheme === 'https' ? 443 : 80),
      scheme,
      ...(r.methods ? { methods: r.methods } : {}),
      ...(r.pathPrefixes ? { pathPrefixes: r.pathPrefixes } : {}),
      ...(r.steps ? { steps: r.steps } : {}),
    };
  });
}
