// The packaged app's own binary is also the `factory` CLI: the app's fuses forbid
// running it as Node (runAsNode: false), so the launcher script starts it with
// CLI_FLAG first and the Electron entry hands the rest to the CLI, with no window.
// No Electron import here: a pure function, tested as such.

/** The first argument that makes the app binary the CLI. */
export const CLI_FLAG = '--factory-cli';
/** The first argument that makes it the headless host the CLI starts when no app runs (no window, no tray). */
export const HEADLESS_FLAG = '--factory-headless';
/**
 * Chromium switches put before either flag on Linux: neither the CLI nor the
 * headless host has a window, and without them Chromium dies (or hangs) where
 * there is no X server or Wayland display (over SSH, on a server): Ozone's
 * headless platform skips the display, and no GPU process starts. Only these,
 * and only before the flag, are passed over.
 */
export const DISPLAYLESS_SWITCHES: readonly string[] = ['--ozone-platform=headless', '--disable-gpu'];

/** The arguments after the binary (and the app path from a checkout) and the displayless switches. */
function ownArgs(argv: readonly string[], defaultApp: boolean): string[] {
  const args = argv.slice(defaultApp ? 2 : 1);
  let i = 0;
  while (i < args.length && DISPLAYLESS_SWITCHES.includes(args[i]!)) i++;
  return args.slice(i);
}

export type ElectronMode = { mode: 'cli'; args: string[] } | { mode: 'headless' } | { mode: 'window' };

/** What the app binary was started as: the CLI, the headless host, or the app with its window. */
export function electronMode(argv: readonly string[], defaultApp: boolean): ElectronMode {
  const args = cliArgv(argv, defaultApp);
  if (args) return { mode: 'cli', args };
  return ownArgs(argv, defaultApp)[0] === HEADLESS_FLAG ? { mode: 'headless' } : { mode: 'window' };
}

/**
 * The CLI's arguments when the app was started as the CLI, else undefined.
 * argv is process.argv: [binary, ...args] when packaged, [electron, appPath, ...args]
 * when run from a checkout (`electron .`, process.defaultApp). Only CLI_FLAG as
 * the first argument (after DISPLAYLESS_SWITCHES) counts: the flag anywhere else (a repository path, a task
 * text) does not turn the app into the CLI. The launcher puts `--` after the flag
 * so Chromium reads none of the user's words as its own switches; that `--` is
 * dropped, any later one is the user's (`factory exec t -- cmd`).
 */
export function cliArgv(argv: readonly string[], defaultApp: boolean): string[] | undefined {
  const args = ownArgs(argv, defaultApp);
  if (args[0] !== CLI_FLAG) return undefined;
  const rest = args.slice(1);
  return rest[0] === '--' ? rest.slice(1) : rest;
}
