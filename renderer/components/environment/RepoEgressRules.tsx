// The egress rules the user allowed "for this repository from now on": listed per
// repository, each with a Remove (the repository's next tasks start without it).
// Repository paths and rule names come from repositories and the settings file:
// shown as text with hidden characters escaped.
import { useCallback, useEffect, useState } from 'react';
import type { RepoEgressRules as RepoRules } from '../../../common/contract.js';
import type { ErrorInfo } from '../../../common/domain.js';
import type { EgressRule } from '../../../common/egress.js';
import { escapeName } from '../../../common/review-text.js';
import { useController } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';

/** One line naming a rule: its destination, and for plain http its methods and paths; its steps when not all. */
export function describeRule(r: EgressRule): string {
  const http = r.scheme === 'http' ? ` ${(r.methods ?? ['GET', 'HEAD']).join(',')} ${(r.pathPrefixes ?? ['/']).join(',')}` : '';
  const steps = r.steps ? ` (steps: ${r.steps.join(', ')})` : '';
  const ranges = r.addresses?.length ? ` via ${r.addresses.join(', ')}` : '';
  return escapeName(`${r.scheme}://${r.host}:${r.port}${http}${ranges}${steps}`);
}

export function RepoEgressRules() {
  const controller = useController();
  const [repos, setRepos] = useState<RepoRules[]>();
  const [error, setError] = useState<ErrorInfo>();
  const [busy, setBusy] = useState<string>();

  const load = useCallback(async () => {
    try {
      setRepos(await controller.bridge.call('egress.repoRules.list', {}));
    } catch (err) {
      setError(toErrorInfo(err));
    }
  }, [controller]);
  useEffect(() => {
    void load();
  }, [load]);

  const remove = async (repoPath: string, rule: EgressRule, key: string) => {
    setBusy(key);
    setError(undefined);
    try {
      setRepos(await controller.bridge.call('egress.repoRules.remove', { repoPath, rule }));
    } catch (err) {
      setError(toErrorInfo(err));
      // What is remembered may have changed elsewhere: show it as it is now.
      void load();
    } finally {
      setBusy(undefined);
    }
  };

  return (
    <section className="repo-egress-rules" data-testid="repo-egress-rules">
      <h3>Allowed for a repository</h3>
      <p className="hint">
        Destinations you allowed for a repository from now on. Removing one takes it away from that repository&apos;s next
        tasks; a sandbox already running keeps what it started with.
      </p>
      {error ? <ErrorBox testId="repo-egress-rules-error" error={error} /> : null}
      {repos === undefined ? null : repos.length === 0 ? (
        <p className="hint" data-testid="repo-egress-rules-empty">
          No rules remembered for any repository.
        </p>
      ) : (
        <ul className="repo-egress-list">
          {repos.map((repo, i) => (
            <li key={repo.repoPath} data-testid={`repo-egress-${i}`}>
              <code className="repo-path">{escapeName(repo.repoPath)}</code>
              <ul>
                {repo.rules.map((rule, j) => {
                  const key = `${i}-${j}`;
                  const name = escapeName(rule.name);
                  return (
                    <li key={key} data-testid={`repo-egress-rule-${key}`}>
                      <span className="rule-name">{name}</span> <code>{describeRule(rule)}</code>{' '}
                      <button
                        type="button"
                        className="danger small"
                        data-testid={`repo-egress-remove-${key}`}
                        aria-label={`Remove ${name} for ${escapeName(repo.repoPath)}`}
                        disabled={busy !== undefined}
                        onClick={() => void remove(repo.repoPath, rule, key)}
                      >
                        {busy === key ? 'Removing…' : 'Remove'}
                      </button>
                    </li>
                  );
                })}
              </ul>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
