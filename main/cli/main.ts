#!/usr/bin/env node
// The `factory` CLI entry: parse, reach the app (starting it when none runs),
// run the command, exit with its status.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { appPaths } from '../state/paths.js';
import { helpText, parseCommandLine } from './args.js';
import type { FactoryClient } from './client.js';
import { hookFailed } from './hooks/hook-commands.js';
import { connectOrStart, type LaunchOptions } from './launcher.js';
import { printError, type Io } from './output.js';

export interface CliDeps {
  /** How the app is reached (tests give a scripted one). */
  connect?: (opts: LaunchOptions) => Promise<FactoryClient>;
}

export async function runCli(argv: string[], io0: Omit<Io, 'json'> = { stdout: process.stdout, stderr: process.stderr }, deps: CliDeps = {}): Promise<number> {
  const io: Io = { ...io0, json: argv.includes('--json') };
  let parsed;
  try {
    parsed = parseCommandLine(argv);
  } catch (err) {
    printError(io, err);
    return 2;
  }
  if (parsed.values.help || !parsed.command) {
    io.stdout.write(helpText(parsed.command));
    return parsed.command || parsed.values.help ? 0 : 2;
  }
  if (parsed.command.runLocal) {
    try {
      return await parsed.command.runLocal(io, parsed.values, parsed.positionals);
    } catch (err) {
      printError(io, err);
      return err instanceof Error && err.name === 'Usage' ? 2 : 1;
    }
  }
  const dataDir = typeof parsed.values['data-dir'] === 'string' ? path.resolve(parsed.values['data-dir']) : appPaths().data;
  // A session hook that cannot do its check must block (Claude Code's status 2), never pass as a mere warning (1).
  const failStatus = parsed.name === 'exec' ? 125 : parsed.name === 'hook' ? 2 : 1;
  let client;
  try {
    client = await (deps.connect ?? connectOrStart)({ dataDir, noStart: parsed.values['no-start'] === true || !!parsed.command.noStart, progress: (l) => io.stderr.write(l + '\n') });
  } catch (err) {
    if (parsed.command.noStart && err instanceof Error && err.name === 'AppNotRunning') return parsed.command.noStart.whenNotRunning(io, dataDir);
    if (parsed.name === 'hook') return hookFailed(io, parsed.positionals[0] ?? 'hook', err, { reached: false });
    printError(io, err);
    return failStatus;
  }
  try {
    return await parsed.command.run(client, io, parsed.values, parsed.positionals, parsed.rest);
  } catch (err) {
    printError(io, err);
    return err instanceof Error && err.name === 'Usage' ? 2 : failStatus;
  } finally {
    client.close();
  }
}

/**
 * The PreToolUse hook's limit for everything, connecting to (or starting) the app included:
 * FACTORY_PRE_TOOL_USE_LIMIT_SEC (at most 100, below Claude Code's 120 s for the hook), else 30 s.
 */
function preToolUseLimitMs(env: NodeJS.ProcessEnv = process.env): number {
  const sec = Number(env.FACTORY_PRE_TOOL_USE_LIMIT_SEC);
  return (Number.isFinite(sec) && sec > 0 ? Math.min(100, sec) : 30) * 1000;
}

/** Run as a program (also through npm's `bin` symlink), not imported. */
function isEntry(): boolean {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    // A path that does not resolve is not this file: imported, not run.
    return false;
  }
}

if (isEntry()) {
  // `npm run factory -- …` (from a clone) runs in the package's folder: the user's paths are relative to where they typed it.
  if (process.env.npm_lifecycle_event === 'factory' && process.env.npm_package_name === 'factory-in-a-box' && process.env.INIT_CWD) process.chdir(process.env.INIT_CWD);
  const argv = process.argv.slice(2);
  // The PreToolUse hook must answer well before Claude Code's limit for it (120 s): a hook that
  // times out lets the call run here. Whatever it waits for (an app that is slow to start, a
  // socket that never answers), past 30 s it blocks the call; with nothing left to do and
  // no answer written, it exits 2 too.
  if (argv.includes('hook') && argv.includes('pre-tool-use')) {
    process.exitCode = 2;
    const limit = preToolUseLimitMs();
    setTimeout(() => {
      process.stderr.write(`factory: the PreToolUse hook had no answer within ${limit / 1000} s, so the call is blocked (is the app running? factory status)\n`);
      process.exit(2);
    }, limit);
  }
  void runCli(argv).then((code) => {
    // Let stdout drain before leaving (a pipe may be slow).
    process.stdout.write('', () => process.exit(code));
  });
}
