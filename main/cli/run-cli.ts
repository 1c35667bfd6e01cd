// The `factory` CLI: parse, reach the app (starting it when none runs), run the
// command, give its exit status. main.ts is the program around it.
import path from 'node:path';
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
