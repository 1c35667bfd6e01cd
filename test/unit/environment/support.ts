// The real npm registry, asked once per test file; tests that need it skip, with the reason, when it does not answer.
import { NodeRegistry } from '../../../main/environment/node-version.js';

export const registry = new NodeRegistry();
let reachable: Promise<string | undefined> | undefined;

/** undefined when the registry answers, else why not. */
export function registryProblem(): Promise<string | undefined> {
  reachable ??= registry.resolveNode('22').then(
    () => undefined,
    (err: unknown) => `npm registry not reachable: ${err instanceof Error ? err.message : String(err)}`,
  );
  return reachable;
}
