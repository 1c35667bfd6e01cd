// The sandbox hosts of Settings at run time: one SSH connection and one
// libvirt driver per host, where each task's sandbox was placed, and the
// hosts' state for the board. A connection is made on demand; every new
// connection (the first after start-up, or after a drop) first removes what
// this app left on that host and no longer runs (a killed app, a lost link).
import { FactoryError } from '../../common/errors.js';
import type { Logger } from '../log/logger.js';
import type { SandboxHostSetting, Settings } from '../state/settings.js';
import { sshTargetOf, type HostAccess } from './host-check.js';
import { LibvirtSandboxDriver } from './libvirt-sandbox-driver.js';
import { placeSandbox } from './placement.js';
import { SshHost } from './ssh-host.js';

interface HostEntry {
  config: SandboxHostSetting;
  driver: LibvirtSandboxDriver;
  conn?: SshHost;
  connecting?: Promise<SshHost>;
  /** The connection dropped and no new one was made yet. */
  lost: boolean;
  lastError?: string;
}

export interface SandboxHostStatus {
  name: string;
  connected: boolean;
  lost: boolean;
  running: number;
  capacity: number;
  error?: string;
}

export class SandboxHosts {
  private readonly entries = new Map<string, HostEntry>();
  private readonly placed = new Map<string, string>();
  private closed = false;

  constructor(private readonly deps: { settings: () => Settings; log: Logger; access?: HostAccess }) {}

  private entry(name: string): HostEntry {
    const config = this.deps.settings().sandboxHosts.find((h) => h.name === name);
    if (!config) throw new FactoryError('InvalidInput', `there is no sandbox host named ${JSON.stringify(name)} in Settings`);
    const known = this.entries.get(name);
    if (known && JSON.stringify(known.config) === JSON.stringify(config)) return known;
    known?.conn?.close();
    const entry: HostEntry = { config, lost: false } as HostEntry;
    entry.driver = new LibvirtSandboxDriver({ hostName: name, storageDir: config.storageDir, virtType: config.virtType, connect: () => this.connect(entry) });
    this.entries.set(name, entry);
    return entry;
  }

  private connect(entry: HostEntry): Promise<SshHost> {
    if (entry.conn && !entry.conn.isClosed) return Promise.resolve(entry.conn);
    entry.connecting ??= (async () => {
      const { config } = entry;
      // The key from its file or the user's agent; the host key as pinned (or known_hosts lists it).
      const conn = await SshHost.connect(await sshTargetOf(config, this.deps.access ?? {}));
      conn.once('lost', () => {
        entry.lost = true;
        this.deps.log.warn('the connection to a sandbox host was lost', { host: config.name });
        this.reconnectLater(entry, 2000);
      });
      entry.conn = conn;
      // What this app left there and no longer runs goes before anything new starts.
      const removed = await entry.driver.reap(entry.driver.liveDomains());
      if (removed.length) this.deps.log.info('removed sandboxes left on a sandbox host', { host: config.name, domains: removed });
      entry.lost = false;
      delete entry.lastError;
      return conn;
    })();
    entry.connecting
      .catch((err: Error) => {
        entry.lastError = err.message;
      })
      .finally(() => {
        entry.connecting = undefined;
      });
    return entry.connecting;
  }

  /**
   * After a drop, tries again (2 s, doubling to a minute) until the host is back; the new
   * connection removes what its lost sandboxes left running there.
   */
  private reconnectLater(entry: HostEntry, delayMs: number): void {
    if (this.closed || this.entries.get(entry.config.name) !== entry) return;
    const timer = setTimeout(() => {
      if (this.closed || !entry.lost) return;
      this.connect(entry).catch(() => this.reconnectLater(entry, Math.min(delayMs * 2, 60_000)));
    }, delayMs);
    timer.unref();
  }

  /** At start-up: connects to every host, which removes what an earlier run left there. Failures show in status(). */
  async connectAll(): Promise<void> {
    // connect() records a failure on its host (status() shows it); a task placed there tries again.
    await Promise.all(this.deps.settings().sandboxHosts.map((h) => this.connect(this.entry(h.name)).catch(() => undefined)));
  }

  /** The driver of a named host (connecting when first used). */
  driver(name: string): LibvirtSandboxDriver {
    return this.entry(name).driver;
  }

  /**
   * Decides where a task's sandbox runs ('local' or a host name) and remembers it.
   * Under 'any', a host that cannot be reached now is skipped.
   */
  async place(taskId: string, request: string | undefined, local: { running: number; capacity: number }): Promise<string> {
    const hosts = this.deps.settings().sandboxHosts;
    const candidates = await Promise.all(
      hosts.map(async (h) => {
        const e = this.entry(h.name);
        const reachable = request === 'any' ? await this.connect(e).then(() => true, () => false) : true;
        return { name: h.name, running: e.driver.running, capacity: h.capacity, reachable };
      }),
    );
    const where = placeSandbox(request, candidates, local);
    this.placed.set(taskId, where);
    return where;
  }

  /** The driver a task was placed on; undefined for a local one. */
  driverFor(taskId: string): LibvirtSandboxDriver | undefined {
    const where = this.placed.get(taskId);
    return where && where !== 'local' ? this.entry(where).driver : undefined;
  }

  hostOf(taskId: string): string | undefined {
    return this.placed.get(taskId);
  }

  status(): SandboxHostStatus[] {
    return this.deps.settings().sandboxHosts.map((h) => {
      const e = this.entries.get(h.name);
      return {
        name: h.name,
        connected: !!e?.conn && !e.conn.isClosed,
        lost: e?.lost ?? false,
        running: e?.driver.running ?? 0,
        capacity: h.capacity,
        ...(e?.lastError ? { error: e.lastError } : {}),
      };
    });
  }

  /** A host removed from Settings: its connection ends now (nothing runs there; hosts.remove checked). */
  forget(name: string): void {
    const e = this.entries.get(name);
    this.entries.delete(name);
    e?.conn?.close();
  }

  close(): void {
    this.closed = true;
    for (const e of this.entries.values()) e.conn?.close();
  }
}
