// Settings' "Command line": how `factory` reaches PATH for this install, as the
// exact command to paste (system.cliInstall): a link to the packaged app's
// launcher, a script for an AppImage, `npm run build && npm link` from a clone.
import { useEffect, useState } from 'react';
import type { CliInstall } from '../../common/contract.js';
import { useController } from '../state/context.js';
import { toErrorInfo } from '../state/store.js';

export function CommandLineSettings() {
  const controller = useController();
  const [info, setInfo] = useState<CliInstall>();
  const [problem, setProblem] = useState<string>();
  useEffect(() => {
    let live = true;
    controller.bridge.call('system.cliInstall', {}).then(
      (r) => live && setInfo(r),
      // An older host has no such method: say so rather than show nothing.
      (err: unknown) => live && setProblem(toErrorInfo(err).message),
    );
    return () => {
      live = false;
    };
  }, [controller]);
  return (
    <section className="settings-form" data-testid="settings-cli" aria-labelledby="settings-cli-heading">
      <h3 id="settings-cli-heading">Command line</h3>
      {problem ? (
        <p className="hint">Could not tell how to install the factory command: {problem}</p>
      ) : !info ? (
        <p className="hint">Loading…</p>
      ) : (
        <>
          <p className="hint" data-testid="settings-cli-status">
            {info.onPath
              ? 'The factory command is on your PATH. To link it somewhere else:'
              : info.how === 'source'
                ? 'From this checkout, build the app and link the factory command onto your PATH:'
                : 'Put the factory command on your PATH:'}
          </p>
          <pre className="cli-command" data-testid="settings-cli-command">
            <code>{info.command}</code>
          </pre>
          {info.how === 'source' ? <p className="hint">Or, without linking: npm run factory -- &lt;command&gt;</p> : null}
        </>
      )}
    </section>
  );
}
