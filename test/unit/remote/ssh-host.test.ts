// The host key of a sandbox host is a trust boundary: only a pinned SHA256
// fingerprint is accepted. These need no server: the fingerprint as OpenSSH
// shows it, and a malformed pin refused before any connection. The live
// refusals (unknown key, changed key) are in test/integration/remote-host.test.ts.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SshHost, sshFingerprint } from '../../../main/remote/ssh-host.js';
import { generateSandboxKeys } from '../../../main/ssh/sandbox-keys.js';

describe('sandbox host key pinning', () => {
  it('computes the fingerprint ssh-keygen -l shows (SHA256, base64 without padding)', () => {
    const pub = generateSandboxKeys('t').hostPublicKey;
    const blob = Buffer.from(pub.split(' ')[1]!, 'base64');
    const fp = sshFingerprint(blob);
    expect(fp).toBe(`SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`);
    expect(fp).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
  });

  it('refuses a pin that is not a SHA256 fingerprint before connecting anywhere', async () => {
    for (const bad of ['MD5:aa:bb', 'SHA256:short', `SHA256:${'A'.repeat(43)}\nProxyCommand evil`, '']) {
      await expect(SshHost.connect({ name: 'h', host: '192.0.2.1', port: 22, username: 'root', privateKey: 'x', hostKeyFingerprint: bad })).rejects.toMatchObject({ name: 'InvalidInput' });
    }
  });
});
