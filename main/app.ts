// Composition root: builds the services once and exposes them as the typed
// FactoryApi (common/contract.ts) that both hosts serve. Nothing here knows
// about Electron or HTTP.
import fs from 'node:fs';
import path from 'node:path';
import {
  FactoryError,
  apiInputs,
  type ApiInput,
  type ApiMethod,
  type ApiOutputs,
  type FactoryApi,
  type SystemActivity,
  type FactoryEvent,
  type TerminalDataEvent,
} from '../common/contract.js';
import { isQuickSandbox, type KeychainStatus, type SystemStatus, type Task } from '../common/domain.js';
import { CredentialBroker, proxySocketPathFits } from './credentials/broker.js';
import { FanoutService } from './fanout/fanout-service.js';
import { proxyGuestForward } from './credentials/routes.js';
import { checkEgressRules } from './credentials/egress-policy.js';
import { WarmPool } from './pool/warm-pool.js';
import { KeychainStore } from './credentials/keychain.js';
import type { GitRouteOptions } from './credentials/routes.js';
import { AgentStageExecutor } from './pipeline/agents/agent-executor.js';
import { builtInAgents } from './pipeline/agents/registry.js';
import { CommandStageExecutor, type StageExecutor } from './pipeline/stage-executor.js';
import { PipelineRunner } from './pipeline/stage-runner.js';
import { PullbackQuarantine } from './pullback/quarantine.js';
import { appPaths, type AppPaths } from './state/paths.js';
import { SettingsStore, type Settings } from './state/settings.js';
import { StateStore } from './state/state-store.js';
import { diskFullError } from './state/disk-full.js';
import { createFileLogger, parseLogLevel } from './log/logger.js';
import { originHttpsUrl } from './tasks/host-repo.js';
import type { ImageStorePort, QemuDriverPort, SandboxExtension } from './sandbox/sandbox-ports.js';
import { LiveSandboxes } from './sandbox/live-sandboxes.js';
import { SandboxProvisioner, warmPooledGuest } from './tasks/sandbox-provisioner.js';
import { TaskService } from './tasks/task-service.js';
import { QuickSandboxWatcher } from './tasks/quick-sandbox.js';
import { AgentSessionWatcher } from './tasks/agent-session.js';
import { FirstShells } from './tasks/first-shells.js';
import { TaskShells } from './tasks/task-shells.js';
import { SandboxStatsMonitor } from './tasks/sandbox-stats.js';
import { nextStepApi } from './tasks/next-step-api.js';
import { sshChannelSource } from './terminal/ssh-channel-source.js';
import { TerminalService } from './terminal/terminal-service.js';
import { ImageStore, type BaseImage } from './vm/image-store.js';
import { killLeftoverQemu } from './vm/leftover-qemu.js';
import { QemuDriver } from './vm/qemu-driver.js';
import { vmSettingsFromEnv } from './vm/vm-settings.js';
import { LayerStore } from './vm/layer-store.js';
import { planEnvironment } from './environment/environment-plan.js';
import { SetupRunner } from './tasks/setup-step.js';
import { TaskEnvironment } from './tasks/task-environment.js';
import { Listeners } from '../common/listeners.js';
import { execInSandbox } from './exec/sandbox-exec.js';
import { IdleExit, runningTasks } from './instance/idle-exit.js';
import { SessionHoldExecutor } from './sessions/session-hold.js';
import { SessionService } from './sessions/session-service.js';
import { hostsApi } from './remote/hosts-api.js';
import { SandboxHosts } from './remote/sandbox-hosts.js';
import { remoteLeakSourceOf } from './remote/libvirt-sandbox-driver.js';
import { SessionStore } from './sessions/session-store.js';
import { cliInstallHere } from './cli/cli-install.js';
import { sessionGraceMs } from './sessions/session-settings.js';

export interface FactoryApp {
  api: FactoryApi;
  onEvent(listener: (e: FactoryEvent) => void): () => void;
  onTerminalData(listener: (e: TerminalDataEvent) => void): () => void;
  /** Tears down every sandbox: nothing is left running. */
  dispose(): Promise<void>;
}

export interface FactoryAppOptions {
  host: 'electron' | 'web';
  paths?: AppPaths;
  /** Replace the VM layer (tests that need no VM); the real ImageStore and QemuDriver by default. */
  vm?: { images?: ImageStorePort<unknown>; qemu?: QemuDriverPort<unknown> };
  /** More stage executors, or replacements by name, next to 'command' and the built-in agents (claude-code, codex). */
  executors?: StageExecutor[];
  /** More per-sandbox add-ons, after the credential broker. */
  sandboxExtensions?: SandboxExtension[];
  /** Replace the credential broker (tests: a broker over a test secret store or test CA). */
  credentials?: CredentialBroker;
  /** Settings to apply at start (persisted), e.g. from tests. */
  settings?: Partial<Settings>;
  bootTimeoutMs?: number;
  /** How long a Claude Code session's process may be gone before its sandbox is reaped (default: FACTORY_SESSION_GRACE_SEC, else 60 s). */
  sessionGraceMs?: number;
  /**
   * Keep warmPoolSize sandboxes waiting (main/pool). Default: on, except with FACTORY_WARM_POOL=0, a replaced VM
   * layer (tests' doubles) or more sandbox extensions (their guest forwards are not the pooled VMs').
   */
  warmPool?: boolean;
  /** A headless app the CLI started: it ends (through `quit`) after this long with nothing running (main/instance/idle-exit.ts). */
  idleExitMs?: number;
  /** How the host ends the app (factory quit, idle exit); without it, system.quit is refused. */
  quit?: (why: string) => void;
}

export async function createFactoryApp(opts: FactoryAppOptions): Promise<FactoryApp> {
  const paths = opts.paths ?? appPaths();
  for (const dir of [paths.data, paths.state, paths.logs, paths.sandboxes]) fs.mkdirSync(dir, { recursive: true });
  // The app log (logs/app.log, rotated); each service gets it under its own component name.
  const log = createFileLogger({ dir: paths.logs, level: parseLogLevel(process.env.FACTORY_LOG_LEVEL) });

  const eventListeners = new Listeners<FactoryEvent>();
  const dataListeners = new Listeners<TerminalDataEvent>();
  const emit = (e: FactoryEvent) => eventListeners.emit(e);
  const emitData = (e: TerminalDataEvent) => dataListeners.emit(e);

  const settings = new SettingsStore({ dir: paths.data });
  if (opts.settings) settings.set(opts.settings);
  const store = new StateStore({ dir: paths.state });
  // Logs older than the retention are deleted here, at start-up (a changed setting applies at the next start).
  const terminals = new TerminalService({
    logDir: path.join(paths.logs, 'terminals'),
    emit,
    emitData,
    retentionDays: settings.get().terminalLogRetentionDays,
    warn: (message) => log.child('terminals').warn(message),
  });
  const images = opts.vm?.images ?? new ImageStore({ imagesDir: paths.images, log: log.child('images') });
  // Checked against the port here; the image store and the driver always come as a pair.
  const realQemu = (): QemuDriverPort<BaseImage> => new QemuDriver(vmSettingsFromEnv(process.env, paths));
  const qemu = opts.vm?.qemu ?? (realQemu() as QemuDriverPort<unknown>);
  // The running sandboxes by task: written by the provisioner, read by the agent executors
  // (environment), the credential broker (QMP, git route) and shells; built before all of them.
  const live = new LiveSandboxes();
  const executors = new Map<string, StageExecutor>([['command', new CommandStageExecutor()]]);
  for (const adapter of builtInAgents().values()) {
    executors.set(adapter.id, new AgentStageExecutor({ adapter, guestEnv: (task) => live.guestEnv(task.id) }));
  }
  // Claude Code sessions (hooks): their tasks only prepare the sandbox and hold it for the session.
  const sessionHold = new SessionHoldExecutor();
  executors.set(sessionHold.name, sessionHold);
  // The agents a user may choose: the session agent is only for the hooks' tasks.
  const choosableAgents = () => [...executors.keys()].filter((name) => name !== sessionHold.name);
  for (const e of opts.executors ?? []) executors.set(e.name, e);
  const runner = new PipelineRunner({ terminals, sourceForChannel: sshChannelSource, executors, log: log.child('pipeline') });
  // Keys stay in the OS keychain; each sandbox gets a proxy and placeholders only.
  const broker: CredentialBroker =
    opts.credentials ??
    new CredentialBroker({
      paths,
      secrets: new KeychainStore(),
      emit,
      log: log.child('credentials'),
      qmpFor: (taskId) => live.qmpFor(taskId),
      qemuPidFor: (taskId) => live.qemuPidFor(taskId),
      gitRouteFor: async (taskId) => {
        const task = live.task(taskId);
        // A quick sandbox without a repository has no remote (an empty path would mean the app's own folder).
        return task?.repoPath ? gitRouteForTask(broker, task) : undefined;
      },
    });
  // Sandboxes restored and waiting for a task; never kept across runs (its folder is reaped at start).
  const pool =
    (opts.warmPool ?? (warmPoolFromEnv(process.env) && !opts.vm && !opts.sandboxExtensions?.length))
      ? new WarmPool({
          root: path.join(paths.data, 'pool'),
          images,
          qemu,
          settings: () => settings.get(),
          runningMemoryMb: () => live.memoryMb(),
          // The broker's proxy forward: its socket is listened on only when a task takes the sandbox.
          guestForwards: (socketPath) => [proxyGuestForward(socketPath)],
          socketPathFits: proxySocketPathFits,
          killLeftovers: (dir, knownPids) => killLeftoverQemu(dir, knownPids),
          onStatus: (status) => emit({ type: 'pool.status', status }),
          // Nothing of a task: a first login shell (its files paged in after the restore), the host's certificates.
          warmGuest: (ssh, o) => warmPooledGuest(ssh, o),
          log: log.child('pool'),
          ...(opts.bootTimeoutMs ? { bootTimeoutMs: opts.bootTimeoutMs } : {}),
        })
      : undefined;
  // The secret scan of returned work looks for the exact values of the credentials the sandbox could use.
  const quarantine = new PullbackQuarantine({ root: path.join(paths.data, 'quarantine'), credentialValues: (taskId) => broker.credentialValues(taskId) });
  // Sandbox hosts from Settings (issue 14): a task placed on one boots there through libvirt over SSH.
  const sandboxHosts = new SandboxHosts({ settings: () => settings.get(), log: log.child('sandbox-hosts') });
  // A remote sandbox's leak check runs on its host (salted digests go there, never a key).
  broker.useRemoteSandboxes((taskId) => remoteLeakSourceOf(live.get(taskId)?.vm));
  // Sandboxes a killed run left on a host go as soon as it answers; a host that does not is retried on use.
  void sandboxHosts.connectAll();
  const provisioner = new SandboxProvisioner({
    paths,
    settings: () => settings.get(),
    images,
    qemu,
    live,
    placeSandbox: async (task) => {
      if (!task.host || task.host === 'local') return undefined;
      const runsHere = (id: string) => { const vm = live.get(id)?.vm; return !!vm && !vm.host; };
      const localRunning = tasks.list().filter((t) => runsHere(t.id)).length;
      await sandboxHosts.place(task.id, task.host, { running: localRunning, capacity: settings.get().maxParallelTasks });
      return sandboxHosts.driverFor(task.id) as QemuDriverPort<unknown> | undefined;
    },
    emit,
    extensions: [broker, ...(opts.sandboxExtensions ?? [])],
    ...(opts.bootTimeoutMs ? { bootTimeoutMs: opts.bootTimeoutMs } : {}),
    killLeftovers: (sandboxDir, knownPids) => killLeftoverQemu(sandboxDir, knownPids),
    log: log.child('sandboxes'),
    ...(pool ? { pool } : {}),
  });
  // Cached environments: base image ← layer (after a repository's setup) ← task overlay.
  const layersLog = log.child('layers');
  const layers = new LayerStore({
    root: path.join(paths.cache, 'layers'),
    // A layer is only used on top of the very base image it was made on.
    baseDisk: (version) => path.join(paths.images, version, 'disk.qcow2'),
    onRefused: (id, reason) => layersLog.warn('a cached environment was not used', { id, reason }),
  });
  const environment = new TaskEnvironment({
    planEnvironment: (input) => planEnvironment(input),
    layers,
    egress: broker,
    settings: () => settings.get(),
    setSettings: (patch) => settings.set(patch),
    imageVersion: () => images.status().version,
    workDir: (taskId) => provisioner.workDir(taskId),
  });
  const setup = new SetupRunner({ terminals, sourceForChannel: sshChannelSource });
  // A quick sandbox's shell that its restore started before the SSH login: a session at once, handed to the first who asks.
  const firstShells = new FirstShells(terminals);
  const tasks = new TaskService({
    paths,
    store,
    settings: () => settings.get(),
    qemu,
    provisioner,
    runner,
    quarantine,
    environment,
    setup,
    emit,
    log: log.child('tasks'),
    firstShell: (taskId, shell, size) => firstShells.open(taskId, shell, size),
    agentSessions: { terminals, sourceForChannel: sshChannelSource, adapter: (id) => builtInAgents().get(id) },
    credentials: () => broker.service.list(),
    forgetTask: async (taskId) => {
      await terminals.removeTaskSessions(taskId);
      firstShells.forget(taskId);
      await broker.forgetTask(taskId);
    },
  });
  // A task run N ways: one preparation, N sandboxes from it (main/fanout/).
  const fanout = new FanoutService({
    tasks,
    leakVerdict: async (taskId) => (await broker.lastLeakReport(taskId))?.verdict,
    log: log.child('fanout'),
  });
  eventListeners.add((e) => fanout.onEvent(e));
  const shells = new TaskShells({ terminals, firstShells, sandboxSsh: (taskId) => tasks.sandboxSsh(taskId), repoPath: (taskId) => tasks.get(taskId).repoPath });
  // A destination a sandbox was refused shows on its task, with an Allow.
  broker.onEgressRefused((refusal) => tasks.noteRefusal(refusal.sandboxId, refusal));
  // A quick sandbox ends with its last shell (unless kept).
  const quick = new QuickSandboxWatcher({
    task: (taskId) => tasks.list().find((t) => t.id === taskId),
    destroy: (taskId) => tasks.destroy(taskId),
    // A first shell nobody took is not a shell anyone opened.
    terminals: (taskId) => terminals.list(taskId).filter((t) => !firstShells.isWaiting(t.id)),
    closeTerminal: (sessionId) => terminals.close(sessionId),
    log: log.child('quick'),
  });
  eventListeners.add((e) => quick.onEvent(e));
  // An agent session outlives a closed terminal for a grace period (agent-session.ts).
  const agentWatch = new AgentSessionWatcher({
    task: (taskId) => tasks.list().find((t) => t.id === taskId),
    terminal: (sessionId) => terminals.list().find((t) => t.id === sessionId),
    closeTerminal: (sessionId) => terminals.close(sessionId),
    log: log.child('agent-session'),
  });
  eventListeners.add((e) => agentWatch.onEvent(e));
  // CPU and memory of each running sandbox, from its QEMU process on the host (never asked of the guest).
  const sandboxStats = new SandboxStatsMonitor({
    pidOf: (taskId) => live.get(taskId)?.vm?.pid,
    onSample: (taskId, sample, guestMemoryBytes) => emit({ type: 'sandbox.stats', taskId, sample, ...(guestMemoryBytes ? { guestMemoryBytes } : {}) }),
    warn: (message, meta) => log.child('sandbox-stats').warn(message, meta),
  });
  eventListeners.add((e) => {
    if (e.type === 'task.updated') {
      if (e.task.sandbox.status === 'running') sandboxStats.watch(e.task.id);
      else sandboxStats.stop(e.task.id);
    } else if (e.type === 'task.removed') sandboxStats.forget(e.taskId);
  });
  await tasks.init();
  // After the tasks reaped their own sandboxes: what is left in the pool's folder is a crash's, and goes.
  const poolStarted = pool?.start().catch((err: unknown) => log.child('pool').warn('starting the warm pool failed', { err }));
  const stateProblems = [...settings.problems, ...store.problems];
  for (const p of stateProblems) {
    log.child('state').warn(p.restoredFrom ? 'a state file could not be read; its backup is used' : 'a state file could not be read', {
      file: p.file,
      error: p.error,
      keptAs: p.keptAs ?? '(could not move it)',
      ...(p.restoredFrom ? { restoredFrom: p.restoredFrom } : {}),
    });
  }

  // The header's keychain state: a lookup of an entry that is never written. It needs the
  // keychain to answer, reads no stored value, and gives up quickly when nobody answers.
  const keychainProbe = new KeychainStore({ timeoutMs: 3000 });
  const probeKeychain = async (): Promise<KeychainStatus> => {
    try {
      await keychainProbe.has('availability-probe');
      return { ok: true };
    } catch (err) {
      const e = err instanceof FactoryError ? err : new FactoryError('KeychainUnavailable', String(err));
      return { ok: false, error: { name: e.name, message: e.message } };
    }
  };

  const sessions = new SessionService({
    store: new SessionStore(path.join(paths.data, 'sessions.json'), (m, meta) => log.child('sessions').warn(m, meta)),
    hold: sessionHold,
    graceMs: opts.sessionGraceMs ?? sessionGraceMs(process.env),
    log: log.child('sessions'),
    ports: {
      createTask: (input) => tasks.create(input),
      getTask: (taskId) => tasks.get(taskId),
      cancelTask: (taskId) => tasks.cancel(taskId),
      destroyTask: (taskId) => tasks.destroy(taskId),
      leakCheck: (taskId) => broker.api()['leakcheck.run']({ taskId }),
      sandboxSsh: (taskId) => tasks.sandboxSsh(taskId),
      keepSpareFork: (taskId) => tasks.keepSpareFork(taskId),
      dropSpareFork: (taskId) => tasks.dropSpareFork(taskId),
      noteSession: (taskId, change) => tasks.noteSession(taskId, change),
    },
  });
  sessions.startReaper();

  const imageBusy = () => images.status().state === 'building';
  const idle = opts.idleExitMs !== undefined && opts.quit
    ? new IdleExit({ afterMs: opts.idleExitMs, busy: () => runningTasks(tasks.list()).length > 0 || imageBusy(), onIdle: () => opts.quit?.('nothing ran for a while') })
    : undefined;
  idle?.start();

  let disposed = false;
  const impl: FactoryApi = {
    ...broker.api(),
    'system.cliInstall': async () => cliInstallHere(),
    'system.status': async () => {
      // Independent probes: the keychain's may wait up to its time limit, so neither waits for the other.
      const [q, keychain] = await Promise.all([qemu.checkInstalled(), probeKeychain()]);
      const accel = tasks.lastAccel();
      const status: SystemStatus = {
        qemu: { ok: q.ok, ...(q.version ? { version: q.version } : {}), ...(q.installHint ? { installHint: q.installHint } : {}) },
        ...(accel ? { accel } : {}),
        image: images.status(),
        keychain,
        dataDir: paths.data,
        host: opts.host,
        ...(pool ? { pool: pool.status() } : {}),
        ...(stateProblems.length ? { stateProblems } : {}),
      };
      return status;
    },
    'system.activity': async () => ({
      pid: process.pid,
      host: opts.host,
      ...(idle ? { idleExit: { afterSec: Math.round(opts.idleExitMs! / 1000), idleForSec: Math.floor(idle.idleForMs() / 1000) } } : {}),
      running: runningTasks(tasks.list()).map((t) => ({ id: t.id, title: t.title, phase: t.phase, sandbox: t.sandbox.status, agent: t.agent ?? 'command' })),
      ...(pool ? { pool: { ready: pool.status().ready, target: pool.status().target, spares: pool.spareCount } } : {}),
      resources: liveResources(eventListeners.size, dataListeners.size),
    }),
    'system.quit': async () => {
      if (!opts.quit) throw new FactoryError('QuitUnsupported', 'this app cannot be ended from the CLI; close its window');
      // After the answer is on its way: quitting closes the socket this call came through.
      setTimeout(() => opts.quit?.('factory quit'), 50);
    },
    'image.ensure': async () => {
      await images.ensure((status) => emit({ type: 'image.progress', status }));
      const status = images.status();
      emit({ type: 'image.progress', status });
      return status;
    },
    'tasks.list': async () => tasks.list(),
    'tasks.get': async ({ taskId }) => tasks.get(taskId),
    'tasks.create': async (input) =>
      tasks.create({
        repoPath: input.repoPath,
        title: input.title,
        ...(input.baseRef !== undefined ? { baseRef: input.baseRef } : {}),
        ...(input.includeUncommitted !== undefined ? { includeUncommitted: input.includeUncommitted } : {}),
        ...(input.agent !== undefined ? { agent: input.agent } : {}),
        ...(input.allowPush !== undefined ? { allowPush: input.allowPush } : {}),
        ...(input.host !== undefined ? { host: input.host } : {}),
        ...(input.egressApproval !== undefined ? { egressApproval: input.egressApproval } : {}),
      }),
    // A quick sandbox has no stage to stop: cancelling it ends it (nothing left running).
    'tasks.stats': async ({ taskId }) => {
      tasks.get(taskId); // an unknown task is refused by name
      return sandboxStats.stats(taskId);
    },
    'tasks.cancel': async ({ taskId }) => (isQuickSandbox(tasks.get(taskId)) ? tasks.destroy(taskId) : tasks.cancel(taskId)),
    'sandboxes.quick': async ({ repoPath, keep }) => tasks.quick({ ...(repoPath !== undefined ? { repoPath } : {}), ...(keep ? { keep } : {}) }),
    'sandboxes.agent': async (input) => tasks.agentSession(input),
    'tasks.destroy': async ({ taskId }) => tasks.destroy(taskId),
    'tasks.remove': async ({ taskId }) => tasks.remove(taskId),
    'tasks.review': async ({ taskId }) => tasks.review(taskId),
    'tasks.reviewFile': async ({ taskId, path: filePath }) => tasks.reviewFile(taskId, filePath),
    'tasks.approve': async ({ taskId, confirm }) => tasks.approve(taskId, confirm ? { confirm } : {}),
    'tasks.reject': async ({ taskId }) => tasks.reject(taskId),
    'tasks.retry': async ({ taskId, fromStage, overrideReview }) => tasks.retry(taskId, fromStage, overrideReview ? { overrideReview } : {}),
    'tasks.archive': async ({ taskId, archived }) => tasks.archive(taskId, archived),
    ...nextStepApi((taskId) => tasks.get(taskId), () => settings.get().editorCommand),
    'tasks.preflight': async (input) => tasks.preflight(input),
    'fanout.create': async (input) =>
      fanout.create({
        repoPath: input.repoPath,
        title: input.title,
        ways: input.ways,
        ...(input.agents ? { agents: input.agents } : {}),
        ...(input.baseRef !== undefined ? { baseRef: input.baseRef } : {}),
        ...(input.egressApproval !== undefined ? { egressApproval: input.egressApproval } : {}),
      }),
    'fanout.compare': async ({ group }) => fanout.compare(group),
    'fanout.approve': async ({ group, way, confirm }) => fanout.approve(group, way, confirm),
    'fanout.rejectAll': async ({ group }) => fanout.rejectAll(group),
    'fanout.diff': async ({ group, from, to }) => fanout.diff(group, from, to),
    'tasks.artifact': async ({ taskId, name }) => tasks.artifact(taskId, name),
    'egress.allow': async ({ taskId, rule, scope }) => tasks.allowEgress(taskId, rule, scope),
    ...hostsApi({ settings, hosts: sandboxHosts, tasks: () => tasks.list() }),
    'egress.repoRules.list': async () => environment.repoRules(),
    'egress.repoRules.remove': async ({ repoPath, rule }) => environment.removeRepoRule(repoPath, rule),
    'layers.list': async () => environment.layers(),
    'layers.remove': async ({ id }) => environment.removeLayer(id),
    'settings.get': async () => ({ ...settings.get(), agents: choosableAgents() }),
    'settings.set': async (patch) => {
      if (patch.defaultAgent !== undefined && !choosableAgents().includes(patch.defaultAgent)) {
        throw new FactoryError('UnknownAgent', `no agent named ${JSON.stringify(patch.defaultAgent)}; available: ${choosableAgents().join(', ')}`);
      }
      if (patch.egressRules) checkEgressRules(patch.egressRules);
      const defined = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<Settings>;
      const next = settings.set(defined);
      // A new pool size or sandbox size applies now.
      pool?.poke();
      return { ...next, agents: choosableAgents() };
    },
    'terminal.list': async ({ taskId }) => terminals.list(taskId),
    'terminal.openShell': async ({ taskId, cols, rows }) => shells.openSandboxShell(taskId, { cols, rows }),
    'terminal.openHostShell': async ({ taskId, cols, rows }) => shells.openHostShell(taskId, { cols, rows }),
    'terminal.attach': async ({ sessionId }) => {
      const attached = terminals.attach(sessionId);
      firstShells.attached(sessionId);
      agentWatch.attached(sessionId);
      return attached;
    },
    'terminal.write': async ({ sessionId, data }) => terminals.write(sessionId, data),
    'terminal.resize': async ({ sessionId, cols, rows }) => terminals.resize(sessionId, cols, rows),
    'terminal.ack': async ({ sessionId, bytes }) => terminals.ack(sessionId, bytes),
    'terminal.close': async ({ sessionId }) => terminals.close(sessionId),
    'terminal.detach': async ({ sessionId }) => {
      terminals.detach(sessionId);
      // A CLI's quick sandbox shell ends with the CLI (quick-sandbox.ts).
      const info = terminals.list().find((t) => t.id === sessionId);
      if (info) quick.viewerLeft(info);
      agentWatch.detached(sessionId);
    },
    'tasks.exec': async ({ taskId, argv, stdin, timeoutSec }) =>
      execInSandbox(tasks.sandboxSsh(taskId), { argv, ...(stdin ? { stdin } : {}), ...(timeoutSec ? { timeoutSec } : {}) }),
    'sessions.start': async (input) => sessions.start(input),
    'sessions.check': async ({ sessionId }) => sessions.check(sessionId),
    'sessions.end': async ({ sessionId }) => sessions.end(sessionId),
    'sessions.info': async ({ sessionId }) => sessions.info(sessionId),
    'sessions.run': async (input) => sessions.run(input),
    'sessions.subagentStart': async (input) => sessions.subagentStart(input),
    'sessions.subagentStop': async (input) => sessions.subagentStop(input),
  };

  // Inputs are validated again here: the API is also called in-process (tests, CLI).
  const api = {} as Record<ApiMethod, (input: unknown) => Promise<unknown>>;
  for (const method of Object.keys(impl) as ApiMethod[]) {
    api[method] = async (input: unknown) => {
      if (disposed) throw new FactoryError('ShuttingDown', 'the app is shutting down');
      const parsed = apiInputs[method].parse(input ?? {}) as ApiInput<typeof method>;
      try {
        return await (impl[method] as (i: ApiInput<typeof method>) => Promise<ApiOutputs[typeof method]>)(parsed);
      } catch (err) {
        // A full disk is named with its folder, whatever call ran into it.
        throw diskFullError(err, paths.data) ?? err;
      }
    };
  }

  return {
    api: api as unknown as FactoryApi,
    onEvent: (listener) => eventListeners.add(listener),
    onTerminalData: (listener) => dataListeners.add(listener),
    async dispose() {
      if (disposed) return;
      disposed = true;
      quick.dispose();
      agentWatch.dispose();
      sandboxStats.dispose();
      idle?.stop();
      await sessions.dispose();
      // No pooled QEMU outlives the app; the pool stops filling before the tasks go.
      await poolStarted;
      await pool?.dispose().catch((err: unknown) => log.warn('stopping the warm pool failed', { err }));
      await tasks.dispose();
      // Shutting down goes on: the sandboxes are gone, so a proxy that did not close serves nobody.
      await broker.dispose().catch((err: unknown) => log.warn('closing the credential broker failed', { err }));
      await terminals.dispose();
      sandboxHosts.close();
      eventListeners.clear();
      dataListeners.clear();
    },
  };
}

/** FACTORY_WARM_POOL=0 turns the warm pool off whatever the settings say (e.g. tests that count QEMU processes). */
export function warmPoolFromEnv(env: NodeJS.ProcessEnv): boolean {
  const v = env.FACTORY_WARM_POOL;
  if (v === undefined || v === '' || v === '1') return true;
  if (v === '0') return false;
  throw new Error(`FACTORY_WARM_POOL must be 0 (no warm pool) or 1, not ${JSON.stringify(v)}`);
}

/**
 * The git route through the credential proxy for a task: the host repository's
 * `origin`, when it is an https URL that a stored git credential covers (the
 * broker decides), with push only if the task allows it.
 */
export async function gitRouteForTask(
  broker: Pick<CredentialBroker, 'gitRouteForRemote'>,
  task: Pick<Task, 'repoPath' | 'allowPush'>,
): Promise<GitRouteOptions | undefined> {
  const origin = await originHttpsUrl(task.repoPath);
  return broker.gitRouteForRemote(origin, { allowPush: task.allowPush ?? false });
}

/** Node's live timers and other handles, and the app's listeners (system.activity's resources). */
function liveResources(eventListeners: number, terminalListeners: number): NonNullable<SystemActivity['resources']> {
  const active = process.getActiveResourcesInfo();
  const timers = active.filter((r) => r === 'Timeout' || r === 'Immediate').length;
  return { timers, handles: active.length - timers, eventListeners, terminalListeners };
}
