// The guest agent against a real SSH server on 127.0.0.1 (ssh2's server, in
// process, so the test decides what the "guest" does: answer late, present the
// wrong host key, refuse the login, fail the re-key). The real guest is booted
// by test/integration/vm-boot.test.ts.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import ssh2, { type ServerChannel } from 'ssh2';
import { afterEach, describe, expect, it } from 'vitest';
import { GUEST_SSH_PATHS, loginAfterRekey, rekeyGuest, rekeyInput, rekeyScript, waitForSsh, type GuestProcess } from '../../../main/guest/guest-agent.js';
import { generateSandboxKeys } from '../../../main/ssh/sandbox-keys.js';
import { HostKeyMismatchError } from '../../../main/ssh/sandbox-ssh.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const running: GuestProcess = { hasExited: false, exited: new Promise(() => {}) };

interface GuestBehaviour {
  /** The client key it lets in (any other is refused). */
  clientPublicKey: string;
  onExec?: (command: string, stdin: Promise<string>, stream: ServerChannel) => void;
}

/** An SSH server standing in for the guest's sshd, with the given host key, on port (0: any). */
async function startGuest(hostPrivateKey: string, behaviour: GuestBehaviour, port = 0): Promise<{ port: number; close: () => void }> {
  const allowed = (ssh2.utils.parseKey(behaviour.clientPublicKey) as ssh2.ParsedKey).getPublicSSH();
  const server = new ssh2.Server({ hostKeys: [hostPrivateKey] }, (client) => {
    client.on('error', () => {});
    client.on('authentication', (ctx) => {
      if (ctx.method === 'publickey' && Buffer.from(ctx.key.data).equals(allowed)) ctx.accept();
      else ctx.reject(['publickey']);
    });
    client.on('ready', () => {
      client.on('session', (accept) => {
        accept().on('exec', (ok, _rej, info) => {
          const stream = ok();
          const stdin = new Promise<string>((resolve) => {
            let text = '';
            stream.on('data', (c: Buffer) => (text += c.toString()));
            stream.on('end', () => resolve(text));
          });
          behaviour.onExec?.(info.command, stdin, stream);
        });
      });
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  const close = () => server.close();
  cleanups.push(close);
  return { port: (server.address() as AddressInfo).port, close };
}

async function unusedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

const errors = {
  exitedError: () => new Error('QEMU ended'),
  timeoutError: (login: Error | undefined) => new Error(`timed out${login ? `; login failed: ${login.message}` : ''}`),
};

describe('guest readiness', () => {
  it('waits until sshd answers, then logs in with the pinned host key', async () => {
    const keys = generateSandboxKeys('sb');
    const port = await unusedPort();
    // sshd comes up a while after QEMU started.
    setTimeout(() => void startGuest(keys.hostPrivateKey, { clientPublicKey: keys.clientPublicKey, onExec: (_c, _i, s) => (s.end('hello\n'), s.exit(0)) }, port), 700);
    const started = Date.now();
    const ssh = await waitForSsh({ endpoint: { port, keys }, vm: running, timeoutMs: 15_000, ...errors });
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    expect((await ssh.run('echo hello')).stdout).toBe('hello\n');
    ssh.close();
  });

  it('logs in soon after sshd listens even when its first probe went out before the guest network was up', async () => {
    const keys = generateSandboxKeys('sb');
    const guest = await startGuest(keys.hostPrivateKey, { clientPublicKey: keys.clientPublicKey, onExec: (_c, _i, s) => (s.end('up\n'), s.exit(0)) });
    // QEMU's user network stands in front of the guest: it accepts every connection at once, but one made
    // before the guest's network is up hears nothing until the SYN is resent, 3 s later.
    const upAt = Date.now() + 600;
    const silent = new Set<net.Socket>();
    const network = net.createServer((client) => {
      if (Date.now() < upAt) {
        silent.add(client);
        client.on('close', () => silent.delete(client));
        client.on('error', () => {});
        return;
      }
      const guestSide = net.connect(guest.port, '127.0.0.1');
      client.pipe(guestSide).pipe(client);
      client.on('error', () => guestSide.destroy());
      guestSide.on('error', () => client.destroy());
    });
    await new Promise<void>((r) => network.listen(0, '127.0.0.1', r));
    cleanups.push(() => network.close());
    const started = Date.now();
    const ssh = await waitForSsh({ endpoint: { port: (network.address() as AddressInfo).port, keys }, vm: running, timeoutMs: 15_000, ...errors });
    const tookMs = Date.now() - started;
    expect((await ssh.run('echo up')).stdout).toBe('up\n');
    ssh.close();
    // Not held up by the probes that went out too early (each waits 3 s), and none of them is left open.
    expect(tookMs).toBeLessThan(2500);
    await expect.poll(() => silent.size, { timeout: 2000 }).toBe(0);
  });

  it('refuses at once a server presenting any other host key, without waiting for the deadline', async () => {
    const keys = generateSandboxKeys('sb');
    const impostor = generateSandboxKeys('impostor');
    const { port } = await startGuest(impostor.hostPrivateKey, { clientPublicKey: keys.clientPublicKey });
    const started = Date.now();
    await expect(waitForSsh({ endpoint: { port, keys }, vm: running, timeoutMs: 20_000, ...errors })).rejects.toBeInstanceOf(HostKeyMismatchError);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('says the login failed when sshd answers but refuses the client key', async () => {
    const keys = generateSandboxKeys('sb');
    const { port } = await startGuest(keys.hostPrivateKey, { clientPublicKey: generateSandboxKeys('other').clientPublicKey });
    await expect(waitForSsh({ endpoint: { port, keys }, vm: running, timeoutMs: 1500, ...errors })).rejects.toThrow(
      /^timed out; login failed: .*authentication/i,
    );
  });

  it('stops waiting as soon as the VM process ends', async () => {
    const keys = generateSandboxKeys('sb');
    const child = spawn('sleep', ['0.3']);
    const vm = {
      get hasExited() {
        return child.exitCode !== null || child.signalCode !== null;
      },
      exited: new Promise<void>((r) => child.once('exit', () => r())),
    };
    const started = Date.now();
    await expect(waitForSsh({ endpoint: { port: await unusedPort(), keys }, vm, timeoutMs: 20_000, ...errors })).rejects.toThrow('QEMU ended');
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('re-keying a restored guest', () => {
  it('hands the guest its new keys, the time and entropy, then pins the new host key once sshd has reloaded', async () => {
    const template = generateSandboxKeys('template');
    const fresh = generateSandboxKeys('clone');
    let seen: { command: string; stdin: string } | undefined;
    const old = await startGuest(template.hostPrivateKey, {
      clientPublicKey: template.clientPublicKey,
      onExec: (command, stdin, stream) =>
        void stdin.then((text) => {
          seen = { command, stdin: text };
          stream.exit(0);
          stream.end();
          // sshd keeps serving the old host key for a moment, then reloads with the new one.
          setTimeout(() => {
            old.close();
            void startGuest(fresh.hostPrivateKey, { clientPublicKey: fresh.clientPublicKey, onExec: (_c, _i, s) => (s.end('reloaded\n'), s.exit(0)) }, old.port);
          }, 400);
        }),
    });
    const first = await waitForSsh({ endpoint: { port: old.port, keys: template }, vm: running, timeoutMs: 10_000, ...errors });
    const kept = await rekeyGuest(first, { port: old.port, keys: fresh }, 10_000);
    // The connection that ran the re-key stays open for the first shell.
    expect(kept).toBe(first);
    expect(kept.isClosed).toBe(false);
    kept.close();
    // A new login pins the new host key: the old sshd (old key) is retried past, not accepted.
    const ssh = await loginAfterRekey({ port: old.port, keys: fresh }, running, 10_000);
    expect((await ssh.run('hostname')).stdout).toBe('reloaded\n');
    ssh.close();

    expect(seen?.command).toBe(rekeyScript());
    const [epoch, seed, machineId, pub, ...hostKey] = seen!.stdin.split('\n');
    expect(Math.abs(Number(epoch) - Date.now() / 1000)).toBeLessThan(10);
    expect(seed).toMatch(/^[0-9a-f]{128}$/);
    expect(machineId).toMatch(/^[0-9a-f]{32}$/);
    expect(pub).toBe(fresh.clientPublicKey.trim());
    expect(hostKey.join('\n').trim()).toBe(fresh.hostPrivateKey.trim());
  });

  it('fails with what the guest printed when the re-key script fails', async () => {
    const keys = generateSandboxKeys('template');
    const { port } = await startGuest(keys.hostPrivateKey, {
      clientPublicKey: keys.clientPublicKey,
      onExec: (_c, _stdin, stream) => {
        stream.stderr.write('sh: 3: cannot create /root/.ssh/authorized_keys: Read-only file system\n\x1b[31m');
        stream.exit(2);
        stream.end();
      },
    });
    const first = await waitForSsh({ endpoint: { port, keys }, vm: running, timeoutMs: 10_000, ...errors });
    await expect(rekeyGuest(first, { port, keys: generateSandboxKeys('clone') }, 5000)).rejects.toThrow(
      /^re-keying the restored sandbox failed \(exit 2\): sh: 3: cannot create \/root\/\.ssh\/authorized_keys: Read-only file system$/,
    );
  });

  it('gives up on a re-key script the guest never ends, saying so', async () => {
    const keys = generateSandboxKeys('template');
    const { port } = await startGuest(keys.hostPrivateKey, {
      clientPublicKey: keys.clientPublicKey,
      onExec: () => {
        // A guest that takes the script and never answers: no exit, no close.
      },
    });
    const first = await waitForSsh({ endpoint: { port, keys }, vm: running, timeoutMs: 10_000, ...errors });
    const started = Date.now();
    await expect(rekeyGuest(first, { port, keys: generateSandboxKeys('clone') }, 1500)).rejects.toThrow(
      /^re-keying the restored sandbox failed \(exit null\): no end within 1500 ms$/,
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('refuses key material that would smuggle extra lines into the guest script', () => {
    const keys = generateSandboxKeys('clone');
    expect(() => rekeyInput({ ...keys, clientPublicKey: `${keys.clientPublicKey.trim()}\nssh-ed25519 AAAAattacker x` })).toThrow(/not one ssh-ed25519 line/);
    expect(() => rekeyInput({ ...keys, clientPublicKey: 'ssh-rsa AAAA x' })).toThrow(/not one ssh-ed25519 line/);
    expect(() => rekeyInput({ ...keys, hostPrivateKey: 'not a key' })).toThrow(/not an OpenSSH private key/);
    const lines = rekeyInput(keys, 1_700_000_000_000).split('\n');
    expect(lines[0]).toBe('1700000000.000');
    expect(lines[3]).toBe(keys.clientPublicKey.trim());
  });

  it("touches exactly the guest files the image's init fills from fw_cfg and sshd reads", () => {
    const image = path.join(import.meta.dirname, '../../../vm-images/debian-bookworm/guest');
    const init = readFileSync(path.join(image, 'factory-init'), 'utf8');
    const sshd = readFileSync(path.join(image, 'sshd_config'), 'utf8');
    const script = rekeyScript();
    for (const file of GUEST_SSH_PATHS.authorizedKeys) {
      expect(init).toContain(`> ${file}`);
      expect(script).toContain(`put("${file}", "$pub\\n");`);
    }
    expect(init).toContain(`> ${GUEST_SSH_PATHS.hostKey}\n`);
    expect(sshd).toMatch(new RegExp(`^HostKey ${GUEST_SSH_PATHS.hostKey}$`, 'm'));
    expect(script).toContain(`put("${GUEST_SSH_PATHS.hostKey}", $hostkey, 0600);`);
    // Used unquoted in the script: plain absolute paths only.
    for (const file of [...GUEST_SSH_PATHS.authorizedKeys, GUEST_SSH_PATHS.hostKey, GUEST_SSH_PATHS.sshdPidFile]) expect(file).toMatch(/^(\/[A-Za-z0-9._-]+)+$/);
  });
});
