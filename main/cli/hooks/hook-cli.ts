// The command-line side of `factory hooks ...` and `factory hook ...`.
import path from 'node:path';
import { FactoryError } from '../../../common/contract.js';
import { workTreeTop } from '../../git/host-git.js';
import { shellWord } from '../../../common/shell-quote.js';
import type { FactoryClient } from '../client.js';
import { UsageError, printJson, type Io, type Values } from '../output.js';
import { cmdHookEnd, cmdHookStart, cmdHookStop, cmdHookSubagentStart, cmdHookSubagentStop, hookFailed, parseHookInput, readStdin, withDeadline } from './hook-commands.js';
import { cmdCodexHookStart, runCodexPreToolUse } from './codex-hooks.js';
import { runRoutedHook } from './routed-hooks.js';
import { INTERACTIVE_AGENTS, type InteractiveAgent } from '../../../common/agent-session.js';
import { hookDeadlineMs, hookEvents } from './hook-events.js';
import { installHooks, settingsPath, uninstallHooks } from './settings-file.js';

/** `--agent claude|codex` (Claude Code when not given): whose hooks these are. */
function hookAgent(v: Values, what: string): InteractiveAgent {
  if (v.agent === undefined) return 'claude';
  if (typeof v.agent === 'string' && (INTERACTIVE_AGENTS as readonly string[]).includes(v.agent)) return v.agent as InteractiveAgent;
  throw new UsageError(`${what}: --agent must be ${INTERACTIVE_AGENTS.join(' or ')}, got ${JSON.stringify(v.agent)}`);
}

export async function cmdHooks(io: Io, v: Values, action: string): Promise<number> {
  if (action !== 'install' && action !== 'uninstall') throw new UsageError(`hooks: expected install or uninstall, got ${JSON.stringify(action)}`);
  if (v.project === true && v.user === true) throw new UsageError('hooks: --project and --user exclude each other');
  const agent = hookAgent(v, 'hooks');
  const scope = v.user === true ? 'user' : 'project';
  const top = scope === 'project' ? await repoTop(process.cwd()) : undefined;
  const file = settingsPath(scope, top ?? process.cwd(), undefined, agent);
  if (action === 'uninstall') {
    const { removed } = await uninstallHooks(file, top, agent);
    if (io.json) printJson(io, { file, removed });
    else io.stdout.write(removed ? `removed ${removed} factory hooks from ${file}\n` : `no factory hooks in ${file}\n`);
    return 0;
  }
  // The hooks must reach the same app: an explicit data folder goes into the command.
  let prefix = typeof v.command === 'string' ? v.command.trim() : 'factory';
  if (!prefix || /[\n\r]/.test(prefix)) throw new UsageError('hooks: --command must be one line');
  // npm run prints its own banner on stdout, which Claude Code would read instead of the hook's answer (and then run the call here).
  if (/^npm\s+(run|run-script)\b/.test(prefix) && !/(^|\s)(-s|--silent|--loglevel[= ]silent)(\s|$)/.test(prefix)) {
    throw new UsageError(`hooks: --command ${JSON.stringify(prefix)} would print npm's banner where Claude Code reads the hooks' answers; add -s (npm run -s …)`);
  }
  if (typeof v['data-dir'] === 'string') prefix += ` --data-dir ${shellWord(path.resolve(v['data-dir']))}`;
  const { changed, rules } = await installHooks(file, prefix, top, agent);
  if (io.json) printJson(io, { file, changed, ...(rules ? { rules } : {}) });
  else io.stdout.write(`${changed ? 'installed' : 'already installed:'} ${Object.keys(hookEvents(agent)).join(', ')} hooks in ${file}\n`);
  if (agent === 'codex' && !io.json) {
    io.stdout.write(rules ? `and the rule that lets the routed commands reach the app from inside Codex's sandbox: ${rules}\n` : CODEX_NO_RULE_NOTE);
    // Codex runs hooks from a file only once the user trusted them (and, for a project, its folder).
    io.stdout.write(CODEX_TRUST_NOTE);
  }
  return 0;
}

/** The project is the repository around cwd: Claude Code reads .claude/ at its top, and the sandbox is made of it. */
async function repoTop(cwd: string): Promise<string> {
  const top = await workTreeTop(cwd);
  if (!top) throw new FactoryError('NotAGitRepository', `${cwd} is not inside a git repository; run this in the repository Claude Code works in, or use --user`);
  return top;
}

const CODEX_NO_RULE_NOTE =
  "--command is not plain words, so no Codex rule can name it: in Codex's own sandbox (workspace-write) the routed commands cannot reach the app and fail. " +
  'Give --command as plain words (a path to factory), or run Codex with --sandbox danger-full-access (its commands still run in the session\'s sandbox).\n';

const CODEX_TRUST_NOTE =
  'Codex runs these hooks only once you trust them: start codex here, trust the folder and answer its hooks review with "Trust all and continue".\n' +
  'Until then (or after "Continue without trusting") its commands run on this computer.\n';

const HANDLERS = { 'session-start': cmdHookStart, stop: cmdHookStop, 'session-end': cmdHookEnd, 'subagent-start': cmdHookSubagentStart, 'subagent-stop': cmdHookSubagentStop };

export async function runHook(client: FactoryClient, io: Io, which: string, v: Values = {}, arg?: string): Promise<number> {
  const agent = hookAgent(v, 'hook');
  if (which === 'run') return runRoutedHook(client, io, which, arg);
  if (which === 'pre-tool-use' && agent === 'codex') return runCodexPreToolUse(client, io, typeof v.via === 'string' ? v.via : undefined);
  if (which === 'pre-tool-use') return runRoutedHook(client, io, which, typeof v.via === 'string' ? v.via : undefined);
  const handler = agent === 'codex' && which === 'session-start' ? cmdCodexHookStart : HANDLERS[which as keyof typeof HANDLERS];
  if (!handler) throw new UsageError(`hook: expected session-start, pre-tool-use, run, subagent-start, subagent-stop, stop or session-end, got ${JSON.stringify(which)}`);
  try {
    // Anything thrown (bad input, the app's error, no answer in time) fails closed: status 2 and what happened.
    return await withDeadline(
      (async () => handler(client, io, parseHookInput(await readStdin(io.stdin ?? process.stdin)), agent))(),
      hookDeadlineMs(which, process.env, agent),
      which,
    );
  } catch (err) {
    return hookFailed(io, which, err);
  }
}
