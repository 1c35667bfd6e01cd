// Sandboxes on a remote host through libvirt, behind the same port as the
// local QEMU driver (main/sandbox/sandbox-ports.ts). Everything crosses one SSH
// connection to the host (ssh-host.ts): `virsh` run there, the base image
// uploaded once (volume-store.ts), a qcow2 overlay per sandbox, a transient
// domain (domain-xml.ts). The guest's SSH is reached through the host (a local
// port whose connections are forwarded to the host's 127.0.0.1 forward); the
// guest's credential proxy address is a socket on the host that sshd carries
// back to the proxy socket on this machine, so keys are added here and never
// reach the host. A dropped connection ends every sandbox of that host (their
// `exited` resolves); the next connection removes what was left running.
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { waitForSsh, connectGuest } from '../guest/guest-agent.js';
import { generateSandboxKeys, type SandboxKeys } from '../ssh/sandbox-keys.js';
import type { SandboxSsh } from '../ssh/sandbox-ssh.js';
import type { GuestForwardSpec, QemuDriverPort, RunningVmPort } from '../sandbox/sandbox-ports.js';
import type { BaseImage } from '../vm/image-store.js';
import { checkHostPath, domainXml, DOMAIN_NAME, libvirtTooOldToEmulate } from './domain-xml.js';
import type { SshHost } from './ssh-host.js';
import { VolumeStore } from './volume-store.js';
import type { RemoteLeakSource } from '../credentials/leak-check.js';
import { remoteLeakScan } from './remote-leak.js';

const VIRSH = ['virsh', '-q', '-c', 'qemu:///system'];
const DEFAULT_CMDLINE = 'root=/dev/vda rw rootfstype=ext4 console=ttyS0 net.ifnames=0 init=/sbin/factory-init panic=-1 quiet';
/** What the credential proxy's guest forward runs locally; remotely the socket is on the host instead. */
const LOCAL_SOCAT = /^socat - UNIX-CONNECT:(\/[^\s,]+)$/;

export interface HostCheck {
  ok: boolean;
  /** The QEMU version libvirt drives there. */
  qemu?: string;
  kvm: boolean;
  freeBytes: number;
  problems: string[];
}

export interface LibvirtDriverOptions {
  /** The host's name in settings. */
  hostName: string;
  /** The host's connection, made (or made again) on demand. */
  connect(): Promise<SshHost>;
  /** The storage folder on the host. */
  storageDir: string;
  /** 'qemu' forces TCG (tests here); 'kvm' needs it on the host. */
  virtType: 'kvm' | 'qemu';
}

export class LibvirtSandboxDriver implements QemuDriverPort<BaseImage> {
  readonly volumes: VolumeStore;
  private readonly live = new Map<string, RemoteVm>();
  private qemuLabel: Promise<string | undefined> | undefined;

  constructor(private readonly opts: LibvirtDriverOptions) {
    this.volumes = new VolumeStore(opts.storageDir);
  }

  /** Sandboxes of this driver running now. */
  get running(): number {
    return [...this.live.values()].filter((v) => !v.hasExited).length;
  }

  /** Domains of sandboxes this driver runs now (kept when the host is reaped). */
  liveDomains(): Set<string> {
    return new Set([...this.live.entries()].filter(([, v]) => !v.hasExited).map(([d]) => d));
  }

  async checkInstalled(): Promise<{ ok: boolean; version?: string; installHint?: string }> {
    try {
      const host = await this.opts.connect();
      const r = await host.run([...VIRSH, 'version']);
      if (r.code !== 0) return { ok: false, installHint: `libvirt on ${this.opts.hostName} did not answer: ${r.stderr.trim().slice(0, 300)}` };
      return { ok: true, ...(/QEMU ([0-9.]+)/.exec(r.stdout)?.[1] ? { version: /QEMU ([0-9.]+)/.exec(r.stdout)![1]! } : {}) };
    } catch (err) {
      return { ok: false, installHint: (err as Error).message };
    }
  }

  /**
   * What Settings shows for a host: libvirt answers, its QEMU, whether KVM is there, socat (the proxy
   * forward), the storage folder and its free space. Each problem is named; none throws.
   */
  async checkHost(): Promise<HostCheck> {
    const problems: string[] = [];
    const host = await this.opts.connect();
    const version = await host.run([...VIRSH, 'version', '--daemon']);
    const qemu = /hypervisor: QEMU ([0-9.]+)/.exec(version.stdout)?.[1];
    if (version.code !== 0) problems.push(`libvirt does not answer: ${version.stderr.trim().slice(0, 200)}`);
    else if (!qemu) problems.push('libvirt answers but has no QEMU hypervisor');
    const kvm = (await host.run([...VIRSH, 'domcapabilities', '--virttype', 'kvm'])).code === 0;
    if (this.opts.virtType === 'kvm' && !kvm) problems.push('KVM is not available on the host (set the host to qemu to emulate, much slower)');
    const tooOld = this.opts.virtType === 'qemu' ? libvirtTooOldToEmulate(version.stdout) : undefined;
    if (tooOld) problems.push(tooOld);
    if ((await host.run(['sh', '-c', 'command -v socat'])).code !== 0) problems.push('socat is missing on the host (the credential proxy needs it): apt-get install socat');
    // The leak check scans memory and disk on the host with perl (salted digests only, never a key).
    if ((await host.run(['perl', '-MDigest::SHA', '-e', '1'])).code !== 0) problems.push("perl with Digest::SHA is missing on the host (the leak check runs there): apt-get install perl");
    if ((await host.run(['sh', '-c', 'command -v qemu-img'])).code !== 0) problems.push('qemu-img is missing on the host: apt-get install qemu-utils');
    await host.run(['mkdir', '-p', '-m', '0711', this.opts.storageDir]);
    const df = await host.run(['df', '-Pk', this.opts.storageDir]);
    const freeKb = Number(df.stdout.trim().split('\n').pop()?.split(/\s+/)[3]);
    if (df.code !== 0 || !Number.isFinite(freeKb)) problems.push(`the storage folder ${this.opts.storageDir} cannot be used: ${df.stderr.trim().slice(0, 200)}`);
    const freeBytes = Number.isFinite(freeKb) ? freeKb * 1024 : 0;
    if (Number.isFinite(freeKb) && freeBytes < 4 * 1024 ** 3) problems.push(`only ${(freeBytes / 1024 ** 3).toFixed(1)} GB free in ${this.opts.storageDir}; the base image alone needs about 1.1 GB`);
    return { ok: problems.length === 0, ...(qemu ? { qemu } : {}), kvm, freeBytes, problems };
  }

  /** The uid:gid libvirt runs QEMU as (DAC base label), to hand it the proxy socket. */
  private dacLabel(host: SshHost): Promise<string | undefined> {
    this.qemuLabel ??= host.check([...VIRSH, 'capabilities']).then((xml) => {
      const m = new RegExp(`<baselabel type='${this.opts.virtType}'>(\\+[0-9]+:\\+[0-9]+)</baselabel>`).exec(xml);
      return m?.[1];
    });
    return this.qemuLabel;
  }

  async start(opts: Parameters<QemuDriverPort<BaseImage>['start']>[0]): Promise<RemoteVm> {
    if (opts.backingDisk) throw new FactoryError('RemoteHostSetup', 'environment layers are not available on a remote sandbox host yet');
    const started = Date.now();
    const domain = `fiab-${path.basename(opts.sandboxDir).toLowerCase()}`;
    if (!DOMAIN_NAME.test(domain)) throw new FactoryError('InvalidInput', `the sandbox name ${JSON.stringify(path.basename(opts.sandboxDir))} cannot name a remote domain`);
    const host = await this.opts.connect();
    const base = await this.volumes.ensureBase(host, opts.image);
    await mkdir(opts.sandboxDir, { recursive: true, mode: 0o700 });
    // A sandbox of the same name left by a lost connection or a killed app goes first.
    await this.removeDomain(host, domain);
    const { dir, overlay } = await this.volumes.createSandbox(host, domain, base);
    const vm = new RemoteVm(this, host, domain, dir, opts.sandboxDir, generateSandboxKeys(domain), this.opts.virtType);
    this.live.set(domain, vm);
    try {
      await host.writeFile(`${dir}/authorized_keys`, vm.keys.clientPublicKey, 0o600);
      await host.writeFile(`${dir}/ssh_host_ed25519_key`, vm.keys.hostPrivateKey, 0o600);
      const forwards = await this.remoteForwards(host, dir, opts.guestForwards ?? [], vm.sockets);
      const cmdline = opts.image.cmdline ?? opts.image.manifest?.kernelCmdline ?? DEFAULT_CMDLINE;
      let lastError: Error | undefined;
      for (let attempt = 0; attempt < 4; attempt++) {
        const sshPort = 20_000 + Math.floor(Math.random() * 40_000);
        const xml = domainXml({
          name: domain,
          virtType: this.opts.virtType,
          memoryMb: opts.memoryMb ?? 2048,
          cpus: opts.cpus ?? 2,
          kernel: base.kernel,
          initrd: base.initrd,
          cmdline,
          overlay,
          serialLog: `${dir}/serial.log`,
          sshPort,
          guestForwards: forwards,
          fwCfg: [
            { name: 'authorized_keys', file: `${dir}/authorized_keys` },
            { name: 'ssh_host_ed25519_key', file: `${dir}/ssh_host_ed25519_key` },
          ],
        });
        const r = await host.run([...VIRSH, 'create', '/dev/stdin'], { stdin: xml, timeoutMs: 180_000 });
        if (r.code === 0) {
          await vm.boot(sshPort, (opts.bootTimeoutMs ?? 300_000) - (Date.now() - started));
          vm.bootMs = Date.now() - started;
          return vm;
        }
        lastError = new FactoryError('SandboxBootFailed', `libvirt on ${this.opts.hostName} refused the sandbox: ${r.stderr.trim().slice(0, 800)}`);
        if (!/host forwarding|Address already in use/i.test(r.stderr)) break;
      }
      throw lastError ?? new Error('the domain was not created');
    } catch (err) {
      // The start's own error is the one to report; the host's reap removes what this leaves.
      await vm.destroy().catch(() => undefined);
      throw err;
    }
  }

  /**
   * The credential proxy's forward, carried across SSH: a socket in the sandbox's folder on the host,
   * forwarded by sshd to the proxy's socket here, handed to libvirt's QEMU user. Any other guest forward
   * would run a command of this machine on the host: refused.
   */
  private async remoteForwards(host: SshHost, dir: string, specs: GuestForwardSpec[], sockets: string[]): Promise<GuestForwardSpec[]> {
    const out: GuestForwardSpec[] = [];
    const label = specs.length ? await this.dacLabel(host) : undefined;
    for (const [i, spec] of specs.entries()) {
      const local = LOCAL_SOCAT.exec(spec.command)?.[1];
      if (!local) throw new FactoryError('RemoteHostSetup', `the guest forward to ${spec.guestAddress}:${spec.guestPort} is not a proxy socket and cannot run on a remote host`);
      const remote = checkHostPath('proxy socket', `${dir}/proxy-${i}.sock`);
      await host.forwardStreamLocal(remote, local);
      sockets.push(remote);
      // sshd makes the socket 0600 for the login user; libvirt's QEMU (and the socat it spawns) runs as another.
      if (label) await host.check(['chown', label, remote]);
      out.push({ ...spec, command: `socat - UNIX-CONNECT:${remote}` });
    }
    return out;
  }

  /** Ends a domain (a transient one is then gone) and deletes its folder; both may already be gone. */
  async removeDomain(host: SshHost, domain: string): Promise<void> {
    const r = await host.run([...VIRSH, 'destroy', domain]);
    if (r.code !== 0 && !/failed to get domain|not found|not running/i.test(r.stderr)) {
      throw new FactoryError('RemoteCommandFailed', `could not end ${domain} on ${this.opts.hostName}: ${r.stderr.trim().slice(0, 300)}`);
    }
    await this.volumes.removeSandbox(host, domain);
  }

  /**
   * After a (re)connection: every sandbox of this app's storage folder on the host that is not
   * one of `keep` (running and still connected) is ended and deleted. Resolves to those removed.
   */
  async reap(keep: ReadonlySet<string> = new Set()): Promise<string[]> {
    const host = await this.opts.connect();
    const removed: string[] = [];
    for (const domain of await this.volumes.listSandboxes(host)) {
      if (keep.has(domain)) continue;
      await this.removeDomain(host, domain);
      removed.push(domain);
    }
    return removed;
  }

  /** Domains named like this app's running on the host (fiab-*). */
  async domains(): Promise<string[]> {
    const host = await this.opts.connect();
    const out = await host.check([...VIRSH, 'list', '--name']);
    return out.split('\n').map((l) => l.trim()).filter((n) => DOMAIN_NAME.test(n));
  }

  forget(domain: string, vm: RemoteVm): void {
    if (this.live.get(domain) === vm) this.live.delete(domain);
  }
}

/** One sandbox on a remote host. */
export class RemoteVm implements RunningVmPort {
  // No local process: 0 is never recorded as a QEMU pid to reap (the task book skips a falsy pid).
  readonly pid = 0;
  readonly accel: string;
  readonly host: string;
  sshPort = 0;
  bootMs = 0;
  readonly exited: Promise<void>;
  /** Proxy sockets on the host forwarded back here. */
  readonly sockets: string[] = [];
  private ended = false;
  private endNow!: () => void;
  private forward: { port: number; close(): void } | undefined;
  private spare: SandboxSsh | undefined;
  private serial = '';
  private destroying: Promise<void> | undefined;

  constructor(
    private readonly driver: LibvirtSandboxDriver,
    private readonly conn: SshHost,
    readonly domain: string,
    readonly remoteDir: string,
    readonly sandboxDir: string,
    readonly keys: SandboxKeys,
    virtType: string,
  ) {
    this.accel = virtType === 'kvm' ? 'kvm' : 'tcg';
    this.host = conn.target.name;
    this.exited = new Promise((resolve) => (this.endNow = resolve));
    const onLost = () => this.end();
    conn.once('lost', onLost);
    void this.exited.then(() => conn.off('lost', onLost));
  }

  get hasExited(): boolean {
    return this.ended;
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.forward?.close();
    this.spare?.close();
    this.endNow();
  }

  /** Waits until the guest's sshd answers through the host, with the pinned key. */
  async boot(sshPort: number, timeoutMs: number): Promise<void> {
    this.forward = await this.conn.localForward('127.0.0.1', sshPort);
    this.sshPort = this.forward.port;
    const watch = setInterval(() => {
      // The domain ending by itself (a crash, a shutdown in the guest) ends the sandbox.
      void this.conn.run(['virsh', '-q', '-c', 'qemu:///system', 'domstate', this.domain]).then(
        (r) => {
          if (r.code !== 0 || !/running|paused/.test(r.stdout)) this.end();
        },
        () => this.end(),
      );
    }, 5000);
    void this.exited.then(() => clearInterval(watch));
    try {
      this.spare = await waitForSsh({
        endpoint: { port: this.forward.port, keys: this.keys },
        vm: this,
        timeoutMs: Math.max(timeoutMs, 1000),
        exitedError: () => new FactoryError('SandboxBootFailed', `the sandbox ${this.domain} on ${this.host} ended before it answered SSH${this.serialSection()}`),
        timeoutError: (login) =>
          new FactoryError('SandboxBootTimeout', `the sandbox ${this.domain} on ${this.host} did not answer SSH within ${Math.round(timeoutMs / 1000)} s${login ? `: ${login.message}` : ''}${this.serialSection()}`),
      });
    } catch (err) {
      await this.fetchSerial();
      if (err instanceof FactoryError) err.message += this.serialSection();
      throw err;
    }
  }

  private async fetchSerial(): Promise<void> {
    // Only adds detail to an error already on its way; a link that cannot read the log leaves it out.
    const r = await this.conn.run(['tail', '-n', '40', `${this.remoteDir}/serial.log`]).catch(() => undefined);
    if (r?.code === 0) this.serial = r.stdout.replace(/[^\x20-\x7e\n]/g, '?');
  }

  private serialSection(): string {
    return this.serial ? `\n--- last serial console lines ---\n${this.serial}` : '';
  }

  async ssh(): Promise<SandboxSsh> {
    if (this.ended || !this.forward) throw new FactoryError('SandboxStopped', `the sandbox ${this.domain} is not running`);
    const spare = this.spare;
    this.spare = undefined;
    if (spare && !spare.isClosed) return spare;
    return connectGuest({ port: this.forward.port, keys: this.keys });
  }

  /** The leak check's view of this sandbox: memory, overlay and serial log scanned on the host. */
  leakSource(): RemoteLeakSource {
    return {
      scan: async (needles) => {
        if (this.ended || this.conn.isClosed) throw new FactoryError('SandboxStopped', `the sandbox ${this.domain} on ${this.host} is not running`);
        return remoteLeakScan({ host: this.conn, dir: this.remoteDir, domain: this.domain }, needles);
      },
    };
  }

  serialTail(lines: number): string {
    return this.serial.split('\n').slice(-lines).join('\n');
  }

  stop(): Promise<void> {
    return this.destroy();
  }

  /** Ends the domain and deletes its overlay, keys and sockets on the host; safe to call twice. */
  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      this.end();
      // A forward of a dropped link is gone with it; the domain and folder below are what must go.
      for (const sock of this.sockets) await this.conn.unforwardStreamLocal(sock).catch(() => undefined);
      try {
        if (!this.conn.isClosed) await this.driver.removeDomain(this.conn, this.domain);
      } finally {
        this.driver.forget(this.domain, this);
      }
    })();
    return this.destroying;
  }
}

/** The leak source of a running VM on a remote host; undefined for any other VM. */
export function remoteLeakSourceOf(vm: unknown): RemoteLeakSource | undefined {
  return vm instanceof RemoteVm && !vm.hasExited ? vm.leakSource() : undefined;
}
