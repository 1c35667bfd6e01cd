// A stand-in for a sandbox that runs what the host sends for real: an
// in-process ssh2 server on 127.0.0.1 whose exec requests run in a real bash
// on this machine (a VM cannot boot in a unit test; the integration tests run
// the real guest). The GuestSsh on the host side is built over a real ssh2
// client, so framing, exit statuses and channel closes are the real ones.
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import ssh2 from 'ssh2';
import type { ClientChannel } from 'ssh2';
import type { GuestSsh } from '../../main/guest/guest-ssh.js';
import { generateEd25519 } from '../../main/ssh/sandbox-keys.js';

const { Client, Server } = ssh2;

export interface LocalGuest {
  ssh: GuestSsh;
  /** Every command the host sent, in order. */
  commands: string[];
  close(): Promise<void>;
}

export async function localGuest(opts: { cwd: string; env?: Record<string, string> }): Promise<LocalGuest> {
  const commands: string[] = [];
  const hostKey = generateEd25519('local-guest').private;
  const server = new Server({ hostKeys: [hostKey] }, (client) => {
    client.on('authentication', (ctx) => ctx.accept());
    client.on('error', () => {});
    client.on('ready', () =>
      client.on('session', (accept) => {
        const session = accept();
        session.on('exec', (ok, _reject, info) => {
          commands.push(info.command);
          const ch = ok();
          const child = spawn('bash', ['-c', info.command], { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
          child.stdout.pipe(ch, { end: false });
          child.stderr.on('data', (d: Buffer) => ch.stderr.write(d));
          ch.on('data', (d: Buffer) => child.stdin.write(d));
          ch.on('end', () => child.stdin.end());
          ch.on('close', () => child.kill('SIGKILL'));
          child.stdin.on('error', () => {});
          child.on('close', (code) => {
            try {
              ch.exit(code ?? 255);
              ch.end();
            } catch {
              // the host closed the channel first (e.g. at a read cap)
            }
          });
        });
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = await new Promise<InstanceType<typeof Client>>((resolve, reject) => {
    const c = new Client();
    c.on('ready', () => resolve(c)).on('error', reject);
    c.connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, username: 'root', password: 'x' });
  });
  const exec = (command: string) =>
    new Promise<ClientChannel>((resolve, reject) => client.exec(command, (err, ch) => (err ? reject(err) : resolve(ch))));
  const ssh: GuestSsh = {
    exec,
    run: async (command, o = {}) => {
      const ch = await exec(command);
      const max = o.maxBytes ?? 1024 * 1024;
      let stdout = '';
      let stderr = '';
      let code: number | null = null;
      ch.on('data', (d: Buffer) => {
        if (stdout.length < max) stdout += d.toString('utf8');
      });
      ch.stderr.on('data', (d: Buffer) => {
        if (stderr.length < max) stderr += d.toString('utf8');
      });
      ch.on('exit', (c: number | null) => (code = typeof c === 'number' ? c : null));
      await new Promise<void>((r) => ch.on('close', () => r()));
      return { code, stdout, stderr };
    },
    putFile: async () => {
      throw new Error('not used');
    },
    getFile: async () => {
      throw new Error('not used');
    },
  };
  return {
    ssh,
    commands,
    close: async () => {
      client.end();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
