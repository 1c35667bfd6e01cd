// CredentialBroker: the credential capability as the app sees it. It owns the
// keychain-backed CredentialService, the audit log and the leak checker, and it
// is a sandbox extension: before a VM boots it starts that sandbox's
// CredentialProxy on a unix socket in the sandbox folder and hands back the
// QEMU guestfwd entry and the guest environment (placeholders only); when the
// VM is gone it closes the proxy.
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { z } from 'zod';
import os from 'node:os';
import path from 'node:path';
import { sandboxDisks, sandboxFiles } from '../vm/sandbox-files.js';
import { sandboxWarmStates } from '../vm/warm-state.js';
import { credentialApiInputs, credentialId, LeakReport, type CredentialApi, type CredentialEvent, type CredentialRef } from '../../common/credentials.js';
import { FactoryError } from '../../common/errors.js';
import type { EgressRefusal, EgressRule, StepName } from '../../common/egress.js';
import { Listeners } from '../../common/listeners.js';
import { stderrLogger, type Logger } from '../log/logger.js';
import type { AppPaths } from '../state/paths.js';
import { GUEST_PROXY_ENV } from '../guest/guest-proxy.js';
import { AuditLog } from './audit.js';
import { EgressPolicy } from './egress-policy.js';
import { CredentialService } from './credential-service.js';
import type { SecretStore } from './keychain.js';
import { dumpGuestMemory, dumpGuestMemoryWith, LeakChecker, type QmpExecutor, type RemoteLeakSource } from './leak-check.js';
import { taskTerminalLogs } from './leak-sources.js';
import type { AddressAllowance } from './net-guard.js';
import { CredentialProxy } from './proxy.js';
import { CredentialRefStore, writeAtomic } from './ref-store.js';
import { planSandboxRoutes, proxyGuestForward, type GitRouteOptions } from './routes.js';

export interface CredentialBrokerDeps {
  paths: AppPaths;
  /** The OS keychain (KeychainStore) in the app. */
  secrets: SecretStore;
  emit?: (e: CredentialEvent) => void;
  /** The task's git remote and whether push is on, when the task has one; no git route otherwise. */
  gitRouteFor?: (taskId: string) => GitRouteOptions | undefined | Promise<GitRouteOptions | undefined>;
  /**
   * The running VM's own QMP client for a task (RunningVm.qmp), used for the memory
   * dump: a QMP socket serves one client, and the VM keeps its connection open.
   */
  qmpFor?: (taskId: string) => (() => Promise<QmpExecutor>) | undefined;
  /** The process id of a task's QEMU on this machine, whose memory the leak check reads (with qmpFor). */
  qemuPidFor?: (taskId: string) => number | undefined;
  /** Tests only: extra upstream trust root and the loopback allowance for local upstreams. */
  upstreamCa?: string | Buffer;
  allowAddress?: AddressAllowance;
  /** Where the terminal service keeps session logs (the app's `<logs>/terminals`). */
  terminalLogDir?: string;
  /** Where pull-back keeps one quarantine folder per task (the app's `<data>/quarantine`). */
  quarantineRoot?: string;
  /** The app log (never given a credential value); stderr for warnings when absent. */
  log?: Logger;
  /** A task's sandbox on a remote host: its disk, memory and serial log are scanned there (see useRemoteSandboxes). */
  remoteFor?: (taskId: string) => RemoteLeakSource | undefined;
}

/** What a sandbox's routes could use, kept on disk (ids only, never a value) for checks after a restart. */
const UsedCredentials = z.object({
  version: z.literal(1),
  sandboxDir: z.string().refine((p) => path.isAbsolute(p), 'must be an absolute path'),
  credentials: z.array(z.object({ id: credentialId, basicUsernames: z.array(z.string().max(128)).max(8).optional() })).max(256),
});
type UsedCredentials = z.infer<typeof UsedCredentials>;

interface SandboxState {
  proxy: CredentialProxy;
  /** A private folder for the socket when the sandbox path cannot carry it (too long, or spaces). */
  socketDir?: string;
  sandboxDir: string;
  credentials: Array<{ id: string; basicUsernames?: string[] }>;
}


/** Whether a proxy socket can live at this path: a unix socket's length limit, and no character QEMU or socat split on. */
export function proxySocketPathFits(socketPath: string): boolean {
  return Buffer.byteLength(socketPath) <= 100 && /^\/[A-Za-z0-9._/-]+$/.test(socketPath) && !socketPath.split('/').includes('..');
}

export class CredentialBroker {
  readonly name = 'credentials';
  readonly service: CredentialService;
  readonly audit: AuditLog;
  readonly leaks: LeakChecker;
  private readonly sandboxes = new Map<string, SandboxState>();
  private readonly refusals = new Listeners<EgressRefusal>();
  /** What each sandbox's routes used, kept after release so a later on-demand check still knows. */
  private readonly usedBy = new Map<string, { sandboxDir: string; credentials: SandboxState['credentials'] }>();
  private readonly unsubscribeAudit: () => void;

  private readonly log: Logger;
  private remoteFor: ((taskId: string) => RemoteLeakSource | undefined) | undefined;

  constructor(private readonly deps: CredentialBrokerDeps) {
    this.log = deps.log ?? stderrLogger('credentials');
    const refs = new CredentialRefStore(path.join(deps.paths.state, 'credentials.json'));
    this.service = new CredentialService({
      refs,
      secrets: deps.secrets,
      onChange: (credentials) => deps.emit?.({ type: 'credentials.changed', credentials }),
      log: this.log,
      ...(deps.upstreamCa ? { upstreamCa: deps.upstreamCa } : {}),
      ...(deps.allowAddress ? { allowAddress: deps.allowAddress } : {}),
    });
    this.audit = new AuditLog(path.join(deps.paths.data, 'audit'));
    this.unsubscribeAudit = this.audit.onEntry((entry) => deps.emit?.({ type: 'audit.appended', entry }));
    this.leaks = new LeakChecker({ secrets: deps.secrets });
    this.remoteFor = deps.remoteFor;
  }

  /** Set by the app once its sandboxes are known: which tasks run on a remote host (leak check there). */
  useRemoteSandboxes(remoteFor: (taskId: string) => RemoteLeakSource | undefined): void {
    this.remoteFor = remoteFor;
  }

  /**
   * SandboxExtension.prepare: start the proxy before the VM boots. `socketPath`: listen exactly there (a pooled VM
   * was started before its task, with its forward pointing at that path); it must fit as the default one would.
   */
  async prepare(ctx: { taskId: string; sandboxDir: string; egress?: EgressRule[]; socketPath?: string }): Promise<{
    guestForwards: Array<{ guestAddress: string; guestPort: number; command: string }>;
    guestEnv: Record<string, string>;
  }> {
    await this.release({ taskId: ctx.taskId });
    // An invalid rule stops the boot here, naming it, before anything is created.
    const egress = new EgressPolicy(ctx.egress ?? []).rules();
    await mkdir(ctx.sandboxDir, { recursive: true, mode: 0o700 });
    const refs = await this.service.list();
    const git = await this.deps.gitRouteFor?.(ctx.taskId);
    const plan = planSandboxRoutes(refs, { taskId: ctx.taskId, ...(git ? { git } : {}) });
    if (ctx.socketPath !== undefined && !proxySocketPathFits(ctx.socketPath)) {
      throw new FactoryError('InvalidPath', `the proxy socket path ${JSON.stringify(ctx.socketPath)} must be absolute, at most 100 bytes, and contain only letters, digits, '.', '_', '-' and '/'`);
    }
    let socketPath = ctx.socketPath ?? path.join(ctx.sandboxDir, 'proxy.sock');
    let socketDir: string | undefined;
    // A unix socket path is limited to ~100 bytes, and QEMU/socat split on commas,
    // colons and spaces (macOS "Application Support"): fall back to a private temp folder.
    if (!proxySocketPathFits(socketPath)) {
      socketDir = await mkdtemp(path.join(os.tmpdir(), 'fiab-proxy-'));
      socketPath = path.join(socketDir, 'proxy.sock');
    }
    const guestForward = proxyGuestForward(socketPath);
    const proxy = new CredentialProxy({
      sandboxId: ctx.taskId,
      socketPath,
      routes: plan.routes,
      secrets: this.deps.secrets,
      audit: this.audit,
      egress: [...egress],
      ...(this.deps.upstreamCa ? { upstreamCa: this.deps.upstreamCa } : {}),
      ...(this.deps.allowAddress ? { allowAddress: this.deps.allowAddress } : {}),
    });
    const unsubscribeRefused = proxy.onRefused((refusal) => {
      this.refusals.emit(refusal);
      this.deps.emit?.({ type: 'egress.refused', refusal });
    });
    try {
      await proxy.listen();
    } catch (err) {
      unsubscribeRefused();
      if (socketDir) await rm(socketDir, { recursive: true, force: true });
      throw err;
    }
    const credentials = plan.routes.map((r) => ({
      id: r.credentialId,
      ...(r.inject.format === 'basic' ? { basicUsernames: [r.inject.username ?? 'x-access-token'] } : {}),
    }));
    this.sandboxes.set(ctx.taskId, { proxy, sandboxDir: ctx.sandboxDir, credentials, ...(socketDir ? { socketDir } : {}) });
    this.usedBy.set(ctx.taskId, { sandboxDir: ctx.sandboxDir, credentials });
    try {
      const used: UsedCredentials = { version: 1, sandboxDir: ctx.sandboxDir, credentials };
      await writeAtomic(this.usedFile(ctx.taskId), JSON.stringify(used, null, 2) + '\n');
    } catch (err) {
      // Without the record a check after a restart would not know what to look for: do not boot.
      await this.release({ taskId: ctx.taskId });
      throw err;
    }
    return { guestForwards: [guestForward], guestEnv: { ...plan.guestEnv, ...GUEST_PROXY_ENV } };
  }

  /** SandboxExtension.release: the VM is gone; close its proxy. Never throws. */
  async release(ctx: { taskId: string }): Promise<void> {
    const s = this.sandboxes.get(ctx.taskId);
    if (!s) return;
    this.sandboxes.delete(ctx.taskId);
    // The VM is gone, so nothing can reach the proxy any more: a failed close or cleanup is only logged.
    await s.proxy.close().catch((err: unknown) => this.log.warn('closing a sandbox proxy failed', { taskId: ctx.taskId, err }));
    if (s.socketDir) await rm(s.socketDir, { recursive: true, force: true }).catch((err: unknown) => this.log.warn('removing a proxy socket folder failed', { taskId: ctx.taskId, err }));
  }

  /**
   * For the task service's teardown, while the VM still runs (before destroy):
   * the leak check with a memory dump. Never throws: a source it could not scan
   * makes the verdict 'incomplete', a hit makes it 'leak' (announced as
   * leakcheck.finished); a check that fails as a whole is logged and gives undefined.
   */
  async beforeDestroy(ctx: { taskId: string; sandboxDir?: string; qmp?: () => Promise<QmpExecutor>; qemuPid?: number }): Promise<LeakReport | undefined> {
    try {
      const dir = this.usedBy.get(ctx.taskId)?.sandboxDir ?? ctx.sandboxDir;
      return await this.leakCheck(ctx.taskId, {
        ...(dir ? { overlayPath: path.join(dir, 'overlay.qcow2'), qmpSocket: path.join(dir, 'qmp.sock') } : {}),
        ...(ctx.qmp ? { qmp: ctx.qmp, ...(ctx.qemuPid ? { qemuPid: ctx.qemuPid } : {}) } : {}),
      });
    } catch (err) {
      this.log.warn('leak check before destroy failed', { taskId: ctx.taskId, err });
      return undefined;
    }
  }

  /**
   * The git route for a task whose host repository has this remote, when a
   * stored git credential covers it (same origin, path under the credential's
   * path); undefined otherwise (ssh remotes, no matching credential).
   */
  async gitRouteForRemote(remoteUrl: string | undefined, opts: { allowPush?: boolean } = {}): Promise<GitRouteOptions | undefined> {
    if (!remoteUrl) return undefined;
    let repo: URL;
    try {
      repo = new URL(remoteUrl);
    } catch {
      // Not a URL (an scp-style ssh remote): no git route, as for any other non-https remote.
      return undefined;
    }
    if (repo.protocol !== 'https:' || repo.username || repo.password) return undefined;
    const refs = (await this.service.list()).filter((r) => r.kind === 'git');
    // Longest matching path prefix wins (an org-scoped token over a host-wide one).
    const covering = refs
      .map((r) => ({ r, u: new URL(r.target.upstream) }))
      .filter(({ u }) => {
        const p = u.pathname.replace(/\/$/, '');
        return u.origin === repo.origin && (!p || repo.pathname === p || repo.pathname.startsWith(p + '/'));
      })
      .sort((a, b) => b.u.pathname.length - a.u.pathname.length);
    const best = covering[0];
    if (!best) return undefined;
    return { repoUrl: repo.origin + repo.pathname, credentialId: best.r.id, allowPush: opts.allowPush ?? false };
  }

  /**
   * The values of the credentials a sandbox's routes could use, for the secret
   * scan of its returned work and to mask them in the review (never stored,
   * never shown). After a restart that list is gone: every stored credential
   * then, a superset. Throws when the keychain cannot give one.
   */
  async credentialValues(taskId: string): Promise<Array<{ id: string; value: string }>> {
    const ids = this.usedBy.get(taskId)?.credentials.map((c) => c.id) ?? (await this.service.list()).map((r) => r.id);
    return Promise.all([...new Set(ids)].map(async (id) => ({ id, value: await this.deps.secrets.reveal(id) })));
  }

  /** Every destination any sandbox's proxy refused (the task service puts it on the task). */
  onEgressRefused(listener: (refusal: EgressRefusal) => void): () => void {
    return this.refusals.add(listener);
  }

  /** The pipeline step a sandbox is entering (egress rules can be limited to steps). */
  setStep(taskId: string, step: StepName): void {
    this.running(taskId).proxy.setStep(step);
  }

  /** Adds egress rules to a running sandbox for the rest of its life (e.g. the user allowed what the repository asks for). */
  allowEgress(taskId: string, rules: EgressRule[]): void {
    this.running(taskId).proxy.allowEgress(rules);
  }

  private running(taskId: string): SandboxState {
    const s = this.sandboxes.get(taskId);
    if (!s) throw new FactoryError('NotFound', `task ${JSON.stringify(taskId.slice(0, 60))} has no running sandbox proxy`);
    return s;
  }

  proxyFor(taskId: string): CredentialProxy | undefined {
    return this.sandboxes.get(taskId)?.proxy;
  }

  /**
   * Scans the sandbox's overlay and (while the VM runs) a QMP dump of its memory
   * for every credential its routes could use. Call it at teardown BEFORE the VM
   * is destroyed, and on demand. The report is kept and announced.
   */
  async leakCheck(
    taskId: string,
    sources: {
      overlayPath?: string;
      /** The VM's QMP client; else qmpFor(taskId); else a fresh connection to qmpSocket. */
      qmp?: () => Promise<QmpExecutor>;
      /** With qmp: the VM's QEMU process, whose memory is read directly; else qemuPidFor(taskId). */
      qemuPid?: number;
      qmpSocket?: string;
      dumpMemory?: (file: string) => Promise<void>;
      serialLog?: string;
      stageLogs?: string[];
      returnedWork?: string;
      files?: string[];
    } = {},
  ): Promise<LeakReport> {
    safeTaskId(taskId);
    const known = this.usedBy.get(taskId) ?? (await this.readUsed(taskId));
    // A sandbox on a remote host: its disk, memory and serial log are there, and are scanned there.
    const remote = this.remoteFor?.(taskId);
    const sandboxDir = known?.sandboxDir ?? path.join(this.deps.paths.sandboxes, taskId);
    const overlayPath = sources.overlayPath ?? path.join(sandboxDir, 'overlay.qcow2');
    const qmpSocket = sources.qmpSocket ?? path.join(sandboxDir, 'qmp.sock');
    const qmp = sources.qmp ?? this.deps.qmpFor?.(taskId);
    // The process behind that QMP client: its memory is read in place, the dump only where that fails.
    const qemuPid = sources.qmp ? sources.qemuPid : (sources.qemuPid ?? this.deps.qemuPidFor?.(taskId));
    const liveMemory = !remote && !sources.dumpMemory && qmp && qemuPid ? { qmp, qemuPid } : undefined;
    const dumpMemory = remote
      ? undefined
      : sources.dumpMemory ??
      (qmp
        ? async (file: string) => dumpGuestMemoryWith(await qmp(), file)
        : this.sandboxes.has(taskId)
          ? (file: string) => dumpGuestMemory(qmpSocket, file)
          : undefined);
    // Logs that cannot be listed make the verdict incomplete, never clean.
    const stageLogs =
      sources.stageLogs ?? (await taskTerminalLogs(this.deps.terminalLogDir ?? path.join(this.deps.paths.logs, 'terminals'), taskId).catch((e: Error) => e));
    const report = await this.leaks.check({
      sandboxId: taskId,
      credentials: known?.credentials ?? [],
      sources: {
        workDir: sandboxDir,
        ...(remote
          ? { remote }
          : {
              overlayPath,
              // After setup froze the first disk into a layer, the stages wrote into the later ones.
              moreDisks: sandboxDisks(sandboxFiles(sandboxDir)).filter((d) => d !== overlayPath),
              serialLog: sources.serialLog ?? path.join(sandboxDir, 'serial.log'),
            }),
        ...(liveMemory ? { liveMemory } : {}),
        ...(dumpMemory ? { dumpMemory } : {}),
        stageLogs: stageLogs instanceof Error ? [] : stageLogs,
        returnedWork: sources.returnedWork ?? path.join(this.deps.quarantineRoot ?? path.join(this.deps.paths.data, 'quarantine'), taskId),
        // The guest memory a setup saved with its disk (a warm layer) is guest memory on the host's disk too.
        files: [...(sources.files ?? []), ...sandboxWarmStates(sandboxDir)],
      },
    });
    if (!known) {
      report.verdict = report.hits.length ? 'leak' : 'incomplete';
      report.scanned.push({ source: 'credentials', bytes: 0, error: 'no record of the credentials this sandbox could use: nothing to look for' });
    }
    if (stageLogs instanceof Error) {
      report.scanned.push({ source: 'stage logs', bytes: 0, error: `the terminal logs could not be listed: ${stageLogs.message}` });
      if (report.verdict === 'clean') report.verdict = 'incomplete';
    }
    if (!dumpMemory && !remote) {
      report.scanned.push({ source: 'guest memory', bytes: 0, error: 'not scanned: the sandbox is not running' });
      if (report.verdict === 'clean') report.verdict = 'incomplete';
    }
    await writeAtomic(this.reportFile(taskId), JSON.stringify(report, null, 2) + '\n');
    this.deps.emit?.({ type: 'leakcheck.finished', report });
    return report;
  }

  async lastLeakReport(taskId: string): Promise<LeakReport | null> {
    try {
      return LeakReport.parse(JSON.parse(await readFile(this.reportFile(taskId), 'utf8')));
    } catch {
      // None yet, or an unreadable one: the UI shows "no report" and offers to run the check again.
      return null;
    }
  }

  /** A removed task leaves nothing here: its list of credential ids and its last leak report go (the audit log stays). */
  async forgetTask(taskId: string): Promise<void> {
    this.usedBy.delete(taskId);
    await rm(this.usedFile(taskId), { force: true });
    await rm(this.reportFile(taskId), { force: true });
  }

  /** The credential API methods, to spread into the app's FactoryApi implementation. Inputs are validated here too. */
  api(): CredentialApi {
    const i = credentialApiInputs;
    return {
      'credentials.list': async () => this.service.list(),
      'credentials.set': async (input) => this.service.set(i['credentials.set'].parse(input)),
      'credentials.delete': async (input) => this.service.delete(i['credentials.delete'].parse(input).id),
      'credentials.test': async (input) => {
        const { id, callUpstream } = i['credentials.test'].parse(input);
        return this.service.test(id, { callUpstream: callUpstream ?? false });
      },
      'audit.list': async (input) => {
        const { sandboxId, limit } = i['audit.list'].parse(input);
        return this.audit.list(sandboxId, { limit: limit ?? 500 });
      },
      'leakcheck.run': async (input) => this.leakCheck(i['leakcheck.run'].parse(input).taskId),
      'leakcheck.get': async (input) => this.lastLeakReport(i['leakcheck.get'].parse(input).taskId),
    };
  }

  async dispose(): Promise<void> {
    this.unsubscribeAudit();
    await Promise.all([...this.sandboxes.keys()].map((taskId) => this.release({ taskId })));
    await this.audit.flush();
  }

  private reportFile(taskId: string): string {
    return path.join(this.deps.paths.data, 'leakchecks', `${safeTaskId(taskId)}.json`);
  }

  private usedFile(taskId: string): string {
    return path.join(this.deps.paths.state, 'sandbox-credentials', `${safeTaskId(taskId)}.json`);
  }

  /** The persisted record of a sandbox's credentials (after a restart); undefined when there is none. */
  private async readUsed(taskId: string): Promise<UsedCredentials | undefined> {
    let text: string;
    try {
      text = await readFile(this.usedFile(taskId), 'utf8');
    } catch {
      // No record: the sandbox never had credentials (or never booted); there is nothing to look for.
      return undefined;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new FactoryError('CorruptState', `the record of task ${taskId}'s credentials is not JSON: ${(err as Error).message}`);
    }
    const parsed = UsedCredentials.safeParse(json);
    if (!parsed.success) throw new FactoryError('CorruptState', `the record of task ${taskId}'s credentials is invalid: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  }
}

/** A task id that is safe as a file name (no '.', '..' or hidden names). */
function safeTaskId(taskId: string): string {
  if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/.test(taskId)) throw new FactoryError('InvalidInput', `not a task id: ${JSON.stringify(taskId.slice(0, 40))}`);
  return taskId;
}

export type { CredentialApi, CredentialRef };
