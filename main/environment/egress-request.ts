// The extra destinations a repository asks for, in the proxy's rule shape. They
// are requests: shown to the user at Start and added only when approved.
import { FactoryError } from '../../common/errors.js';
import { EgressRule } from '../../common/egress.js';
import type { EgressRequest } from './env-schema.js';

export type { EgressRule };

/** Fills the defaults (https, its port) and labels each request as the repository's; the rule schema has the last word. */
export function requestsToRules(requests: readonly EgressRequest[]): EgressRule[] {
  return requests.map((r, i) => {
    const scheme = r.scheme ?? 'https';
    const parsed = EgressRule.safeParse({
      name: `asked by the repository: ${r.host}`.slice(0, 80),
      host: r.host,
      port: r.port ?? (scheme === 'https' ? 443 : 80),
      scheme,
      ...(r.methods ? { methods: r.methods } : {}),
      ...(r.pathPrefixes ? { pathPrefixes: r.pathPrefixes } : {}),
      ...(r.steps ? { steps: r.steps } : {}),
    });
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new FactoryError('InvalidPipelineConfig', `.factory/pipeline.json: environment.egress.${i}${issue.path.length ? '.' + issue.path.join('.') : ''}: ${issue.message}`);
    }
    return parsed.data;
  });
}
