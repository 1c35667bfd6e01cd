// Words for a task's setup step (board card and task view). Lines come from the
// repository's own config: untrusted, so shown with hidden characters escaped.
import type { SetupInfo } from '../../../common/environment.js';
import { escapeName } from '../../../common/review-text.js';

/** The one line a setup card gives: why it was skipped, where it failed, or what it did. */
export function setupReason(setup: SetupInfo): string {
  const summary = setup.summary ? escapeName(setup.summary.trim()) : '';
  if (setup.status === 'skipped' && setup.layer?.reused) return summary || 'cached environment';
  if (setup.status === 'failed' && setup.step) {
    const step = escapeName(setup.step);
    return summary && summary !== step ? `failed at ${step}: ${summary}` : `failed at ${step}`;
  }
  if (setup.status === 'running' && setup.step) return escapeName(setup.step);
  return summary;
}

export const SOURCE_WORDS: Record<SetupInfo['source'], string> = {
  'pipeline.json': 'from .factory/pipeline.json',
  'devcontainer.json': 'from devcontainer.json',
  detected: 'detected from the repository',
  none: 'nothing to set up',
};
