// The soak (issue 30): the real app (its web host entry, in its own process, with
// real QEMU, git and keychain) driven through its API as a busy team would, in
// waves of tasks over several repositories with the parallel setting at 3, while
// faults are injected at seeded random moments. After every fault and at the end
// the invariants are checked; what broke is collected, never thrown, so one run
// reports everything it saw.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { StageResult, Task, TaskPhase } from '../../common/domain.js';
import { TaskRecord } from '../../main/state/state-store.js';
import { startAppProcess, type AppProcess } from '../support/app-process.js';
import { runCli } from '../support/cli.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { alive, bytesUnder, credentialHits, leftoversIn, processesUnder, type Leftover } from './leftovers.js';
import { MODEL_FAULT_KINDS, runModelFaults, type ModelFault } from './model-faults.js';
import { seededRng, type Rng } from './rng.js';

export const FAULT_KINDS = [
  'qemu-kill-stage',
  'qemu-kill-setup',
  'sshd-kill',
  'app-kill-setup',
  'app-kill-stage',
  'app-kill-pullback',
  'app-kill-approve',
  'cli-approve-vs-destroy',
  'disk-full',
  'keychain-gone',
  ...MODEL_FAULT_KINDS,
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];
const isModelFault = (f: FaultKind): f is ModelFault => (MODEL_FAULT_KINDS as readonly string[]).includes(f);

/** Faults the issue asks for that this harness does not inject yet, with the reason (reported, never hidden). */
export const NOT_INJECTED: Record<string, string> = {};

export interface SoakOptions {
  seed: number;
  /** The profile the options came from, for the replay line. */
  profile?: string;
  /** Tasks in all (quick sandboxes not counted). */
  tasks: number;
  repos: number;
  parallel: number;
  faults: FaultKind[];
  /** Guest memory per sandbox, MiB. */
  vmMemoryMb: number;
  /** How long a stage's work sleeps, seconds: the window in which faults land. */
  stageSleepSec: number;
  log?: (line: string) => void;
}

export const PROFILES: Record<'short' | 'medium' | 'full' | 'model', Omit<SoakOptions, 'seed' | 'log'>> = {
  short: { tasks: 5, repos: 4, parallel: 3, vmMemoryMb: 512, stageSleepSec: 2, faults: ['qemu-kill-stage', 'app-kill-stage', 'cli-approve-vs-destroy', 'disk-full'] },
  // Model faults twice each in medium, three times in full: each a Claude Code task of its own.
  medium: { tasks: 12, repos: 5, parallel: 3, vmMemoryMb: 512, stageSleepSec: 3, faults: [...FAULT_KINDS, ...MODEL_FAULT_KINDS] },
  // The model-upstream faults alone (one task each), for replaying one of them.
  model: { tasks: 0, repos: 1, parallel: 3, vmMemoryMb: 512, stageSleepSec: 1, faults: [...MODEL_FAULT_KINDS] },
  full: { tasks: 40, repos: 6, parallel: 3, vmMemoryMb: 512, stageSleepSec: 20, faults: [...FAULT_KINDS, ...FAULT_KINDS, ...MODEL_FAULT_KINDS] },
};

export interface InvariantBreak {
  at: string;
  invariant: string;
  detail: string;
}

export interface MemorySample {
  /** Seconds since the run started. */
  t: number;
  rssMb: number;
  /** Tasks that reached a terminal state so far. */
  done: number;
  /** Which app process (0 the first, 1 after the first restart...). */
  life: number;
}

/** One app process's RSS once 5 tasks were done in it, against its RSS at its end. */
export interface MemoryRatio {
  life: number;
  tasksDone: number;
  rssAfter5Mb: number;
  rssEndMb: number;
  /** rssEndMb / rssAfter5Mb. */
  ratio: number;
  withinBound: boolean;
}

export interface ResourceSample {
  /** Tasks that reached a terminal state so far, and which app process. */
  done: number;
  life: number;
  timers: number;
  handles: number;
  eventListeners: number;
  terminalListeners: number;
}

export interface SoakReport {
  seed: number;
  options: Omit<SoakOptions, 'log'>;
  startedAt: string;
  durationSec: number;
  tasksByOutcome: Record<string, number>;
  quickSandboxes: number;
  /** Hooks-style sessions (SessionStart, a routed command, SessionEnd). */
  hookSessions: number;
  actions: Record<string, number>;
  faultsInjected: Record<string, number>;
  /** Planned faults whose moment never came (e.g. a pull-back too quick to catch), by kind. */
  faultsMissed: Record<string, number>;
  faultsNotInjected: Record<string, string>;
  invariantsChecked: number;
  invariantsBroken: InvariantBreak[];
  leftovers: Leftover[];
  leftoverProcesses: Array<{ pid: number; command: string }>;
  credentialHits: string[];
  memory: { samples: MemorySample[]; bound: string; verdict: string; ratios: MemoryRatio[] };
  /** The app's timers, handles and listeners after each wave and at the end (system.activity), and their verdict. */
  resources: { samples: ResourceSample[]; bound: string; verdict: string };
  disk: { baselineBytes: number; endBytes: number; keptLogBytes: number };
  appRestarts: number;
  notes: string[];
}

const TERMINAL: TaskPhase[] = ['review', 'approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed'];
/** A task in one of these has nothing running for it any more. */
const SETTLED: TaskPhase[] = ['approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pipelineFor(kind: 'node' | 'plain', sleepSec: number): string {
  return JSON.stringify({
    stages: {
      plan: { command: 'echo PLAN-DONE' },
      build: {
        command: [
          `sleep ${sleepSec}`,
          kind === 'node' ? 'echo "export const n = $(od -An -N2 -tu2 /dev/urandom | tr -d " ");" > src/soak.js' : 'od -An -N4 -tx4 /dev/urandom > soak.txt',
          'echo BUILD-DONE',
        ].join('\n'),
      },
      test: { command: `sleep ${Math.max(1, Math.round(sleepSec / 2))}; echo "tests: 1 passed"` },
    },
  });
}

async function makeRepos(n: number, sleepSec: number): Promise<FixtureRepo[]> {
  const repos: FixtureRepo[] = [];
  for (let i = 0; i < n; i++) {
    const kind = i % 2 === 0 ? 'node' : 'plain';
    const files: Record<string, string> = { 'README.md': `# soak repo ${i}\n`, '.factory/pipeline.json': pipelineFor(kind, sleepSec) };
    if (kind === 'node') {
      files['package.json'] = JSON.stringify({ name: `soak-${i}`, version: '1.0.0', private: true, type: 'module' }, null, 2);
      files['src/index.js'] = 'export const hello = () => "hi";\n';
    }
    repos.push(await makeRepo({ files }));
  }
  return repos;
}

/** Mounts a tmpfs of `mb` MiB on dir when this process may (root on Linux); says why not otherwise. */
function mountSmallDisk(dir: string, mb: number): { mounted: boolean; why?: string } {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return { mounted: false, why: 'not root: no small tmpfs data folder, so the disk-full fault is skipped' };
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${mb}m,mode=700`, 'tmpfs', dir], { stdio: 'pipe' });
    return { mounted: true };
  } catch (err) {
    return { mounted: false, why: `mounting a tmpfs failed (${(err as Error).message.split('\n')[0]}): the disk-full fault is skipped` };
  }
}

function rssMbOf(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The gnome-keyring-daemon started for this run by test/support/with-keyring.sh (a child of one of our ancestors). */
function ourKeyringDaemon(): number | undefined {
  const ancestors = new Set<number>();
  let pid = process.pid;
  for (let i = 0; i < 32 && pid > 1; i++) {
    ancestors.add(pid);
    try {
      pid = Number(/^\d+ \(.*\) \S+ (\d+)/s.exec(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))![1]);
    } catch {
      break;
    }
  }
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const m = /^\d+ \((.*)\) \S+ (\d+)/s.exec(stat);
      if (m && m[1]!.startsWith('gnome-keyring') && ancestors.has(Number(m[2]))) return Number(entry);
    } catch {
      // gone
    }
  }
  return undefined;
}

export async function runSoak(opts: SoakOptions): Promise<SoakReport> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const rng: Rng = seededRng(opts.seed);
  const started = Date.now();
  const since = () => ((Date.now() - started) / 1000).toFixed(1);
  const say = (line: string) => log(`[soak ${since()}s] ${line}`);

  const report: SoakReport = {
    seed: opts.seed,
    options: { ...opts, log: undefined } as Omit<SoakOptions, 'log'>,
    startedAt: new Date(started).toISOString(),
    durationSec: 0,
    tasksByOutcome: {},
    quickSandboxes: 0,
    hookSessions: 0,
    actions: {},
    faultsInjected: {},
    faultsMissed: {},
    faultsNotInjected: { ...NOT_INJECTED },
    invariantsChecked: 0,
    invariantsBroken: [],
    leftovers: [],
    leftoverProcesses: [],
    credentialHits: [],
    memory: { samples: [], bound: '', verdict: '', ratios: [] },
    resources: { samples: [], bound: '', verdict: '' },
    disk: { baselineBytes: 0, endBytes: 0, keptLogBytes: 0 },
    appRestarts: 0,
    notes: [],
  };
  delete (report.options as Partial<SoakOptions>).log;
  const count = (bag: Record<string, number>, key: string) => (bag[key] = (bag[key] ?? 0) + 1);
  const check = (at: string, invariant: string, ok: boolean, detail: () => string) => {
    report.invariantsChecked++;
    if (!ok) {
      const d = detail();
      report.invariantsBroken.push({ at, invariant, detail: d });
      say(`INVARIANT BROKEN (${invariant}) at ${at}: ${d}`);
    }
  };

  const dataDir = tempDir('factory-soak-');
  const disk = opts.faults.includes('disk-full') ? mountSmallDisk(dataDir, 1536) : { mounted: false, why: 'not asked for' };
  if (opts.faults.includes('disk-full') && !disk.mounted) report.faultsNotInjected['disk-full'] = disk.why!;
  const keyringDaemon = ourKeyringDaemon();
  let stoppedKeyring: number | undefined;
  if (opts.faults.includes('keychain-gone') && keyringDaemon === undefined) {
    report.faultsNotInjected['keychain-gone'] = 'no keychain daemon of this run to stop (run the soak through test/support/with-keyring.sh)';
  }
  const repos = await makeRepos(opts.repos, opts.stageSleepSec);
  const repoState = new Map(repos.map((r) => [r.dir, { head: r.head(), status: r.status() }]));
  /** Every task the run created: its last known state. */
  const known = new Map<string, Task>();
  /** Tasks removed on purpose (never counted as lost). */
  const removed = new Set<string>();
  let app!: AppProcess;
  let life = -1;
  let sampler: NodeJS.Timeout | undefined;
  const secret = `sk-ant-api03-soak-${randomBytes(24).toString('hex')}`;
  let credentialId: string | undefined;

  /** Set while the app is being killed and restarted: calls wait for the new one. */
  let restarting: Promise<void> | undefined;
  /** An API call that outlives an app restart: a call the kill cut is sent again to the new app. */
  const call = async <T = unknown>(method: string, input: unknown = {}): Promise<T> => {
    for (let attempt = 0; ; attempt++) {
      if (restarting) await restarting;
      const target = app;
      try {
        return await target.call<T>(method, input);
      } catch (err) {
        const cut = err instanceof TypeError && /fetch failed/.test(err.message);
        if (!cut || attempt >= 100) throw err;
        if (!restarting && target === app) {
          // The app went away without the harness killing it: that is a finding, not a retry.
          if (await Promise.race([target.exited.then(() => true), sleep(2000).then(() => false)])) throw new Error(`the app exited on its own: ${target.output().slice(-2000)}`);
        }
        await sleep(200);
      }
    }
  };

  const startApp = async () => {
    app = await startAppProcess({ dataDir });
    life++;
    say(`app ${life} serving (pid ${app.pid})`);
  };
  const doneCount = () => [...known.values()].filter((t) => SETTLED.includes(t.phase)).length;
  const sample = () => {
    const rss = rssMbOf(app.pid);
    if (rss !== undefined) report.memory.samples.push({ t: Number(since()), rssMb: Math.round(rss * 10) / 10, done: doneCount(), life });
  };

  const sampleResources = async () => {
    const activity = await call<{ resources?: Omit<ResourceSample, 'done' | 'life'> }>('system.activity').catch(() => undefined);
    if (activity?.resources) report.resources.samples.push({ done: doneCount(), life, ...activity.resources });
  };

  const get = async (id: string): Promise<Task> => {
    const t = await call<Task>('tasks.get', { taskId: id });
    known.set(id, t);
    return t;
  };
  const waitFor = async (id: string, what: string, done: (t: Task) => boolean, timeoutMs = 240_000): Promise<Task | undefined> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const t = await get(id);
      if (done(t)) return t;
      if (Date.now() > deadline) {
        check(`task ${id}`, 'a task reaches a terminal state', false, () => `${what}: still ${t.phase} after ${timeoutMs / 1000}s (${JSON.stringify(t.error ?? t.stages.map((s) => s.status))})`);
        return undefined;
      }
      await sleep(250);
    }
  };
  const stage = (t: Task, name: StageResult['name']) => t.stages.find((s) => s.name === name);
  const qemuPidOf = (id: string): number | undefined => {
    try {
      return TaskRecord.parse(JSON.parse(fs.readFileSync(path.join(dataDir, 'state', 'tasks', `${id}.json`), 'utf8'))).qemuPid;
    } catch {
      return undefined;
    }
  };

  /** A failed or interrupted task says why, by name; a running one has a sandbox. */
  const checkTaskShape = (t: Task, at: string) => {
    if (t.phase === 'failed' || t.phase === 'interrupted') {
      // Named: one of the app's own error names, not a bare "Error" from a library.
      check(at, 'a failed task carries a named error', !!t.error?.name && t.error.name !== 'Error' && !!t.error.message, () => `task ${t.id} is ${t.phase} with error ${JSON.stringify(t.error)}`);
    }
    if (t.phase === 'running') {
      check(at, 'no task runs without a sandbox', ['running', 'booting'].includes(t.sandbox.status), () => `task ${t.id} is running with sandbox ${t.sandbox.status}`);
    }
  };

  /** The user's repository: HEAD, index and working tree as they were; a factory branch only as Approve makes it. */
  const checkRepo = (repo: FixtureRepo, t: Task | undefined, at: string, reviewedFiles?: string[]) => {
    const before = repoState.get(repo.dir)!;
    check(at, "the user's HEAD is untouched", repo.head() === before.head, () => `HEAD moved from ${before.head} to ${repo.head()}`);
    check(at, "the user's index and working tree are untouched", repo.status() === before.status, () => `status now:\n${repo.status()}`);
    if (!t) return;
    let branchCommit = '';
    try {
      branchCommit = repo.git('rev-parse', '--verify', '-q', `refs/heads/${t.branch}`).trim();
    } catch {
      branchCommit = '';
    }
    if (!branchCommit) {
      check(at, 'Approve is atomic', t.phase !== 'approved', () => `task ${t.id} is approved but branch ${t.branch} does not exist`);
      return;
    }
    const parent = repo.git('rev-parse', `${branchCommit}^`).trim();
    check(at, 'Approve is atomic', parent === t.baseCommit, () => `branch ${t.branch} has parent ${parent}, not the base ${t.baseCommit}`);
    if (reviewedFiles) {
      const changed = repo.git('diff', '--name-only', t.baseCommit, branchCommit).trim().split('\n').filter(Boolean).sort();
      check(at, 'Approve lands the reviewed tree', JSON.stringify(changed) === JSON.stringify([...reviewedFiles].sort()), () => `branch changes ${changed.join(', ')}; review showed ${reviewedFiles.join(', ')}`);
    }
  };

  /** After a restart: every task the run knew is still listed, no record was set aside, nothing silently reset. */
  const checkStateKept = async (at: string) => {
    const listed = new Set((await call<Task[]>('tasks.list')).map((t) => t.id));
    const lost = [...known.keys()].filter((id) => !removed.has(id) && !listed.has(id));
    check(at, 'the state file is never silently reset', lost.length === 0, () => `tasks missing after restart: ${lost.join(', ')}`);
    const status = await call<{ stateProblems?: unknown[] }>('system.status');
    check(at, 'every state file reads after a crash', !status.stateProblems?.length, () => `state problems: ${JSON.stringify(status.stateProblems)}`);
  };

  /** No QEMU/socat/ssh/git process left for a task that has no live sandbox. */
  const checkNoOrphans = (at: string) => {
    const liveQemu = new Set([...known.values()].filter((t) => ['running', 'booting'].includes(t.sandbox.status)).map((t) => qemuPidOf(t.id)).filter((p): p is number => !!p));
    // Mid-run only QEMU is attributable (a live VM's socat is its own child); at the end everything is checked.
    const orphans = processesUnder([dataDir]).filter((p) => /qemu-system/.test(p.command) && !liveQemu.has(p.pid));
    check(at, 'no QEMU is left that no live task owns', orphans.length === 0, () => JSON.stringify(orphans));
  };

  const killApp = async (why: string) => {
    say(`SIGKILL the app (${why})`);
    let restarted!: () => void;
    restarting = new Promise((r) => (restarted = r));
    app.kill('SIGKILL');
    await app.exited;
    report.appRestarts++;
    try {
      await startApp();
    } finally {
      restarting = undefined;
      restarted();
    }
    for (const t of await call<Task[]>('tasks.list')) known.set(t.id, t);
    await checkStateKept(`restart after ${why}`);
    // The new app reaped what the old one left: no QEMU survives for a task that is not running.
    const orphans = processesUnder([dataDir]).filter((p) => /qemu-system/.test(p.command));
    check(`restart after ${why}`, 'a restart reaps the orphaned QEMU', orphans.length === 0, () => JSON.stringify(orphans));
    for (const t of known.values()) checkTaskShape(t, `restart after ${why}`);
  };

  // ---- plan: which task gets which fault, and what the user does with each ----
  const faultsPlanned = [...opts.faults].filter((f) => !(f in report.faultsNotInjected));
  const taskFaults = faultsPlanned.filter((f) => f !== 'disk-full' && f !== 'keychain-gone' && !isModelFault(f));
  const faultOf = new Map<number, FaultKind>();
  // App kills go first, one per wave at a random place in it: the app's last life then
  // runs long enough for its memory to be held to the bound. The rest go anywhere.
  const appKills = taskFaults.filter((f) => f.startsWith('app-kill'));
  appKills.forEach((f, wave) => {
    const slot = wave * opts.parallel + rng.int(0, opts.parallel - 1);
    if (slot < opts.tasks) faultOf.set(slot, f);
  });
  const slots = rng.shuffle([...Array(opts.tasks).keys()].filter((i) => !faultOf.has(i)));
  taskFaults.filter((f) => !f.startsWith('app-kill')).forEach((f, i) => slots.length && faultOf.set(slots[i % slots.length]!, f));
  if (taskFaults.length > opts.tasks) report.notes.push(`${taskFaults.length - opts.tasks} task faults had no task of their own and were left out`);

  try {
    report.disk.baselineBytes = bytesUnder(dataDir);
    await startApp();
    await call('settings.set', { maxParallelTasks: opts.parallel, vmMemoryMb: opts.vmMemoryMb, keepSandboxAfterDecisionMinutes: 0, warmPoolSize: 0 });
    try {
      credentialId = (await call<{ id: string }>('credentials.set', { kind: 'anthropic', label: 'soak', value: secret })).id;
    } catch (err) {
      report.notes.push(`no credential stored (${(err as Error).message}): the credential scan has nothing to look for`);
    }
    sampler = setInterval(sample, 2000);
    sample();

    // ---- one task's life ----
    const lifeOf = async (index: number): Promise<void> => {
      const repo = repos[index % repos.length]!;
      const fault = faultOf.get(index);
      const at = `task #${index}${fault ? ` (${fault})` : ''}`;
      const created = await call<Task>('tasks.create', { repoPath: repo.dir, title: `soak task ${index}${fault ? ` with ${fault}` : ''}`, agent: 'command' });
      known.set(created.id, created);
      const id = created.id;
      say(`${at}: created ${id} on ${path.basename(repo.dir)}`);

      const missed = () => {
        count(report.faultsMissed, fault!);
        say(`${at}: the moment for ${fault} never came`);
      };
      if (fault === 'qemu-kill-stage' || fault === 'sshd-kill' || fault === 'app-kill-stage') {
        const t = await waitFor(id, 'build stage to run', (x) => stage(x, 'build')?.status === 'running' || TERMINAL.includes(x.phase));
        if (!t || stage(t, 'build')?.status !== 'running') missed();
        else {
          await sleep(rng.int(0, opts.stageSleepSec * 500));
          count(report.faultsInjected, fault);
          if (fault === 'qemu-kill-stage') {
            const pid = qemuPidOf(id);
            say(`${at}: SIGKILL QEMU ${pid} mid-stage`);
            if (pid) process.kill(pid, 'SIGKILL');
          } else if (fault === 'sshd-kill') {
            say(`${at}: kill the guest's sshd`);
            // The exec's own connection dies with sshd: its failure is the fault working, the task's end is what is checked.
            await call('tasks.exec', { taskId: id, argv: ['sh', '-c', 'pkill -9 -x sshd; pkill -9 sshd'], timeoutSec: 20 }).catch(() => undefined);
          } else await killApp(`${at} mid-stage`);
          const end = await waitFor(id, `${fault} to end the task`, (x) => TERMINAL.includes(x.phase));
          if (end) {
            checkTaskShape(end, at);
            check(at, 'a fault ends the task as failed or interrupted, by name', end.phase !== 'review' || fault === 'sshd-kill', () => `task ${id} reached ${end.phase} after ${fault}`);
          }
        }
      } else if (fault === 'qemu-kill-setup' || fault === 'app-kill-setup') {
        const t = await waitFor(id, 'setup', (x) => (['provisioning', 'seeding'].includes(x.phase) && !!qemuPidOf(x.id)) || x.phase === 'running' || TERMINAL.includes(x.phase), 240_000);
        if (!t || !['provisioning', 'seeding'].includes(t.phase)) missed();
        else {
          count(report.faultsInjected, fault);
          if (fault === 'qemu-kill-setup') {
            const pid = qemuPidOf(id);
            say(`${at}: SIGKILL QEMU ${pid} during setup (${t.phase})`);
            if (pid) process.kill(pid, 'SIGKILL');
          } else await killApp(`${at} during setup`);
          const end = await waitFor(id, `${fault} to end the task`, (x) => TERMINAL.includes(x.phase));
          if (end) checkTaskShape(end, at);
        }
      } else if (fault === 'app-kill-pullback') {
        const t = await waitFor(id, 'pull-back', (x) => x.phase === 'pulling-back' || TERMINAL.includes(x.phase), 300_000);
        if (!t || t.phase !== 'pulling-back') missed();
        else {
          count(report.faultsInjected, fault);
          await killApp(`${at} during pull-back`);
          const end = await waitFor(id, 'the task after the restart', (x) => TERMINAL.includes(x.phase));
          if (end) checkTaskShape(end, at);
        }
      } else if (!fault && rng.chance(0.15)) {
        // A user cancels at a random moment.
        await sleep(rng.int(500, 15_000));
        const t = await get(id);
        if (!TERMINAL.includes(t.phase)) {
          count(report.actions, 'cancel');
          say(`${at}: cancel while ${t.phase}`);
          await call('tasks.cancel', { taskId: id }).catch((err: Error) => say(`${at}: cancel refused: ${err.name}: ${err.message}`));
        }
      }

      let t = await waitFor(id, 'the pipeline to end', (x) => TERMINAL.includes(x.phase), 300_000);
      if (!t) return;
      checkTaskShape(t, at);
      if (!fault && t.phase === 'failed') {
        // Nothing was injected: worth a look, so the report names it.
        report.notes.push(`${at} failed with no fault injected: ${t.error?.name}: ${t.error?.message.slice(0, 300)}`);
      }
      // A failed task is retried once now and then (a fresh try from the stage that failed).
      if ((t.phase === 'failed' || t.phase === 'interrupted') && rng.chance(0.5)) {
        count(report.actions, 'retry');
        say(`${at}: retry after ${t.phase} (${t.error?.name}: ${t.error?.message.slice(0, 300)})`);
        const r = await call<Task>('tasks.retry', { taskId: id }).catch((err: Error) => {
          say(`${at}: retry refused: ${err.name}: ${err.message}`);
          check(at, 'a refusal is named', !!err.name && err.name !== 'Error', () => `retry refused without a name: ${err.message}`);
          return undefined;
        });
        // Not the phase it was retried from (the record may still say so for a moment); interrupted counts when an app restart cut the retry.
        const restartsBefore = report.appRestarts;
        if (r) t = (await waitFor(id, 'the retried pipeline to end', (x) => TERMINAL.includes(x.phase) && (x.phase !== 'interrupted' || report.appRestarts > restartsBefore), 300_000)) ?? t;
        checkTaskShape(t, at);
      }

      if (t.phase === 'review') {
        const review = await call<{ files: Array<{ path: string }> }>('tasks.review', { taskId: id });
        const files = review.files.map((f) => f.path);
        if (fault === 'cli-approve-vs-destroy') {
          count(report.faultsInjected, fault);
          say(`${at}: two CLI clients race approve and destroy`);
          // --no-start: an app kill of another task's fault landing meanwhile must not make a client
          // start an app of its own (the CLI's default), which would hold the data folder the harness restarts on.
          if (restarting) await restarting;
          const [a, d] = await Promise.all([runCli(dataDir, ['--no-start', 'approve', id, '--json']), runCli(dataDir, ['--no-start', 'destroy', id, '--json'])]);
          say(`${at}: approve exit ${a.code}, destroy exit ${d.code}`);
          // With --json a refusal is {"error": …} on stdout, for scripts; without, a line on stderr.
          const saysWhy = (r: { code: number | null; stdout: string; stderr: string }) => r.code === 0 || r.stderr.trim().length > 0 || /"error":\s*\{\s*"name"/.test(r.stdout);
          check(at, 'a refused CLI call says why', saysWhy(a) && saysWhy(d), () => `approve: ${a.code} ${a.stdout.slice(0, 300)} ${a.stderr}; destroy: ${d.code} ${d.stdout.slice(0, 300)} ${d.stderr}`);
          checkRepo(repo, await get(id), at, files);
        } else if (fault === 'app-kill-approve') {
          count(report.faultsInjected, fault);
          // Straight to this app, not sent again after the kill: the crash decides what happened.
          const approving = app.call('tasks.approve', { taskId: id, confirm: ['unshown', 'secrets'] }).catch(() => undefined);
          await sleep(rng.int(0, 120));
          await killApp(`${at} during Approve`);
          await approving;
          const after = await get(id);
          checkRepo(repo, after, at, files);
          if (after.phase === 'review') {
            // Approve did not happen: it can be done again, once.
            const again = await call<Task>('tasks.approve', { taskId: id, confirm: ['unshown', 'secrets'] }).catch((err: Error) => {
              check(at, 'Approve after a crash works or says why', !!err.name, () => err.message);
              return undefined;
            });
            if (again) checkRepo(repo, again, at, files);
          }
        } else if (rng.chance(0.7)) {
          count(report.actions, 'approve');
          const a = await call<Task>('tasks.approve', { taskId: id, confirm: ['unshown', 'secrets'] }).catch((err: Error) => {
            say(`${at}: approve refused: ${err.name}: ${err.message}`);
            return undefined;
          });
          checkRepo(repo, a ?? (await get(id)), at, files);
        } else {
          count(report.actions, 'reject');
          await call('tasks.reject', { taskId: id }).catch((err: Error) => say(`${at}: reject refused: ${err.name}: ${err.message}`));
          checkRepo(repo, await get(id), at);
        }
      } else checkRepo(repo, t, at);

      // A decision a fault cut (both racing clients lost their app) or the app refused is made
      // again, as a user would: rejected, so that the task ends.
      if ((await get(id)).phase === 'review') {
        count(report.actions, 'reject');
        await call('tasks.reject', { taskId: id }).catch((err: Error) => say(`${at}: reject refused: ${err.name}: ${err.message}`));
      }

      // Whatever it ended as, nothing of it runs any more.
      const last = await get(id);
      if (['failed', 'cancelled', 'interrupted', 'review'].includes(last.phase) || last.sandbox.status === 'running') {
        await call('tasks.destroy', { taskId: id }).catch((err: Error) => say(`${at}: destroy: ${err.name}: ${err.message}`));
      }
      const final = await waitFor(id, 'the sandbox to go', (x) => !['running', 'booting', 'stopping'].includes(x.sandbox.status), 120_000);
      if (final) {
        count(report.tasksByOutcome, final.phase);
        say(`${at}: ${final.phase}${final.error ? ` (${final.error.name}: ${final.error.message.slice(0, 200)})` : ''}`);
      }
    };

    const quickLife = async () => {
      const repo = rng.pick(repos);
      const q = await call<Task>('sandboxes.quick', { repoPath: repo.dir, keep: true });
      known.set(q.id, q);
      report.quickSandboxes++;
      say(`quick sandbox ${q.id}`);
      await waitFor(q.id, 'the quick sandbox to run', (x) => x.phase === 'running' || TERMINAL.includes(x.phase), 180_000);
      await sleep(rng.int(0, 3000));
      await call('tasks.destroy', { taskId: q.id }).catch((err: Error) => say(`quick destroy: ${err.name}: ${err.message}`));
      const end = await waitFor(q.id, 'the quick sandbox to close', (x) => SETTLED.includes(x.phase) && x.sandbox.status !== 'running', 120_000);
      if (end) count(report.tasksByOutcome, `quick:${end.phase}`);
    };

    // A hooks-style session, as `factory hooks install` drives it: SessionStart provisions, the
    // PreToolUse hook routes a command into the sandbox (never run here), SessionEnd checks for
    // leaks and destroys. An app kill may cut it: a named refusal then is an answer, not a finding.
    const sessionLife = async () => {
      const repo = rng.pick(repos);
      const sessionId = `soak-session-${rng.int(0, 1e9)}`;
      const at = `session ${sessionId}`;
      const marker = path.join(os.tmpdir(), `factory-${sessionId}-ran-here`);
      const started = await call<{ task: Task }>('sessions.start', { sessionId, cwd: repo.dir });
      known.set(started.task.id, started.task);
      report.hookSessions++;
      say(`${at}: sandbox ${started.task.id}`);
      const ran = await call<{ exitCode: number | null; stdout: string }>('sessions.run', { sessionId, command: `touch ${marker}; hostname; test -d .git && echo IN-REPO`, dir: '' }).catch((err: Error) => err);
      if (ran instanceof Error) {
        check(at, 'a refused routed command says why, by name', ran.name !== 'Error' && !!ran.message, () => `${ran.name}: ${ran.message}`);
      } else {
        const out = Buffer.from(ran.stdout, 'base64').toString('utf8'); // streams come base64, as tasks.exec's
        check(at, "a routed command runs in the session's sandbox, in its repository", ran.exitCode === 0 && out.includes('IN-REPO') && !out.includes(os.hostname()), () => `exit ${ran.exitCode}: ${out.slice(0, 500)}`);
      }
      check(at, 'a routed command never runs on this computer', !fs.existsSync(marker), () => `${marker} exists`);
      fs.rmSync(marker, { force: true });
      const ended = await call<{ destroyed: boolean }>('sessions.end', { sessionId }).catch((err: Error) => err);
      if (ended instanceof Error) say(`${at}: end: ${ended.name}: ${ended.message}`);
      const last = await get(started.task.id);
      // Work a session brought back waits in review; the user rejects it here (no file changed).
      if (last.phase === 'review') await call('tasks.reject', { taskId: last.id }).catch((err: Error) => say(`${at}: reject: ${err.name}: ${err.message}`));
      if (SETTLED.includes(last.phase) === false || last.sandbox.status === 'running') await call('tasks.destroy', { taskId: last.id }).catch(() => undefined);
      const end = await waitFor(last.id, 'the session sandbox to go', (x) => SETTLED.includes(x.phase) && !['running', 'booting', 'stopping'].includes(x.sandbox.status), 120_000);
      if (end) count(report.tasksByOutcome, `session:${end.phase}`);
    };

    // ---- waves: `parallel` tasks at a time, a quick sandbox or a hooks session now and then ----
    let next = 0;
    let wave = 0;
    while (next < opts.tasks) {
      const size = Math.min(opts.parallel, opts.tasks - next);
      const indices = [...Array(size).keys()].map((k) => next + k);
      next += size;
      // App-wide faults need every task of the wave to survive them: at most one per wave.
      const appFaults = indices.filter((i) => faultOf.get(i)?.startsWith('app-kill'));
      for (const extra of appFaults.slice(1)) {
        // Counted, not dropped silently: the summary shows which planned faults did not run.
        count(report.faultsMissed, faultOf.get(extra)!);
        report.notes.push(`${faultOf.get(extra)} on task #${extra} left out: one app kill per wave`);
        faultOf.delete(extra);
      }
      say(`wave ${wave}: tasks ${indices.join(', ')}`);
      const lives = indices.map((i) => lifeOf(i).catch((err: Error) => check(`task #${i}`, 'the API answers (no crash of the harness)', false, () => `${err.name}: ${err.message}`)));
      if (wave % 2 === 0) lives.push(quickLife().catch((err: Error) => check('quick sandbox', 'the API answers (no crash of the harness)', false, () => `${err.name}: ${err.message}`)));
      else lives.push(sessionLife().catch((err: Error) => check('hooks session', 'the API answers (no crash of the harness)', false, () => `${err.name}: ${err.message}`)));
      await Promise.all(lives);
      checkNoOrphans(`after wave ${wave}`);
      await sampleResources();
      for (const t of await call<Task[]>('tasks.list')) checkTaskShape(t, `after wave ${wave}`);

      // The data folder's disk fills up between waves, while the app serves.
      if (wave === 0 && faultsPlanned.includes('disk-full')) {
        count(report.faultsInjected, 'disk-full');
        const filler = path.join(dataDir, 'soak-filler');
        say('fill the data folder’s disk');
        try {
          execFileSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=1M', 'status=none'], { stdio: 'ignore' });
        } catch {
          // dd ends with ENOSPC: full is the point
        }
        const refused = await call<Task>('tasks.create', { repoPath: repos[0]!.dir, title: 'soak task on a full disk', agent: 'command' }).then(
          async (t) => {
            known.set(t.id, t);
            return (await waitFor(t.id, 'a task on a full disk to fail', (x) => TERMINAL.includes(x.phase), 120_000)) ?? t;
          },
          (err: Error) => err,
        );
        const words = refused instanceof Error ? `${refused.name}: ${refused.message}` : `${refused.phase}: ${refused.error?.name}: ${refused.error?.message}`;
        say(`on a full disk: ${words}`);
        check('disk full', 'a full disk gives a clear error naming the folder', /no space|disk|full|ENOSPC/i.test(words) && (words.includes(dataDir) || /data folder/i.test(words)), () => words);
        const status = await call<{ dataDir: string }>('system.status').catch((err: Error) => err);
        check('disk full', 'the app keeps serving on a full disk', !(status instanceof Error), () => String(status));
        fs.rmSync(filler, { force: true });
        if (!(refused instanceof Error)) {
          // A task that never got a sandbox has nothing to destroy; its settling is checked next.
          await call('tasks.destroy', { taskId: refused.id }).catch(() => undefined);
          const gone = await waitFor(refused.id, 'the full-disk task to settle', (x) => !['running', 'booting', 'stopping'].includes(x.sandbox.status), 60_000);
          if (gone) count(report.tasksByOutcome, `disk-full:${gone.phase}`);
        }
        // Every state file still reads: the full disk corrupted nothing.
        for (const name of fs.readdirSync(path.join(dataDir, 'state', 'tasks')).filter((n) => n.endsWith('.json'))) {
          const ok = TaskRecord.safeParse(JSON.parse(fs.readFileSync(path.join(dataDir, 'state', 'tasks', name), 'utf8'))).success;
          check('disk full', 'a full disk never corrupts a state file', ok, () => `${name} does not read`);
        }
      }
      wave++;
    }

    if (faultsPlanned.includes('keychain-gone') && keyringDaemon !== undefined) {
      count(report.faultsInjected, 'keychain-gone');
      // Stopped, not killed: a killed daemon is started again by D-Bus activation (with another
      // keyring folder), while a stopped one is a keychain that no longer answers.
      say(`stop the keychain daemon (pid ${keyringDaemon}, SIGSTOP)`);
      process.kill(keyringDaemon, 'SIGSTOP');
      stoppedKeyring = keyringDaemon;
      const status = await call<{ keychain?: { ok: boolean; error?: { name: string; message: string } } }>('system.status');
      check('keychain gone', 'a missing keychain is reported by name', status.keychain?.ok === false && !!status.keychain.error?.name, () => JSON.stringify(status.keychain));
      const listed = await call<Task[]>('tasks.list').catch((err: Error) => err);
      check('keychain gone', 'the app keeps serving without a keychain', Array.isArray(listed), () => String(listed));
      const set = await call('credentials.set', { kind: 'anthropic', label: 'after', value: `sk-ant-api03-${randomBytes(24).toString('hex')}` }).then(
        () => undefined,
        (err: Error) => err,
      );
      check('keychain gone', 'storing a credential without a keychain fails by name', !!set && set.name !== 'Error', () => (set ? `${set.name}: ${set.message}` : 'it succeeded'));
      process.kill(keyringDaemon, 'SIGCONT');
      stoppedKeyring = undefined;
    }

    // ---- the end: everything settled, nothing left ----
    for (const t of await call<Task[]>('tasks.list')) {
      known.set(t.id, t);
      check('end', 'every task ends in a terminal state', SETTLED.includes(t.phase), () => `task ${t.id} is ${t.phase}`);
      checkTaskShape(t, 'end');
    }
    checkNoOrphans('end');
    await sampleResources();
    // Terminal sessions end with their tasks: none is live once every task settled.
    const terminals = await call<Array<{ id: string; status: string; taskId?: string }>>('terminal.list', {});
    const liveTerminals = terminals.filter((x) => x.status === 'live');
    check('end', 'no terminal session outlives its task', liveTerminals.length === 0, () => JSON.stringify(liveTerminals));
    report.notes.push(`terminal sessions listed at the end: ${terminals.length} (live ${liveTerminals.length})`);
    for (const repo of repos) checkRepo(repo, undefined, 'end');
    report.leftovers = leftoversIn(dataDir, { appRunning: true });
    check('end', 'no socket, overlay, quarantine or temp file is left', report.leftovers.length === 0, () => JSON.stringify(report.leftovers.slice(0, 20)));
    if (credentialId) {
      report.credentialHits = await credentialHits(dataDir, credentialId, secret);
      check('end', 'no credential value anywhere in the data folder', report.credentialHits.length === 0, () => report.credentialHits.join(', '));
    }
    sample();

    // ---- model-upstream faults: Claude Code tasks against the faulty stub, in an app of their own ----
    const modelFaults = faultsPlanned.filter(isModelFault);
    if (modelFaults.length) {
      say(`model-upstream faults: ${modelFaults.join(', ')}`);
      await runModelFaults(rng.shuffle(modelFaults), {
        rng,
        parallel: opts.parallel,
        vmMemoryMb: opts.vmMemoryMb,
        say,
        check,
        count: (key, name) => count(report[key], name),
        note: (line) => report.notes.push(line),
        leftovers: (files) => report.leftovers.push(...files),
        leftoverProcesses: (procs) => report.leftoverProcesses.push(...procs),
      }).catch((err: Error) => check('model faults', 'the model-fault phase runs to its end', false, () => `${err.name}: ${err.message}`));
    }
  } finally {
    if (stoppedKeyring !== undefined) process.kill(stoppedKeyring, 'SIGCONT');
    if (sampler) clearInterval(sampler);
    if (app) {
      app.kill('SIGTERM');
      const how = await Promise.race([app.exited, sleep(60_000).then(() => 'timeout')]);
      if (how === 'timeout') {
        app.kill('SIGKILL');
        await app.exited;
      }
    }
    const leftProcesses = processesUnder([dataDir, ...repos.map((r) => r.dir)]);
    report.leftoverProcesses.push(...leftProcesses);
    check('after the app stopped', 'no QEMU, socat, ssh or git process is left', leftProcesses.length === 0, () => JSON.stringify(leftProcesses));
    for (const p of leftProcesses) if (alive(p.pid)) process.kill(p.pid, 'SIGKILL');
    const after = leftoversIn(dataDir, { appRunning: false });
    check('after the app stopped', 'no socket, overlay, quarantine or temp file is left', after.length === 0, () => JSON.stringify(after.slice(0, 20)));
    report.disk.keptLogBytes = bytesUnder(path.join(dataDir, 'logs'));
    report.disk.endBytes = bytesUnder(dataDir);
    // Logs are kept on purpose; task records and backups are small. The rest must have gone.
    const beyond = report.disk.endBytes - report.disk.baselineBytes - report.disk.keptLogBytes - bytesUnder(path.join(dataDir, 'state'));
    check('after the app stopped', 'the data folder returns to its baseline plus kept logs', beyond < 8 * 1024 * 1024, () => `${(beyond / 1048576).toFixed(1)} MiB more than baseline + logs + state`);
    memoryVerdict(report);
    resourceVerdict(report);
    report.durationSec = Math.round((Date.now() - started) / 1000);
    for (const r of repos) r.cleanup();
    if (disk.mounted) {
      try {
        execFileSync('umount', ['--lazy', dataDir], { stdio: 'pipe' });
      } catch (err) {
        report.notes.push(`unmounting the data folder failed: ${(err as Error).message.split('\n')[0]}`);
      }
    }
    try {
      fs.rmSync(dataDir, { recursive: true, force: true });
    } catch (err) {
      // The report is written either way: a folder that will not go is a note, not a lost run.
      report.notes.push(`removing the data folder failed: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  return report;
}

/**
 * The app's memory bound: within one app process, RSS once 5 more tasks are done
 * vs at the end, when that life saw at least 10 tasks end; 1.5× plus 64 MiB.
 */
function memoryVerdict(report: SoakReport): void {
  report.memory.bound = 'RSS at the end of an app process ≤ 1.5 × its RSS after its first 5 finished tasks + 64 MiB (checked when that process saw ≥ 10 tasks finish)';
  const verdicts: string[] = [];
  for (const w of appWindows(report.memory.samples)) {
    if (!w.at5) {
      verdicts.push(`app ${w.life}: ${w.doneInLife} tasks finished, too few to check (RSS ${w.first.rssMb} → ${w.end.rssMb} MiB)`);
      continue;
    }
    const { life: l, at5, end, doneInLife } = w;
    const ok = end.rssMb <= at5.rssMb * 1.5 + 64;
    const ratio = Math.round((end.rssMb / at5.rssMb) * 100) / 100;
    report.memory.ratios.push({ life: l, tasksDone: doneInLife, rssAfter5Mb: at5.rssMb, rssEndMb: end.rssMb, ratio, withinBound: ok });
    report.invariantsChecked++;
    if (!ok) report.invariantsBroken.push({ at: `app ${l}`, invariant: 'memory stays within its bound', detail: `RSS ${at5.rssMb} MiB after 5 tasks, ${end.rssMb} MiB after ${doneInLife}` });
    verdicts.push(`app ${l}: RSS ${at5.rssMb} MiB after 5 tasks, ${end.rssMb} MiB after ${doneInLife} (ratio ${ratio}): ${ok ? 'within' : 'OVER'} the bound`);
  }
  report.memory.verdict = verdicts.join('; ');
}

/**
 * Per app process, its samples' first, its sample once 5 more tasks were done, and its last;
 * `at5` only when that process saw at least 10 tasks finish (else too few to hold to a bound).
 */
function appWindows<S extends { life: number; done: number }>(samples: S[]): Array<{ life: number; first: S; at5?: S; end: S; doneInLife: number }> {
  return [...new Set(samples.map((s) => s.life))].map((life) => {
    const s = samples.filter((x) => x.life === life);
    const first = s[0]!;
    const end = s[s.length - 1]!;
    const doneInLife = end.done - first.done;
    const at5 = doneInLife >= 10 ? s.find((x) => x.done - first.done >= 5) : undefined;
    return { life, first, end, doneInLife, ...(at5 ? { at5 } : {}) };
  });
}

/** What may be added to each resource between an app process's 5th finished task and its end. */
const RESOURCE_SLACK = { timers: 16, handles: 16, eventListeners: 4, terminalListeners: 4 } as const;

/**
 * Timers, handles and listeners do not grow with the work done: within one app process that saw at
 * least 10 tasks finish, each at its end is at most what it was after 5 plus a small slack (the wave
 * ends sampled have no task running, so what a task holds while it runs is not counted).
 */
function resourceVerdict(report: SoakReport): void {
  const slack = Object.entries(RESOURCE_SLACK).map(([k, v]) => `${k} +${v}`).join(', ');
  report.resources.bound = `at the end of an app process ≤ after its first 5 finished tasks + (${slack}) (checked when that process saw ≥ 10 tasks finish)`;
  const verdicts: string[] = [];
  for (const { life: l, at5, end, doneInLife } of appWindows(report.resources.samples)) {
    if (!at5) {
      verdicts.push(`app ${l}: ${doneInLife} tasks finished, too few to check`);
      continue;
    }
    const grew = (Object.keys(RESOURCE_SLACK) as Array<keyof typeof RESOURCE_SLACK>).filter((k) => end[k] > at5[k] + RESOURCE_SLACK[k]);
    const words = (Object.keys(RESOURCE_SLACK) as Array<keyof typeof RESOURCE_SLACK>).map((k) => `${k} ${at5[k]} → ${end[k]}`).join(', ');
    report.invariantsChecked++;
    if (grew.length) report.invariantsBroken.push({ at: `app ${l}`, invariant: 'timers, handles and listeners do not grow with the tasks done', detail: `${grew.join(', ')} grew: ${words}` });
    verdicts.push(`app ${l}: ${words} after ${doneInLife} tasks: ${grew.length ? 'OVER' : 'within'} the bound`);
  }
  report.resources.verdict = verdicts.join('; ');
}
