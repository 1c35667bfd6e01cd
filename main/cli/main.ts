#!/usr/bin/env node
// The `factory` program. The two hooks on every routed command's path (PreToolUse
// and `hook run`), and SubagentStart, which a subagent waits for, go straight to
// the running app through lean modules; the rest (and those when no app answers,
// which may start one) load the whole CLI.
// Nothing heavy is imported at the top: each process Claude Code starts pays for
// what it loads.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { InteractiveAgent } from '../../common/agent-session.js';

/**
 * `[--data-dir D] hook pre-tool-use [--agent codex] --via V`, `[--data-dir D] hook run P` or
 * `[--data-dir D] hook subagent-start [--agent codex]` (arg: the agent), as `hooks install` writes
 * them; else undefined.
 */
export function routedHookCall(argv: readonly string[]): { dataDir?: string; which: 'pre-tool-use' | 'codex-pre-tool-use' | 'run' | 'subagent-start'; arg: string } | undefined {
  const a = [...argv];
  let dataDir: string | undefined;
  if (a[0] === '--data-dir' && a.length > 1) dataDir = a.splice(0, 2)[1];
  else if (a[0]?.startsWith('--data-dir=')) dataDir = a.shift()!.slice('--data-dir='.length);
  if (dataDir === '' || a[0] !== 'hook') return undefined;
  if (a.length === 3 && a[1] === 'run' && !a[2]!.startsWith('-')) return { ...(dataDir ? { dataDir } : {}), which: 'run', arg: a[2]! };
  if (a.length === 4 && a[1] === 'pre-tool-use' && a[2] === '--via') return { ...(dataDir ? { dataDir } : {}), which: 'pre-tool-use', arg: a[3]! };
  if (a.length === 6 && a[1] === 'pre-tool-use' && a[2] === '--agent' && a[3] === 'codex' && a[4] === '--via') return { ...(dataDir ? { dataDir } : {}), which: 'codex-pre-tool-use', arg: a[5]! };
  if (a[1] === 'subagent-start' && (a.length === 2 || (a.length === 4 && a[2] === '--agent' && a[3] === 'codex'))) return { ...(dataDir ? { dataDir } : {}), which: 'subagent-start', arg: a[3] ?? 'claude' };
  return undefined;
}

/** A routed hook through the lean path; undefined when no app answers (the whole CLI then starts or names it). */
async function runRoutedHookFast(call: NonNullable<ReturnType<typeof routedHookCall>>): Promise<number | undefined> {
  const [{ FactoryClient }, { socketPath }, { appPaths }, { runRoutedHook }, { printError }] = await Promise.all([
    import('./client.js'),
    import('../instance/socket-path.js'),
    import('../state/paths.js'),
    import('./hooks/routed-hooks.js'),
    import('./output.js'),
  ]);
  let client;
  try {
    client = await FactoryClient.connect(socketPath(call.dataDir ? path.resolve(call.dataDir) : appPaths().data), 5000);
  } catch (err) {
    // No app (or none that greets): the whole CLI starts one, or says why it cannot.
    void err;
    return undefined;
  }
  const io = { stdout: process.stdout, stderr: process.stderr, json: false };
  try {
    if (call.which === 'subagent-start') return await runSubagentStartFast(client, io, call.arg as InteractiveAgent);
    if (call.which === 'codex-pre-tool-use') {
      // Blocks with status 2 and why on whatever goes wrong, as Codex needs.
      const { runCodexPreToolUse } = await import('./hooks/codex-hooks.js');
      return await runCodexPreToolUse(client, io, call.arg);
    }
    return await runRoutedHook(client, io, call.which, call.arg);
  } catch (err) {
    // As the whole CLI does for any hook: a failure blocks (Claude Code's status 2).
    printError(io, err);
    return 2;
  } finally {
    client.close();
  }
}

/** SubagentStart as the whole CLI runs it (hook-cli.ts runHook): within the hook's deadline, any failure reported and status 2. */
async function runSubagentStartFast(client: import('./client.js').FactoryClient, io: import('./output.js').Io, agent: InteractiveAgent): Promise<number> {
  const [{ cmdHookSubagentStart, parseSubagentStartInput }, { hookDeadlineMs }, { hookFailed }, { readStdin, withDeadline }] = await Promise.all([
    import('./hooks/subagent-start-hook.js'),
    import('./hooks/hook-events.js'),
    import('./hooks/hook-failed.js'),
    import('./hooks/routed-hooks.js'),
  ]);
  try {
    return await withDeadline(
      (async () => cmdHookSubagentStart(client, io, parseSubagentStartInput(await readStdin(process.stdin)), agent))(),
      hookDeadlineMs('subagent-start', process.env, agent),
      'subagent-start',
    );
  } catch (err) {
    return hookFailed(io, 'subagent-start', err);
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

async function main(argv: string[]): Promise<number> {
  const routed = routedHookCall(argv);
  if (routed) {
    const code = await runRoutedHookFast(routed);
    if (code !== undefined) return code;
  }
  const { runCli } = await import('./run-cli.js');
  return runCli(argv);
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
  void main(argv).then((code) => {
    // Let stdout drain before leaving (a pipe may be slow).
    process.stdout.write('', () => process.exit(code));
  });
}
