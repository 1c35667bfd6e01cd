// The host's end of a restored clone's identity port, against a real unix
// socket server standing in for QEMU's socket chardev (the test decides what
// the "guest" answers: ok, its own error, garbage, nothing, a flood). The real
// guest waiter runs in test/integration/snapshot-clone-identity.test.ts.
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IDENTITY_PORT_NAME, IdentityChannel, identityMessage, identityWaiterCommand } from '../../../main/guest/identity-channel.js';
import { GUEST_SSH_PATHS } from '../../../main/guest/guest-agent.js';
import { CONSOLE_FRAME, encodeConsoleFrame } from '../../../main/guest/guest-console.js';
import { generateSandboxKeys } from '../../../main/ssh/sandbox-keys.js';

let dir: string;
const servers: net.Server[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'identity-port-'));
});
afterEach(async () => {
  for (const s of servers.splice(0)) s.close();
  await rm(dir, { recursive: true, force: true });
});

/** A stand-in for QEMU's chardev: collects what the host wrote, answers with `guest(received, socket)`. */
async function fakePort(guest: (received: string, socket: net.Socket) => void): Promise<{ socketPath: string; received: () => string }> {
  const socketPath = path.join(dir, 'identity.sock');
  let received = '';
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.on('data', (c: Buffer) => {
      received += c.toString();
      if (received.endsWith('-----END OPENSSH PRIVATE KEY-----\n')) guest(received, socket);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(socketPath, r));
  return { socketPath, received: () => received };
}

const keys = generateSandboxKeys('clone');

describe('the identity port, host side', () => {
  it("sends the clone's identity and resolves on the guest's ok", async () => {
    const port = await fakePort((_text, s) => s.write('ok\n'));
    const channel = await IdentityChannel.connect(port.socketPath, Date.now() + 5000);
    channel.send(keys);
    await channel.reply(5000);
    const lines = port.received().split('\n');
    expect(lines[0]).toMatch(/^[0-9]+\.[0-9]{3}$/);
    expect(lines[1]).toMatch(/^[0-9a-f]{128}$/);
    expect(lines[2]).toMatch(/^[0-9a-f]{32}$/);
    expect(lines[3]).toBe(keys.clientPublicKey.trim());
    expect(port.received()).toContain(keys.hostPrivateKey.trim());
  });

  it('waits for a socket QEMU has not made yet', async () => {
    const socketPath = path.join(dir, 'identity.sock');
    setTimeout(() => void fakePort((_t, s) => s.write('ok\n')), 300);
    const channel = await IdentityChannel.connect(socketPath, Date.now() + 5000);
    channel.send(keys);
    await channel.reply(5000);
  });

  it("gives up connecting at the deadline, or at once when QEMU has ended", async () => {
    const missing = path.join(dir, 'never.sock');
    await expect(IdentityChannel.connect(missing, Date.now() + 200)).rejects.toThrow(/could not connect to the identity port's socket/);
    const started = Date.now();
    await expect(IdentityChannel.connect(missing, Date.now() + 20_000, () => false)).rejects.toThrow(/identity port/);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("fails with the guest's own reason, control characters made visible", async () => {
    const port = await fakePort((_t, s) => s.write('error: sshd did not listen\x1b[2J\x07 within 20 s\n'));
    const channel = await IdentityChannel.connect(port.socketPath, Date.now() + 5000);
    channel.send(keys);
    await expect(channel.reply(5000)).rejects.toThrow(/^the guest could not take its identity: sshd did not listen\?\[2J\? within 20 s$/);
  });

  it('refuses anything but ok: a lookalike line, a reply split over writes into something else', async () => {
    for (const answer of ['okay\n', 'OK\n', ' ok\n', 'ok \n', 'ok\r\n']) {
      const port = await fakePort((_t, s) => s.write(answer));
      const channel = await IdentityChannel.connect(port.socketPath, Date.now() + 5000);
      channel.send(keys);
      await expect(channel.reply(5000), JSON.stringify(answer)).rejects.toThrow(/answered something else than ok/);
      servers.pop()!.close();
      await rm(port.socketPath, { force: true });
    }
  });

  it('stops reading a guest that floods the port without a line end', async () => {
    const port = await fakePort((_t, s) => s.write(Buffer.alloc(1 << 20, 'o')));
    const channel = await IdentityChannel.connect(port.socketPath, Date.now() + 5000);
    channel.send(keys);
    await expect(channel.reply(5000)).rejects.toThrow(/sent 1024 bytes without a line end/);
  });

  it('fails when the port closes before an answer, and when no answer comes in time', async () => {
    const closing = await fakePort((_t, s) => s.end());
    const a = await IdentityChannel.connect(closing.socketPath, Date.now() + 5000);
    a.send(keys);
    await expect(a.reply(5000)).rejects.toThrow(/QEMU closed the identity port's socket before the guest took its identity/);
    servers.pop()!.close();
    await rm(closing.socketPath, { force: true });

    const silent = await fakePort(() => {});
    const b = await IdentityChannel.connect(silent.socketPath, Date.now() + 5000);
    b.send(keys);
    const started = Date.now();
    await expect(b.reply(300)).rejects.toThrow(/did not take its identity within 300 ms/);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('asks for a first shell before the identity, and hands the port over after ok with what followed it', async () => {
    // The relay's first frame can come in the same write as the answer.
    const port = await fakePort((_t, s) => s.write(Buffer.concat([Buffer.from('ok\n'), encodeConsoleFrame(CONSOLE_FRAME.data, Buffer.from('# '))])));
    const channel = await IdentityChannel.connect(port.socketPath, Date.now() + 5000);
    channel.send(keys, { cols: 120, rows: 40 });
    await channel.reply(5000);
    expect(port.received().split('\n')[0]).toBe('console 120 40');
    expect(port.received().split('\n')[1]).toMatch(/^[0-9]+\.[0-9]{3}$/);
    const shell = channel.takeConsole();
    const seen: string[] = [];
    shell.onData((d) => seen.push(d.toString()));
    expect(seen).toEqual(['# ']);
    expect(() => channel.takeConsole()).toThrow(/no first shell to hand over/);
    shell.kill();
  });

  it('has no shell to hand over when none was asked for, or after the guest flooded the port', async () => {
    const plain = await fakePort((_t, s) => s.write('ok\n'));
    const a = await IdentityChannel.connect(plain.socketPath, Date.now() + 5000);
    a.send(keys);
    await a.reply(5000);
    expect(() => a.takeConsole()).toThrow(/no first shell to hand over/);
    servers.pop()!.close();
    await rm(plain.socketPath, { force: true });

    const flood = await fakePort((_t, s) => s.write(Buffer.concat([Buffer.from('ok\n'), Buffer.alloc(200_000, 1)])));
    const b = await IdentityChannel.connect(flood.socketPath, Date.now() + 5000);
    b.send(keys, { cols: 80, rows: 24 });
    await b.reply(5000).catch(() => {}); // the flood test wants the port busy, not this answer
    await new Promise((r) => setTimeout(r, 200));
    expect(() => b.takeConsole()).toThrow(/more than 65536 bytes before they were read/);
  });

  it('refuses a first shell of a size no terminal has', () => {
    expect(() => identityMessage(keys, Date.now(), { cols: 0, rows: 24 })).toThrow(/console size 0x24 is out of range/);
    expect(() => identityMessage(keys, Date.now(), { cols: 80.5, rows: 24 })).toThrow(/out of range/);
    expect(() => identityMessage(keys, Date.now(), { cols: 80, rows: 501 })).toThrow(/out of range/);
  });

  it('refuses to send keys that could break the framing of the message', () => {
    expect(() => identityMessage({ ...keys, clientPublicKey: `${keys.clientPublicKey.trim()}\nssh-ed25519 AAAAattacker x` })).toThrow(/not one ssh-ed25519 line/);
    expect(() => identityMessage({ ...keys, hostPrivateKey: `${keys.hostPrivateKey.trim()}\nmore` })).toThrow(/OpenSSH private key/);
  });

  it("the waiter reads the port by its QEMU name, and writes the files sshd and the logins use", () => {
    const command = identityWaiterCommand();
    expect(command).toContain(`"${IDENTITY_PORT_NAME}"`);
    expect(command).toContain(`my $key = "${GUEST_SSH_PATHS.hostKey}";`);
    for (const file of GUEST_SSH_PATHS.authorizedKeys) expect(command).toContain(`put("${file}", "$pub\\n");`);
    // Quoted once for the shell: the program itself holds no single quote.
    expect(command.match(/'/g)).toHaveLength(2);
  });
});
