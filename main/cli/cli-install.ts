// How this install puts the `factory` command line on PATH, as one exact shell
// command the Settings screen shows (system.cliInstall). The packaged app ships a
// launcher script in its resources (packaging/factory); the deb links it into
// /usr/bin itself. An AppImage's resources live in a mount that goes away when
// the app ends, so a link to the launcher would dangle: there the command writes
// a two-line script that runs the AppImage file as the CLI. From a clone (or the
// web host) it is npm's own way.
import fs from 'node:fs';
import path from 'node:path';
import { shellQuote } from '../../common/shell-quote.js';
import type { CliInstall } from '../../common/contract.js';
import { CLI_FLAG, DISPLAYLESS_SWITCHES } from './cli-route.js';

export const FROM_SOURCE = 'npm run build && npm link';

export interface CliInstallInput {
  /** Electron's process.resourcesPath when the app runs packaged; absent from a clone or under the web host. */
  resourcesPath?: string;
  /** $APPIMAGE: the AppImage file the app runs from, if any. */
  appImage?: string;
  /** Directories of PATH, to tell whether `factory` already reaches this install. */
  pathDirs?: readonly string[];
}

export function cliInstall(input: CliInstallInput): CliInstall {
  if (input.appImage) {
    const script = `exec ${shellQuote(input.appImage)} ${DISPLAYLESS_SWITCHES.join(' ')} ${CLI_FLAG} -- "$@"`;
    return {
      how: 'appimage',
      onPath: false,
      command: `mkdir -p ~/.local/bin && printf '%s\\n' '#!/bin/sh' ${shellQuote(script)} > ~/.local/bin/factory && chmod +x ~/.local/bin/factory`,
    };
  }
  if (input.resourcesPath) {
    const launcherPath = path.join(input.resourcesPath, 'factory');
    return { how: 'packaged', launcherPath, onPath: reaches(launcherPath, input.pathDirs ?? []), command: `mkdir -p ~/.local/bin && ln -s ${shellQuote(launcherPath)} ~/.local/bin/factory` };
  }
  return { how: 'source', onPath: false, command: FROM_SOURCE };
}

/** Whether some PATH directory's `factory` resolves to the launcher (the deb's /usr/bin link does). */
function reaches(launcher: string, dirs: readonly string[]): boolean {
  let target: string;
  try {
    target = fs.realpathSync(launcher);
  } catch {
    // No launcher in this install (or not readable): no PATH entry can reach it.
    return false;
  }
  return dirs.some((d) => {
    if (!path.isAbsolute(d)) return false;
    try {
      return fs.realpathSync(path.join(d, 'factory')) === target;
    } catch {
      // No `factory` in this directory, or a dangling link: this one does not reach it.
      return false;
    }
  });
}

/** This process's answer: Electron sets process.resourcesPath, and process.defaultApp when run from a checkout. */
export function cliInstallHere(): CliInstall {
  const p = process as NodeJS.Process & { resourcesPath?: string; defaultApp?: boolean };
  const packaged = Boolean(process.versions.electron) && !p.defaultApp && typeof p.resourcesPath === 'string';
  return cliInstall({
    ...(packaged ? { resourcesPath: p.resourcesPath } : {}),
    ...(packaged && process.env.APPIMAGE ? { appImage: process.env.APPIMAGE } : {}),
    pathDirs: (process.env.PATH ?? '').split(path.delimiter).filter(Boolean),
  });
}
