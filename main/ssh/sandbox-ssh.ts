// An SSH connection to one sandbox. The guest's host key is pinned: the
// verifier compares the presented key byte for byte with the one the host
// generated for this sandbox, so an unknown key is never accepted. Everything
// read back from the guest is capped.
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import ssh2, { type ClientChannel, type SFTPWrapper } from 'ssh2';
import { FactoryError } from '../../common/errors.js';
import { publicKeyBlob } from './sandbox-keys.js';

export interface SandboxSshConnectOptions {
  host?: string;
  port: number;
  username?: string;
  privateKey: string;
  /** The pinned host key, "ssh-ed25519 AAAA..." */
  hostPublicKey: string;
  readyTimeoutMs?: number;
}

export class HostKeyMismatchError extends FactoryError {
  constructor(port: number) {
    super('HostKeyMismatch', `the SSH server on 127.0.0.1:${port} presented a host key that is not this sandbox's pinned key; refusing to connect`);
  }
}

export class SandboxSsh {
  private sftpSession: Promise<SFTPWrapper> | undefined;
  private closed = false;

  private constructor(private readonly client: ssh2.Client) {
    client.on('close', () => {
      this.closed = true;
    });
    // Errors after the handshake surface on the channels; connect() keeps an
    // error listener on the client so they never crash the process.
  }

  /** Opens and authenticates a connection; rejects on a host key that is not the pinned one. */
  static connect(opts: SandboxSshConnectOptions): Promise<SandboxSsh> {
    const pinned = publicKeyBlob(opts.hostPublicKey);
    return new Promise((resolve, reject) => {
      const client = new ssh2.Client();
      let mismatch = false;
      let settled = false;
      // ssh2 may emit more than one error for one failed connection; every one
      // needs a listener or it would take the process down.
      client.on('error', (err: Error) => {
        if (settled) return;
        settled = true;
        client.end();
        reject(mismatch ? new HostKeyMismatchError(opts.port) : err);
      });
      client.once('ready', () => {
        if (settled) {
          client.end();
          return;
        }
        settled = true;
        resolve(new SandboxSsh(client));
      });
      client.connect({
        host: opts.host ?? '127.0.0.1',
        port: opts.port,
        username: opts.username ?? 'root',
        privateKey: opts.privateKey,
        // ssh2 would first try "none", one round trip more through the emulated sshd (about 10% of a
        // login's guest CPU here); only the key can ever log in.
        authHandler: ['publickey'],
        readyTimeout: opts.readyTimeoutMs ?? 20_000,
        hostVerifier: (key: Buffer) => {
          const ok = Buffer.isBuffer(key) && key.equals(pinned);
          if (!ok) mismatch = true;
          return ok;
        },
        keepaliveInterval: 15_000,
        keepaliveCountMax: 4,
      });
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  exec(command: string, opts: { pty?: { cols: number; rows: number }; env?: Record<string, string> } = {}): Promise<ClientChannel> {
    return new Promise((resolve, reject) => {
      const execOpts: ssh2.ExecOptions = {};
      if (opts.pty) execOpts.pty = { cols: opts.pty.cols, rows: opts.pty.rows, term: 'xterm-256color' };
      if (opts.env) execOpts.env = opts.env;
      this.client.exec(command, execOpts, (err, channel) => (err ? reject(err) : resolve(channel)));
    });
  }

  /**
   * Runs a command to completion. stdout and stderr are each kept up to
   * maxBytes (the rest is dropped and the text ends with a truncation note);
   * after timeoutMs the command is signalled, the channel closed and the call fails.
   */
  async run(command: string, opts: { maxBytes?: number; timeoutMs?: number } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const maxBytes = opts.maxBytes ?? 1024 * 1024;
    const timeoutMs = opts.timeoutMs ?? 120_000;
    const channel = await this.exec(command);
    return new Promise((resolve, reject) => {
      const out = new CappedBuffer(maxBytes);
      const err = new CappedBuffer(maxBytes);
      let code: number | null = null;
      const timer = setTimeout(() => {
        try {
          channel.signal('KILL');
        } catch {
          // the channel may already be closing
        }
        channel.close();
        reject(new FactoryError('GuestCommandTimeout', `command in the sandbox did not finish within ${timeoutMs} ms: ${command.slice(0, 200)}`));
      }, timeoutMs);
      channel.on('data', (c: Buffer) => out.push(c));
      channel.stderr.on('data', (c: Buffer) => err.push(c));
      channel.on('exit', (c: number | null) => {
        code = typeof c === 'number' ? c : null;
      });
      channel.on('close', () => {
        clearTimeout(timer);
        resolve({ code, stdout: out.text(), stderr: err.text() });
      });
    });
  }

  shell(opts: { cols: number; rows: number }): Promise<ClientChannel> {
    return new Promise((resolve, reject) => {
      this.client.shell({ cols: opts.cols, rows: opts.rows, term: 'xterm-256color' }, (err, channel) => (err ? reject(err) : resolve(channel)));
    });
  }

  async putFile(localPath: string, remotePath: string): Promise<void> {
    const sftp = await this.sftp();
    await new Promise<void>((resolve, reject) => sftp.fastPut(localPath, remotePath, (err) => (err ? reject(err) : resolve())));
  }

  /**
   * Downloads a file, refusing one larger than maxBytes: checked before the
   * transfer and again while it runs (the guest may grow the file); an
   * oversized download is deleted. Returns the number of bytes written.
   */
  async getFile(remotePath: string, localPath: string, opts: { maxBytes: number }): Promise<number> {
    const sftp = await this.sftp();
    const attrs = await new Promise<ssh2.Stats>((resolve, reject) => sftp.stat(remotePath, (err, st) => (err ? reject(err) : resolve(st))));
    if (!attrs.isFile()) throw new FactoryError('GuestFileRefused', `${remotePath} in the sandbox is not a regular file`);
    if (attrs.size > opts.maxBytes) {
      throw new FactoryError('GuestFileTooLarge', `${remotePath} in the sandbox is ${attrs.size} bytes, over the ${opts.maxBytes}-byte limit`);
    }
    let bytes = 0;
    try {
      await new Promise<void>((resolve, reject) => {
        const source = sftp.createReadStream(remotePath);
        const sink = createWriteStream(localPath, { mode: 0o600 });
        source.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > opts.maxBytes) {
            source.destroy();
            sink.destroy();
            reject(new FactoryError('GuestFileTooLarge', `${remotePath} in the sandbox grew past the ${opts.maxBytes}-byte limit while downloading`));
          }
        });
        source.on('error', reject);
        sink.on('error', reject);
        sink.on('finish', () => resolve());
        source.pipe(sink);
      });
    } catch (err) {
      await rm(localPath, { force: true });
      throw err;
    }
    return bytes;
  }

  close(): void {
    this.closed = true;
    this.client.end();
  }

  private sftp(): Promise<SFTPWrapper> {
    this.sftpSession ??= new Promise<SFTPWrapper>((resolve, reject) => {
      this.client.sftp((err, sftp) => {
        if (err) {
          this.sftpSession = undefined;
          reject(err);
          return;
        }
        sftp.on('close', () => {
          this.sftpSession = undefined;
        });
        resolve(sftp);
      });
    });
    return this.sftpSession;
  }
}

/** Keeps the first maxBytes of a stream and notes how much was dropped. */
class CappedBuffer {
  private chunks: Buffer[] = [];
  private kept = 0;
  private dropped = 0;
  constructor(private readonly maxBytes: number) {}
  push(chunk: Buffer) {
    const room = this.maxBytes - this.kept;
    if (room > 0) {
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      this.chunks.push(part);
      this.kept += part.length;
    }
    this.dropped += Math.max(0, chunk.length - Math.max(0, room));
  }
  text(): string {
    const text = Buffer.concat(this.chunks).toString('utf8');
    return this.dropped ? `${text}\n[output truncated: ${this.dropped} more bytes]` : text;
  }
}
