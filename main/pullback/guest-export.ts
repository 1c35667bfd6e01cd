// The guest side of pull-back: bundle the task branch relative to the base
// commit (as the agent user, so the guest repo's own config cannot act as
// root), then download it with a size cap into the task's quarantine folder.
// What the guest prints is untrusted and only matched against fixed markers.
import { FactoryError } from '../../common/errors.js';
import { GUEST_OUT_DIR, GUEST_REPO_DIR, asAgent, shellQuote } from '../guest/guest-shell.js';
import type { GuestSsh } from '../guest/guest-ssh.js';

export const GUEST_RESULT_BUNDLE = `${GUEST_OUT_DIR}/result.bundle`;

export async function exportTaskBundle(opts: {
  ssh: GuestSsh;
  branch: string;
  baseCommit: string;
  bundlePath: string;
  maxBytes: number;
}): Promise<{ bundlePresent: boolean; bytes: number }> {
  const { ssh, branch, baseCommit } = opts;
  if (!/^[0-9a-f]{40,64}$/.test(baseCommit)) throw new FactoryError('InvalidInput', 'bad base commit');
  const ref = `refs/heads/${branch}`;
  const script = [
    `cd ${GUEST_REPO_DIR} || exit 90`,
    `head=$(git rev-parse --verify -q ${shellQuote(ref)}) || { echo FACTORY_NO_BRANCH; exit 91; }`,
    `rm -f ${GUEST_RESULT_BUNDLE}`,
    `if [ "$head" = ${baseCommit} ]; then echo FACTORY_EMPTY; exit 0; fi`,
    `git -c core.hooksPath=/dev/null bundle create -q ${GUEST_RESULT_BUNDLE} ${shellQuote(ref)} ^${baseCommit} || exit 92`,
    'echo FACTORY_BUNDLE',
  ].join('\n');
  const r = await ssh.run(asAgent(script), { timeoutMs: 10 * 60_000, maxBytes: 64 * 1024 });
  if (/FACTORY_NO_BRANCH/.test(r.stdout)) throw new FactoryError('PullbackFailed', `the sandbox repository has no branch ${branch}`);
  if (r.code === 0 && /^FACTORY_EMPTY$/m.test(r.stdout)) return { bundlePresent: false, bytes: 0 };
  if (r.code !== 0 || !/^FACTORY_BUNDLE$/m.test(r.stdout)) {
    throw new FactoryError('PullbackFailed', `git bundle in the sandbox failed (exit ${r.code})`, r.stderr.slice(0, 4000) || undefined);
  }
  const bytes = await ssh.getFile(GUEST_RESULT_BUNDLE, opts.bundlePath, { maxBytes: opts.maxBytes });
  return { bundlePresent: true, bytes };
}
