import type { ErrorInfo } from '../../common/domain.js';
import { errorHelp } from '../../common/errors.js';

/**
 * An error as the user should read it: the registry's title, the host's message,
 * what to do (help), detail lines (e.g. serial console), all as text. The internal
 * name stays visible but small, for a bug report or a search.
 */
export function ErrorBox({ error, testId }: { error: ErrorInfo; testId: string }) {
  const { title, help } = errorHelp(error.name);
  return (
    <div className="error-box" role="alert" data-testid={testId} data-error-name={error.name}>
      <div>
        <strong className="error-title" data-testid={`${testId}-title`}>
          {title}
        </strong>{' '}
        <span className="error-message" data-testid={`${testId}-message`}>
          {error.message}
        </span>
      </div>
      <p className="error-help" data-testid={`${testId}-help`}>
        {help}{' '}
        <code className="error-name" data-testid={`${testId}-name`}>
          {error.name}
        </code>
      </p>
      {error.detail ? (
        // Focusable: a long excerpt scrolls, and the keyboard must reach it.
        <pre className="error-detail" data-testid={`${testId}-detail`} tabIndex={0}>
          {error.detail}
        </pre>
      ) : null}
    </div>
  );
}
