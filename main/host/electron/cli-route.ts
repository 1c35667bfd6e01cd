// The packaged app's own binary is also the `factory` CLI: the app's fuses forbid
// running it as Node (runAsNode: false), so the launcher script starts it with
// CLI_FLAG first and the Electron entry hands the rest to the CLI, with no window.
// No Electron import here: a pure function, tested as such.

/** The first argument that makes the app binary the CLI. */
export const CLI_FLAG = '--factory-cli';
/** The first argument that makes it the headless host the CLI starts when no app runs (no window, no tray). */
export const HEADLESS_FLAG = '--factory-headless';

export type ElectronMode = { mode: 'cli'; args: string[] } | { mode: 'headless' } | { mode: 'window' };

/** What the app binary was started as: the CLI, the headless host, or the app with its window. */
export function electronMode(argv: readonly string[], defaultApp: boolean): ElectronMode {
  const args = cliArgv(argv, defaultApp);
  if (args) return { mode: 'cli', args };
  return argv[defaultApp ? 2 : 1] === HEADLESS_FLAG ? { mode: 'headless' } : { mode: 'window' };
}

/**
 * The CLI's arguments when the app was started as the CLI, else undefined.
 * argv is process.argv: [binary, ...args] when packaged, [electron, appPath, ...args]
 * when run from a checkout (`electron .`, process.defaultApp). Only a first
 * argument of CLI_FLAG counts: the flag anywhere else (a repository path, a task
 * text) does not turn the app into the CLI. The launcher puts `--` after the flag
 * so Chromium reads none of the user's words as its own switches; that `--` is
 * dropped, any later one is the user's (`factory exec t -- cmd`).
 */
export function cliArgv(argv: readonly string[], defaultApp: boolean): string[] | undefined {
  const args = argv.slice(defaultApp ? 2 : 1);
  if (args[0] !== CLI_FLAG) return undefined;
  const rest = args.slice(1);
  return rest[0] === '--' ? rest.slice(1) : rest;
}
