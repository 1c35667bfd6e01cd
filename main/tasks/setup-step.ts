// The setup step: a repository's environment (Debian packages, Node, its own
// install) prepared in the sandbox before the pipeline, as one visible terminal
// session. The host writes the script: each step runs in a subshell (as root, or
// as the agent user in /work/repo) and a failing step ends the script with
// 100 + its index, so the host names the step that failed from the exit status.
import type { ClientChannel } from 'ssh2';
import { FactoryError } from '../../common/errors.js';
import { GUEST_AGENT_USER, GUEST_FACTORY_DIR, GUEST_REPO_DIR, asAgentArgv, exportLines, shellQuote } from '../guest/guest-shell.js';
import type { GuestSsh } from '../guest/guest-ssh.js';
import { writeGuestFile, type StageTerminals } from '../pipeline/stage-runner.js';
import { KEPT_OUTPUT_BYTES, framedSource, stageHeader } from '../pipeline/stage-frame.js';
import { setupFailureReason } from '../environment/setup-script.js';
import type { TerminalSource } from '../terminal/types.js';

/** One step of a setup plan (main/environment/setup-script.ts makes them). */
export interface SetupStepSpec {
  name: string;
  user: 'root' | 'agent';
  script: string;
  /** The line the terminal shows for it; never a secret. */
  display: string;
  timeoutSeconds: number;
}

export type SetupResult =
  | { status: 'passed'; sessionId: string; durationMs: number }
  | {
      status: 'failed' | 'cancelled';
      sessionId?: string;
      durationMs: number;
      /** The step that failed (undefined when the script ended some other way). */
      step?: string;
      exitCode: number | null;
      summary: string;
      /** The last lines of its output, for the task's error. */
      detail: string;
    };

export interface SetupRunnerDeps {
  terminals: StageTerminals;
  sourceForChannel: (channel: ClientChannel) => TerminalSource;
  ptySize?: { cols: number; rows: number };
}

const STEP_EXIT_BASE = 100;
const MAX_STEPS = 50;
const SETUP_DIR = `${GUEST_FACTORY_DIR}/setup`;
const SETUP_SCRIPT = `${SETUP_DIR}/setup.sh`;
const SETUP_ENV = `${SETUP_DIR}/env.sh`;
const SETUP_PROCESSES = `${SETUP_DIR}/processes-before`;

/** Lines "pid start-time" of every process (pure bash: each process start is slow under emulation). */
export const LIST_PROCESSES = [
  'for d in /proc/[0-9]*; do',
  '  read -r l < "$d/stat" 2>/dev/null || continue',
  '  set -- ${l##*) }',
  '  echo "${d#/proc/} ${20}"',
  'done',
].join('\n');

/**
 * Ends what setup left running, before its disk (and memory) becomes a layer: every process of the
 * agent user, and every process started since `before` was listed whose parents lead back to PID 1
 * without passing a process that was there before (setup's orphans: its daemons, its `cmd &`), never
 * one under a session the host holds (sshd was there before). Stopped first, so none forks on; in
 * rounds, until none is left. Pure bash; the file is a parameter for its test.
 */
export function endLeftoversScript(before = SETUP_PROCESSES): string {
  return [
    `runuser -u ${GUEST_AGENT_USER} -- bash -c 'kill -KILL -1' 2>/dev/null`,
    'declare -A keep=()',
    `while read -r p t; do keep[$p]=$t; done < ${shellQuote(before)} || { echo 'the list of processes from before setup is missing' >&2; exit 1; }`,
    'killed=0',
    'for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do',
    '  declare -A parent=() start=()',
    '  for d in /proc/[0-9]*; do',
    '    read -r l < "$d/stat" 2>/dev/null || continue',
    '    set -- ${l##*) }',
    '    [ "$1" = Z ] && continue',
    '    p=${d#/proc/}; parent[$p]=$2; start[$p]=${20}',
    '  done',
    '  victims=()',
    '  for p in "${!parent[@]}"; do',
    '    [ "$p" = 1 ] || [ "$p" = 2 ] || [ "${parent[$p]}" = 2 ] || [ "$p" = $$ ] && continue',
    '    [ "${keep[$p]-}" = "${start[$p]}" ] && continue',
    '    q=$p; kept=0',
    '    while q=${parent[$q]-1}; [ "$q" != 1 ] && [ "$q" != 0 ]; do',
    '      if [ "${keep[$q]-}" = "${start[$q]-}" ]; then kept=1; break; fi',
    '    done',
    '    [ $kept = 0 ] && victims+=("$p")',
    '  done',
    '  [ ${#victims[@]} = 0 ] && break',
    '  kill -STOP "${victims[@]}" 2>/dev/null; kill -KILL "${victims[@]}" 2>/dev/null',
    '  killed=$((killed + ${#victims[@]}))',
    '  unset parent start',
    '  sleep 0.2',
    'done',
    'echo "ended $killed"',
  ].join('\n');
}

/** The whole setup as one bash script run as root; the folders are parameters for its test. */
export function setupScript(steps: SetupStepSpec[], where: { setupDir?: string; repoDir?: string } = {}): string {
  if (steps.length > MAX_STEPS) throw new FactoryError('InvalidPipelineConfig', `setup has ${steps.length} steps, more than ${MAX_STEPS}`);
  const dir = where.setupDir ?? SETUP_DIR;
  const repo = where.repoDir ?? GUEST_REPO_DIR;
  const env = `${dir}/env.sh`;
  const lines = ['set -u', `. ${shellQuote(env)}`, 'export DEBIAN_FRONTEND=noninteractive'];
  steps.forEach((step, i) => {
    const inRepo = `. ${shellQuote(env)} && cd ${shellQuote(repo)} && bash -e ${shellQuote(`${dir}/step-${i}.sh`)}`;
    const run = step.user === 'root' ? ['bash', '-c', inRepo].map(shellQuote).join(' ') : asAgentArgv(['bash', '-c', inRepo]);
    lines.push(
      `printf '\\n\\033[1m▶ %s\\033[0m\\n' ${shellQuote(`${step.name}${step.user === 'root' ? ' (root)' : ''}: ${step.display}`)}`,
      // --foreground: the step stays in the terminal's foreground process group; otherwise a program that
      // sets the terminal up (apt, dpkg) is stopped by SIGTTOU and setup hangs.
      'began=$SECONDS',
      `timeout --foreground --kill-after=10 ${step.timeoutSeconds} ${run}`,
      `rc=$?; if [ $rc -ne 0 ]; then printf '\\n%s failed (exit status %d)\\n' ${shellQuote(step.name)} "$rc"; exit ${STEP_EXIT_BASE + i}; fi`,
      // Each step's time, so a slow setup says which step to look at (\r\e[K: over a spinner's last frame).
      `printf '\\r\\033[K%s: %d s\\n' ${shellQuote(step.name)} $((SECONDS - began))`,
    );
  });
  lines.push("printf '\\nsetup done\\n'");
  return lines.join('\n') + '\n';
}

export class SetupRunner {
  constructor(private readonly deps: SetupRunnerDeps) {}

  /** After a passed setup, before its freeze: nothing setup started may run on in the layer. Resolves to how many were ended. */
  async endLeftovers(ssh: Pick<GuestSsh, 'run'>): Promise<number> {
    const r = await ssh.run(`bash -c ${shellQuote(endLeftoversScript())}`, { timeoutMs: 120_000 });
    const ended = /ended (\d+)/.exec(r.stdout);
    if (r.code !== 0 || !ended) throw new Error(`ending what setup left running failed: ${(r.stderr || r.stdout).trim().slice(0, 200)}`);
    return Number(ended[1]);
  }

  async run(args: {
    taskId: string;
    ssh: GuestSsh;
    steps: SetupStepSpec[];
    /** Every step's environment: the broker's proxy variables and placeholders, the plan's own env. */
    env: Record<string, string>;
    signal: AbortSignal;
    onSession: (sessionId: string) => void;
  }): Promise<SetupResult> {
    const { ssh, steps, signal } = args;
    const started = Date.now();
    if (signal.aborted) return { status: 'cancelled', durationMs: 0, exitCode: null, summary: 'cancelled', detail: '' };
    await writeGuestFile(ssh, SETUP_ENV, exportLines(args.env) + '\n');
    for (const [i, step] of steps.entries()) await writeGuestFile(ssh, `${SETUP_DIR}/step-${i}.sh`, step.script.endsWith('\n') ? step.script : step.script + '\n');
    await writeGuestFile(ssh, SETUP_SCRIPT, setupScript(steps));
    // What runs before setup, so what setup leaves running can be told apart (endLeftovers).
    const listed = await ssh.run(`bash -c ${shellQuote(LIST_PROCESSES)} > ${SETUP_PROCESSES}`, { timeoutMs: 60_000 });
    if (listed.code !== 0) throw new FactoryError('SetupFailed', `listing the sandbox's processes before setup failed: ${listed.stderr.trim().slice(0, 200)}`);

    const pty = this.deps.ptySize ?? { cols: 120, rows: 32 };
    const channel = await ssh.exec(`bash ${SETUP_SCRIPT}`, { pty });
    let cancelled = false;
    const display = steps.map((s) => s.name).join(' → ');
    const framed = framedSource(this.deps.sourceForChannel(channel), stageHeader(`setup: ${display}`), (code, lost) => ({ code, lost, timedOut: false, cancelled }));
    const info = this.deps.terminals.register({ taskId: args.taskId, kind: 'stage', title: 'setup', cols: pty.cols, rows: pty.rows, source: framed.source, persistLog: true });
    args.onSession(info.id);
    const onAbort = () => {
      cancelled = true;
      this.deps.terminals.close(info.id);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const exit = await this.deps.terminals.waitForExit(info.id);
      const durationMs = Date.now() - started;
      if (exit.code === 0 && !cancelled) return { status: 'passed', sessionId: info.id, durationMs };
      const detail = framed.tail(4096).split('\n').slice(-25).join('\n');
      if (cancelled) return { status: 'cancelled', sessionId: info.id, durationMs, exitCode: null, summary: 'cancelled', detail };
      const index = exit.code !== null ? exit.code - STEP_EXIT_BASE : -1;
      const step = index >= 0 && index < steps.length ? steps[index]!.name : undefined;
      const why = step ? setupFailureReason(framed.tail(KEPT_OUTPUT_BYTES)) : undefined;
      const summary = step
        ? `${step} failed${why ? `: ${why}` : ''}`
        : exit.lost
          ? 'the sandbox connection was lost during setup'
          : `setup ended with exit status ${exit.code ?? 'unknown'}`;
      return { status: 'failed', sessionId: info.id, durationMs, ...(step ? { step } : {}), exitCode: exit.code, summary, detail };
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }
}
