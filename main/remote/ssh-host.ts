// One SSH connection to a sandbox host (ssh2). Everything the libvirt driver
// does on the host crosses it: commands (argument arrays, each word quoted;
// never a shell line built from untrusted parts), file uploads (SFTP), the
// jump to a guest's forwarded SSH port and the remote end of the credential
// proxy (a streamlocal forward back to a socket on this machine).
// The host key is a trust boundary: only a pinned SHA256 fingerprint, or a key
// the user's known_hosts lists for this host, is accepted; an unknown key is
// refused showing its fingerprint, a changed one is refused loudly.
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import ssh2, { type ClientChannel, type SFTPWrapper } from 'ssh2';
import { FactoryError } from '../../common/errors.js';
import { shellQuote } from '../../common/shell-quote.js';
import { lookupKnownHosts, type KnownHostsVerdict } from './known-hosts.js';

export interface SshHostTarget {
  /** The host's name in settings (for messages). */
  name: string;
  host: string;
  port: number;
  username: string;
  /** The client key (OpenSSH format); or agent, or both. */
  privateKey?: string;
  /** The user's SSH agent socket (SSH_AUTH_SOCK): its keys are offered, none leaves it. */
  agent?: string;
  /** "SHA256:<base64>" as `ssh-keygen -lf` prints it; absent = not pinned yet (refused unless knownHosts lists it). */
  hostKeyFingerprint?: string;
  /** The text of the user's known_hosts: a key it lists for host:port is accepted, another key listed there is refused. */
  knownHosts?: string;
  readyTimeoutMs?: number;
}

/** The fingerprint OpenSSH shows for a host key blob. */
export function sshFingerprint(keyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '')}`;
}

const FINGERPRINT = /^SHA256:[A-Za-z0-9+/]{43}$/;
const MAX_OUTPUT = 4 * 1024 * 1024;

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export class SshHost extends EventEmitter {
  private closed = false;
  private sftpSession: Promise<SFTPWrapper> | undefined;
  private readonly streamTargets = new Map<string, string>();

  private constructor(
    readonly target: SshHostTarget,
    private readonly client: ssh2.Client,
  ) {
    super();
    client.on('close', () => {
      if (this.closed) return;
      this.closed = true;
      this.emit('lost');
    });
    // A remote streamlocal forward hands each connection to the local socket it maps to.
    client.on('unix connection', (info: ssh2.UNIXConnectionDetails, accept: ssh2.AcceptConnection<ssh2.Channel>, reject: ssh2.RejectConnection) => {
      const local = this.streamTargets.get(info.socketPath);
      if (!local) return reject();
      const channel = accept();
      const sock = net.connect(local);
      sock.on('error', () => channel.close());
      channel.on('error', () => sock.destroy());
      channel.pipe(sock).pipe(channel);
    });
  }

  static connect(target: SshHostTarget): Promise<SshHost> {
    if (target.hostKeyFingerprint !== undefined && !FINGERPRINT.test(target.hostKeyFingerprint)) {
      return Promise.reject(new FactoryError('InvalidInput', `the pinned host key of sandbox host ${JSON.stringify(target.name)} is not a SHA256 fingerprint like ssh-keygen -l prints`));
    }
    if (!target.privateKey && !target.agent) {
      return Promise.reject(new FactoryError('InvalidInput', `sandbox host ${JSON.stringify(target.name)} has neither a key file nor an SSH agent to log in with`));
    }
    return new Promise((resolve, reject) => {
      const client = new ssh2.Client();
      let presented: string | undefined;
      let listed: KnownHostsVerdict = 'unknown';
      let settled = false;
      const where = `sandbox host ${target.name} (${target.host}:${target.port})`;
      client.on('error', (err: Error) => {
        if (settled) return;
        settled = true;
        client.end();
        if (presented && target.hostKeyFingerprint && presented !== target.hostKeyFingerprint) {
          reject(new FactoryError('RemoteHostKeyChanged', `WARNING: the host key of ${where} has CHANGED: it presented ${presented}, the pinned key is ${target.hostKeyFingerprint}; someone may be intercepting the connection. Refusing to connect`, presented));
        } else if (presented && !target.hostKeyFingerprint && (listed === 'mismatch' || listed === 'revoked')) {
          const why = listed === 'revoked' ? 'a key your known_hosts marks @revoked' : 'a key other than the one your ~/.ssh/known_hosts lists for it';
          reject(new FactoryError('RemoteHostKeyChanged', `WARNING: ${where} presented ${why} (${presented}); someone may be intercepting the connection. Refusing to connect`, presented));
        } else if (presented && !target.hostKeyFingerprint && listed !== 'match') {
          reject(new FactoryError('RemoteHostKeyUnknown', `${where} presented the host key ${presented}, which is not pinned; check it on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and pin it in Settings`, presented));
        } else {
          reject(new FactoryError('RemoteHostUnreachable', `cannot reach ${where}: ${err.message}`));
        }
      });
      client.once('ready', () => {
        if (settled) return void client.end();
        settled = true;
        const conn = new SshHost(target, client);
        conn.presentedFingerprint = presented;
        conn.verifiedBy = target.hostKeyFingerprint ? 'pinned' : 'known_hosts';
        resolve(conn);
      });
      client.connect({
        host: target.host,
        port: target.port,
        username: target.username,
        ...(target.privateKey ? { privateKey: target.privateKey } : {}),
        ...(target.agent ? { agent: target.agent } : {}),
        readyTimeout: target.readyTimeoutMs ?? 20_000,
        keepaliveInterval: 5_000,
        keepaliveCountMax: 3,
        hostVerifier: (key: Buffer) => {
          presented = sshFingerprint(key);
          if (target.hostKeyFingerprint !== undefined) return presented === target.hostKeyFingerprint;
          // Nothing unverified is accepted: without a pin, only a key known_hosts lists for this very host:port.
          listed = target.knownHosts ? lookupKnownHosts(target.knownHosts, target.host, target.port, key) : 'unknown';
          return listed === 'match';
        },
      });
    });
  }

  /** The fingerprint the host presented, and what vouched for it. */
  presentedFingerprint: string | undefined;
  verifiedBy: 'pinned' | 'known_hosts' = 'pinned';

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Runs argv on the host (each word quoted) in the C locale, stdin optional, output capped. Throws when
   * the connection is gone. The app reads what virsh, df and the rest say, and a host's own locale
   * would translate it (virsh's "failed to get domain" among them).
   */
  run(argv: string[], opts: { stdin?: string | Buffer; timeoutMs?: number } = {}): Promise<RunResult> {
    if (argv.length === 0) throw new Error('no command');
    return this.runLine(['env', 'LC_ALL=C', ...argv].map(shellQuote).join(' '), opts);
  }

  /** Like run(), but throws a FactoryError naming the command on a non-zero exit. */
  async check(argv: string[], opts: { stdin?: string | Buffer; timeoutMs?: number } = {}): Promise<string> {
    const r = await this.run(argv, opts);
    if (r.code !== 0) {
      const said = r.stderr.replace(/[^\x20-\x7e\n]/g, '?').trim().split('\n').slice(-3).join(' / ');
      throw new FactoryError('RemoteCommandFailed', `on sandbox host ${this.target.name}, ${argv.slice(0, 3).join(' ')} failed (exit ${r.code}): ${said.slice(0, 500)}`);
    }
    return r.stdout;
  }

  private runLine(line: string, opts: { stdin?: string | Buffer; timeoutMs?: number }): Promise<RunResult> {
    if (this.closed) return Promise.reject(this.lostError());
    const timeoutMs = opts.timeoutMs ?? 120_000;
    return new Promise((resolve, reject) => {
      this.client.exec(line, (err, ch) => {
        if (err) return reject(this.closed ? this.lostError() : err);
        const out: Buffer[] = [];
        const errs: Buffer[] = [];
        let outBytes = 0;
        let errBytes = 0;
        let code: number | null = null;
        const timer = setTimeout(() => {
          ch.close();
          reject(new FactoryError('RemoteCommandFailed', `on sandbox host ${this.target.name}, a command did not finish within ${timeoutMs} ms`));
        }, timeoutMs);
        ch.on('data', (c: Buffer) => {
          if ((outBytes += c.length) <= MAX_OUTPUT) out.push(c);
        });
        ch.stderr.on('data', (c: Buffer) => {
          if ((errBytes += c.length) <= 64 * 1024) errs.push(c);
        });
        ch.on('exit', (c: number | null) => (code = typeof c === 'number' ? c : null));
        ch.on('close', () => {
          clearTimeout(timer);
          if (this.closed && code === null) return reject(this.lostError());
          resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(errs).toString('utf8') });
        });
        if (opts.stdin !== undefined) ch.end(opts.stdin);
        else ch.end();
      });
    });
  }

  private lostError(): FactoryError {
    return new FactoryError('RemoteHostLost', `the connection to sandbox host ${this.target.name} was lost`);
  }

  private sftp(): Promise<SFTPWrapper> {
    this.sftpSession ??= new Promise((resolve, reject) => this.client.sftp((err, s) => (err ? reject(err) : resolve(s))));
    return this.sftpSession;
  }

  /** Uploads a local file to an absolute path on the host (created with mode). */
  async putFile(local: string, remote: string, mode = 0o600): Promise<void> {
    const sftp = await this.sftp();
    await new Promise<void>((resolve, reject) => sftp.fastPut(local, remote, { mode, concurrency: 16 }, (err) => (err ? reject(err) : resolve())));
  }

  async writeFile(remote: string, data: string | Buffer, mode = 0o600): Promise<void> {
    const sftp = await this.sftp();
    await new Promise<void>((resolve, reject) => sftp.writeFile(remote, data, { mode }, (err) => (err ? reject(err) : resolve())));
  }

  /** A TCP stream to host:port as seen from the sandbox host (the jump to a guest's SSH). */
  forwardOut(host: string, port: number): Promise<ClientChannel> {
    if (this.closed) return Promise.reject(this.lostError());
    return new Promise((resolve, reject) => this.client.forwardOut('127.0.0.1', 0, host, port, (err, ch) => (err ? reject(err) : resolve(ch))));
  }

  /**
   * A local listener on 127.0.0.1 whose every connection is carried to host:port on the sandbox host,
   * so code that connects to a port (the guest SSH client) reaches a guest there unchanged.
   */
  async localForward(host: string, port: number): Promise<{ port: number; close(): void }> {
    const server = net.createServer((sock) => {
      this.forwardOut(host, port).then(
        (ch) => {
          sock.on('error', () => ch.close());
          ch.on('error', () => sock.destroy());
          sock.pipe(ch).pipe(sock);
        },
        () => sock.destroy(),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const addr = server.address() as net.AddressInfo;
    this.once('lost', () => server.close());
    return { port: addr.port, close: () => server.close() };
  }

  /** sshd listens on remotePath on the host; each connection there reaches localPath on this machine. */
  async forwardStreamLocal(remotePath: string, localPath: string): Promise<void> {
    if (this.closed) throw this.lostError();
    await new Promise<void>((resolve, reject) => this.client.openssh_forwardInStreamLocal(remotePath, (err) => (err ? reject(err) : resolve())));
    this.streamTargets.set(remotePath, localPath);
  }

  async unforwardStreamLocal(remotePath: string): Promise<void> {
    this.streamTargets.delete(remotePath);
    if (this.closed) return;
    await new Promise<void>((resolve) => this.client.openssh_unforwardInStreamLocal(remotePath, () => resolve()));
  }

  close(): void {
    this.closed = true;
    this.client.end();
  }
}
