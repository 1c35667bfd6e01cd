// Any hook that could not finish its work: one report, one status. A module of its
// own so the lean hook path (main.ts) reports as the whole CLI does.
import { plain, type Io } from '../output.js';

/**
 * Any hook that could not finish its check (an error, the app unreachable, a
 * timeout): what happened, on stderr, and Claude Code's blocking status 2.
 * Nothing was destroyed: the app keeps a sandbox whose check failed.
 */
export function hookFailed(io: Pick<Io, 'stderr'>, which: string, err: unknown, opts: { reached?: boolean } = {}): number {
  const e = err instanceof Error ? err : new Error(String(err));
  const start = which === 'session-start' || which === 'subagent-start';
  const what = start ? 'could not give this session its sandbox' : "could not complete the leak check of this session's sandbox";
  let after = '';
  if (!start) {
    after = 'factory: the sandbox was not destroyed and its work was not sent to review. ';
    if (opts.reached === false) after += 'The app could not be reached, so nothing was checked: start the app, then look for the session\'s sandbox (factory ls) and check it (factory leakcheck <task>).\n';
    else if (e.name === 'HookTimeout') after += 'The app may still finish the check: only a clean check sends the work to review; any other result keeps the sandbox for inspection (see the app, or factory ls).\n';
    else after += 'It is kept for inspection (see the app, or factory ls).\n';
  }
  io.stderr.write(`factory: the ${plain(which).slice(0, 32)} hook ${what}: ${e.name}: ${plain(e.message)}\n${after}`);
  return 2;
}
