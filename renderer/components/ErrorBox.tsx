import type { ErrorInfo } from '../../common/domain.js';

/** An error as the host named it: name, message and detail lines (e.g. serial console), all as text. */
export function ErrorBox({ error, testId }: { error: ErrorInfo; testId: string }) {
  return (
    <div className="error-box" role="alert" data-testid={testId}>
      <div>
        <span className="error-name" data-testid={`${testId}-name`}>
          {error.name}
        </span>{' '}
        <span className="error-message" data-testid={`${testId}-message`}>
          {error.message}
        </span>
      </div>
      {error.detail ? (
        <pre className="error-detail" data-testid={`${testId}-detail`}>
          {error.detail}
        </pre>
      ) : null}
    </div>
  );
}
