// How the host logs in to a sandbox, against ssh2's own server in process
// (standing in for the guest's sshd, which under emulation pays for every
// round trip): the per-sandbox key straight away, no "none" attempt first.
import type { AddressInfo } from 'node:net';
import ssh2 from 'ssh2';
import { afterEach, describe, expect, it } from 'vitest';
import { generateSandboxKeys } from '../../../main/ssh/sandbox-keys.js';
import { SandboxSsh } from '../../../main/ssh/sandbox-ssh.js';

const servers: ssh2.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

describe('logging in to a sandbox', () => {
  it('offers only the sandbox key, so the guest answers no "none" attempt first', async () => {
    const keys = generateSandboxKeys('sb');
    const allowed = (ssh2.utils.parseKey(keys.clientPublicKey) as ssh2.ParsedKey).getPublicSSH();
    const methods: string[] = [];
    const server = new ssh2.Server({ hostKeys: [keys.hostPrivateKey] }, (client) => {
      client.on('error', () => {});
      client.on('authentication', (ctx) => {
        methods.push(ctx.method);
        if (ctx.method === 'publickey' && Buffer.from(ctx.key.data).equals(allowed)) ctx.accept();
        else ctx.reject(['publickey']);
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const ssh = await SandboxSsh.connect({ port: (server.address() as AddressInfo).port, privateKey: keys.clientPrivateKey, hostPublicKey: keys.hostPublicKey });
    ssh.close();
    expect(methods.length).toBeGreaterThan(0);
    expect(methods).not.toContain('none');
    expect(new Set(methods)).toEqual(new Set(['publickey']));
  });
});
