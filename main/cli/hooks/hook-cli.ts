// The command-line side of `factory hooks ...` and `factory hook ...`.
import path from 'node:path';
import { FactoryError } from '../../../common/contract.js';
import { workTreeTop } from '../../git/host-git.js';
import { shellWord } from '../../../common/shell-quote.js';
import type { FactoryClient } from '../client.js';
import { UsageError, printJson, type Io, type Values } from '../output.js';
import { cmdHookEnd, cmdHookStart, cmdHookStop, parseHookInput, readStdin } from './hook-commands.js';
import { installHooks, settingsPath, uninstallHooks } from './settings-file.js';

export async function cmdHooks(io: Io, v: Values, action: string): Promise<number> {
  if (action !== 'install' && action !== 'uninstall') throw new UsageError(`hooks: expected install or uninstall, got ${JSON.stringify(action)}`);
  if (v.project === true && v.user === true) throw new UsageError('hooks: --project and --user exclude each other');
  const scope = v.user === true ? 'user' : 'project';
  const file = settingsPath(scope, scope === 'project' ? await repoTop(process.cwd()) : process.cwd());
  if (action === 'uninstall') {
    const { removed } = await uninstallHooks(file);
    if (io.json) printJson(io, { file, removed });
    else io.stdout.write(removed ? `removed ${removed} factory hooks from ${file}\n` : `no factory hooks in ${file}\n`);
    return 0;
  }
  // The hooks must reach the same app: an explicit data folder goes into the command.
  let prefix = typeof v.command === 'string' ? v.command.trim() : 'factory';
  if (!prefix || /[\n\r]/.test(prefix)) throw new UsageError('hooks: --command must be one line');
  if (typeof v['data-dir'] === 'string') prefix += ` --data-dir ${shellWord(path.resolve(v['data-dir']))}`;
  const { changed } = await installHooks(file, prefix);
  if (io.json) printJson(io, { file, changed });
  else io.stdout.write(`${changed ? 'installed' : 'already installed:'} SessionStart, Stop and SessionEnd hooks in ${file}\n`);
  return 0;
}

/** The project is the repository around cwd: Claude Code reads .claude/ at its top, and the sandbox is made of it. */
async function repoTop(cwd: string): Promise<string> {
  const top = await workTreeTop(cwd);
  if (!top) throw new FactoryError('NotAGitRepository', `${cwd} is not inside a git repository; run this in the repository Claude Code works in, or use --user`);
  return top;
}

export async function runHook(client: FactoryClient, io: Io, which: string): Promise<number> {
  const handler = { 'session-start': cmdHookStart, stop: cmdHookStop, 'session-end': cmdHookEnd }[which];
  if (!handler) throw new UsageError(`hook: expected session-start, stop or session-end, got ${JSON.stringify(which)}`);
  const input = parseHookInput(await readStdin());
  return handler(client, io, input);
}
