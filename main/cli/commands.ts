// The command table: each command's usage, options (node:util parseArgs) and
// runner. New commands (e.g. `hook session-start`, `hooks install`) are one more
// entry here.
import type { ParseArgsConfig } from 'node:util';
import { StageName } from '../../common/domain.js';
import type { FactoryClient } from './client.js';
import { UsageError, type Io } from './output.js';
import { cmdRunWays, cmdWays } from './fanout-command.js';
import { cmdDecide, cmdDiff, cmdLeakcheck, cmdList, cmdRun, cmdShow } from './task-commands.js';
import { cmdExec, cmdLogs, cmdShell } from './terminal-commands.js';
import { cmdSandbox } from './sandbox-command.js';
import { cmdAgentSession, type SessionAgent } from './agent-session-command.js';
import type { Values } from './output.js';
import { cmdHooks, runHook } from './hooks/hook-cli.js';
import { cmdQuit, cmdStatus } from './app-commands.js';

type Options = NonNullable<ParseArgsConfig['options']>;
export type { Values };

export interface Command {
  usage: string;
  summary: string;
  options: Options;
  /** Positionals this command takes (min, max). */
  positionals: [number, number];
  /** Takes the words after `--` as a command line. */
  rest?: boolean;
  run(client: FactoryClient, io: Io, values: Values, positionals: string[], rest: string[]): Promise<number>;
  /** Never starts the app: with none running, `whenNotRunning` answers instead. */
  noStart?: { whenNotRunning(io: Io, dataDir: string): number };
  /** Runs without the app (no socket, never starts it): e.g. `hooks install` only edits a file. */
  runLocal?(io: Io, values: Values, positionals: string[]): Promise<number>;
}

const TASK = '<task> is a task id or a unique prefix of one.';

/** For a command that never starts the app: with none running, say so and exit with `code`. */
function noAppRunning(code: number): Command['noStart'] {
  return { whenNotRunning: (io, dataDir) => (io.stdout.write(`no app is running for ${dataDir}\n`), code) };
}

export const COMMANDS: Record<string, Command> = {
  run: {
    usage: 'factory run <repo> "<task>" [--agent NAME[,NAME…]] [--ways N] [--base REF] [--wait] [--allow-egress SCHEME://HOST:PORT]…',
    summary:
      'Start a task on a repository (with --wait: show stage progress; exit 0 when it reaches review). ' +
      'When the repository asks its sandbox to reach destinations not allowed always for it, nothing starts unless each is named with --allow-egress (for this task only). ' +
      '--ways N (1-8) runs it N ways from one preparation, --agent naming one agent per way or one for all; it prints the group (factory ways <group>)',
    options: { agent: { type: 'string' }, ways: { type: 'string' }, base: { type: 'string' }, wait: { type: 'boolean' }, 'allow-egress': { type: 'string', multiple: true } },
    positionals: [2, 2],
    run: (c, io, v, p) =>
      typeof v.ways === 'string'
        ? cmdRunWays(c, io, {
            repo: p[0]!,
            task: p[1]!,
            ways: v.ways,
            wait: v.wait === true,
            allowEgress: (v['allow-egress'] as string[] | undefined) ?? [],
            ...(typeof v.agent === 'string' ? { agent: v.agent } : {}),
            ...(typeof v.base === 'string' ? { base: v.base } : {}),
          })
        : cmdRun(c, io, {
            repo: p[0]!,
            task: p[1]!,
            wait: v.wait === true,
            allowEgress: (v['allow-egress'] as string[] | undefined) ?? [],
            ...(typeof v.agent === 'string' ? { agent: v.agent } : {}),
            ...(typeof v.base === 'string' ? { base: v.base } : {}),
          }),
  },
  ways: {
    usage: 'factory ways <group> [--approve N [--confirm KIND,…]] [--reject-all]',
    summary: 'Compare the ways of a task run N ways (tests, review, lines changed, leak check); approve one (the others are rejected and destroyed), or reject all',
    options: { approve: { type: 'string' }, confirm: { type: 'string', multiple: true }, 'reject-all': { type: 'boolean' } },
    positionals: [1, 1],
    run: (c, io, v, p) =>
      cmdWays(c, io, { group: p[0]!, confirm: (v.confirm as string[] | undefined) ?? [], rejectAll: v['reject-all'] === true, ...(typeof v.approve === 'string' ? { approve: v.approve } : {}) }),
  },
  ls: { usage: 'factory ls', summary: 'List the tasks', options: {}, positionals: [0, 0], run: (c, io) => cmdList(c, io) },
  show: { usage: 'factory show <task>', summary: `Show a task, its stages and its sandbox. ${TASK}`, options: {}, positionals: [1, 1], run: (c, io, _v, p) => cmdShow(c, io, p[0]!) },
  logs: {
    usage: 'factory logs <task> [--stage S] [--follow]',
    summary: `Print the stage terminals' logs (--follow: the running stage's, live). ${TASK}`,
    options: { stage: { type: 'string' }, follow: { type: 'boolean', short: 'f' } },
    positionals: [1, 1],
    run: (c, io, v, p) => {
      let stage: StageName | undefined;
      if (typeof v.stage === 'string') {
        const parsed = StageName.safeParse(v.stage);
        if (!parsed.success) throw new UsageError(`--stage: not a stage: ${JSON.stringify(v.stage)} (one of ${StageName.options.join(', ')})`);
        stage = parsed.data;
      }
      return cmdLogs(c, io, { task: p[0]!, follow: v.follow === true, ...(stage ? { stage } : {}) });
    },
  },
  exec: {
    usage: 'factory exec <task> [--stdin] [--timeout SEC] -- <command> [args…]',
    summary: 'Run a command in the sandbox as the agent user in /work/repo; its stdout, stderr and exit status are passed through',
    options: { stdin: { type: 'boolean' }, timeout: { type: 'string' } },
    positionals: [1, 1],
    rest: true,
    run: async (c, io, v, p, rest) => {
      if (rest.length === 0) throw new UsageError('exec: no command after --');
      let timeoutSec: number | undefined;
      if (typeof v.timeout === 'string') {
        timeoutSec = Number(v.timeout);
        if (!Number.isInteger(timeoutSec) || timeoutSec < 1) throw new UsageError(`--timeout: not a number of seconds: ${v.timeout}`);
      }
      const stdin = v.stdin === true ? await readAll(process.stdin) : undefined;
      return cmdExec(c, io, { task: p[0]!, argv: rest, ...(stdin ? { stdin } : {}), ...(timeoutSec ? { timeoutSec } : {}) });
    },
  },
  shell: { usage: 'factory shell <task>', summary: 'An interactive shell in the sandbox (a real pty; resizes follow)', options: {}, positionals: [1, 1], run: (c, io, _v, p) => cmdShell(c, io, { task: p[0]! }) },
  sandbox: {
    usage: 'factory sandbox [repo] [--keep]',
    summary: 'A quick sandbox: a fresh VM (with the repository seeded, if given) and its shell here; destroyed when the shell ends, unless --keep',
    options: { keep: { type: 'boolean' } },
    positionals: [0, 1],
    run: (c, io, v, p) => cmdSandbox(c, io, { keep: v.keep === true, ...(p[0] !== undefined ? { repo: p[0] } : {}) }),
  },
  claude: agentSessionCommand('claude', 'claude-code', 'Claude Code'),
  codex: agentSessionCommand('codex', 'codex', 'Codex'),
  diff: {
    usage: 'factory diff <task>',
    summary: "Print the review of the work that came back: its files, flags, possible secrets and what Approve needs confirmed, then the patch (control and invisible characters escaped)",
    options: {},
    positionals: [1, 1],
    run: (c, io, _v, p) => cmdDiff(c, io, p[0]!),
  },
  approve: {
    usage: 'factory approve <task> [--confirm unshown,secrets]…',
    summary:
      'Approve: create branch factory/<task> in the repository (HEAD, index and working tree untouched). ' +
      'While the review lists things to confirm (factory diff shows them), nothing is approved unless each is named with --confirm',
    options: { confirm: { type: 'string', multiple: true } },
    positionals: [1, 1],
    run: (c, io, v, p) => cmdDecide(c, io, 'approve', p[0]!, (v.confirm as string[] | undefined) ?? []),
  },
  reject: { usage: 'factory reject <task>', summary: 'Reject the work that came back', options: {}, positionals: [1, 1], run: (c, io, _v, p) => cmdDecide(c, io, 'reject', p[0]!) },
  destroy: { usage: 'factory destroy <task>', summary: "Destroy the task's sandbox (its logs stay)", options: {}, positionals: [1, 1], run: (c, io, _v, p) => cmdDecide(c, io, 'destroy', p[0]!) },
  leakcheck: {
    usage: 'factory leakcheck <task>',
    summary: "Scan the sandbox's disk and memory for the credentials it could use (exit 1 unless clean)",
    options: {},
    positionals: [1, 1],
    run: (c, io, _v, p) => cmdLeakcheck(c, io, p[0]!),
  },
  status: {
    usage: 'factory status',
    summary: 'What the app runs now (tasks and sandboxes, the warm pool) and, for an app the CLI started, when it ends by itself. Exit 3 when no app runs; never starts one',
    options: {},
    positionals: [0, 0],
    noStart: noAppRunning(3),
    run: (c, io) => cmdStatus(c, io),
  },
  quit: {
    usage: 'factory quit',
    summary: 'End the app: every sandbox is torn down (tasks still running are interrupted; a retry gives them a fresh sandbox). Never starts one',
    options: {},
    positionals: [0, 0],
    noStart: noAppRunning(0),
    run: (c, io) => cmdQuit(c, io),
  },
  hooks: {
    usage: 'factory hooks install|uninstall [--project|--user] [--command CMD] [--agent claude|codex]',
    summary:
      "Add (or remove) the session hooks: Claude Code's in .claude/settings.json, or with --agent codex Codex's in .codex/hooks.json (--project: the repository here, the default; --user: ~/.claude or ~/.codex)",
    options: { project: { type: 'boolean' }, user: { type: 'boolean' }, command: { type: 'string' }, agent: { type: 'string' } },
    positionals: [1, 1],
    run: () => Promise.reject(new Error('hooks runs without the app')),
    runLocal: (io, v, p) => cmdHooks(io, v, p[0]!),
  },
  hook: {
    usage: 'factory hook session-start|pre-tool-use --via CMD|run <routed>|subagent-start|subagent-stop|stop|session-end [--agent codex]   (Claude Code or Codex runs these; hook input JSON on stdin)',
    summary:
      "The Claude Code session hooks: start provisions the session's sandbox, pre-tool-use routes each command into it (and denies what would run here), " +
      'run is a routed command, subagent-start/-stop give a subagent its own sandbox and bring its work back, stop runs the leak check, session-end checks and destroys',
    options: { via: { type: 'string' }, agent: { type: 'string' } },
    positionals: [1, 2],
    run: (c, io, v, p) => runHook(c, io, p[0]!, v, p[1]),
  },
};

/** `factory claude` and `factory codex`: the agent's own TUI in a fresh sandbox (agent-session-command.ts). */
function agentSessionCommand(name: string, agent: SessionAgent, displayName: string): Command {
  return {
    usage: `factory ${name} [repo] [--with-changes] [-- <${name} args>…]   or   factory ${name} --resume <task>`,
    summary:
      `${displayName}'s own interactive TUI in a fresh sandbox with the repository (default: this folder) seeded at HEAD (--with-changes: and its uncommitted changes), ` +
      'keys through the proxy; when it exits its work goes to review like a task\'s. A closed terminal leaves it running for a while: --resume attaches again',
    options: { 'with-changes': { type: 'boolean' }, resume: { type: 'string' } },
    positionals: [0, 1],
    rest: true,
    run: (c, io, v, p, rest) =>
      cmdAgentSession(c, io, {
        agent,
        withChanges: v['with-changes'] === true,
        args: rest,
        ...(p[0] !== undefined ? { repo: p[0] } : {}),
        ...(typeof v.resume === 'string' ? { resume: v.resume } : {}),
      }),
  };
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}
