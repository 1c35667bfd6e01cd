// A sandbox host filled in from an alias of the user's SSH config: what ssh -G
// prints becomes the host form's destination, port and key; what the app's SSH
// cannot follow (a jump host, a proxy command) and what would not be a safe
// destination are refused by name. The last test runs the real ssh -G.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SshAlias } from '../../../common/sandbox-hosts.js';
import { hostFromSshConfig, hostFromSshG, parseSshG } from '../../../main/remote/ssh-config.js';

const G = (lines: string[]) => parseSshG(lines.join('\n') + '\n');
const opts = (existing: string[] = [], agent = false) => ({ exists: (f: string) => existing.includes(f), agent, home: '/home/me' });

describe('a host from ssh -G', () => {
  it('takes the user, host name, port and the first key file that exists', () => {
    const g = G(['user builder', 'hostname kvm1.lan', 'port 2222', 'identityfile ~/.ssh/id_rsa', 'identityfile ~/.ssh/id_ed25519', 'proxyjump none']);
    expect(hostFromSshG('kvm', g, opts(['/home/me/.ssh/id_ed25519']))).toEqual({ destination: 'builder@kvm1.lan', port: 2222, keySource: 'file', keyFile: '/home/me/.ssh/id_ed25519' });
  });

  it('uses the agent when no key file exists and an agent runs, else leaves the key file to the user', () => {
    const g = G(['user me', 'hostname 10.0.0.5', 'port 22', 'identityfile ~/.ssh/id_ed25519']);
    expect(hostFromSshG('box', g, opts([], true))).toEqual({ destination: 'me@10.0.0.5', port: 22, keySource: 'agent' });
    expect(hostFromSshG('box', g, opts([], false))).toEqual({ destination: 'me@10.0.0.5', port: 22, keySource: 'file' });
  });

  it('puts an IPv6 address in brackets', () => {
    expect(hostFromSshG('v6', G(['user me', 'hostname fd00::5', 'port 22']), opts()).destination).toBe('me@[fd00::5]');
  });

  it('refuses a jump host and a proxy command, naming the directive', () => {
    expect(() => hostFromSshG('inner', G(['user me', 'hostname inner.lan', 'proxyjump bastion']), opts())).toThrow(/alias: inner goes through a jump host \(ProxyJump/);
    expect(() => hostFromSshG('inner', G(['user me', 'hostname inner.lan', 'proxycommand nc %h %p']), opts())).toThrow(/a proxy command \(ProxyCommand/);
  });

  it('refuses what would not be a safe destination: an option in the host, a space, a root-less user', () => {
    expect(() => hostFromSshG('x', G(['user me', 'hostname -oProxyCommand=touch /tmp/x']), opts())).toThrow(/^alias: x stands for .*(contains a space|starts with a dash|not a DNS name)/);
    expect(() => hostFromSshG('x', G(['user me', 'hostname evil\u0007.lan']), opts())).toThrow(/^alias: x stands for .*(control character|not a DNS name)/);
    expect(() => hostFromSshG('x', G(['user Me Too', 'hostname ok.lan']), opts())).toThrow(/alias: x stands for/);
    expect(() => hostFromSshG('x', G(['hostname ok.lan']), opts())).toThrow(/named no host name or user/);
  });

  it('takes an alias only as a plain name: never an option, a pattern or a second word', () => {
    for (const bad of ['-oProxyCommand=id', 'a b', '*', 'host\n', 'a;b', '']) expect(SshAlias.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    for (const ok of ['kvm-box', 'build.lan', 'rig_2']) expect(SshAlias.safeParse(ok).success, ok).toBe(true);
  });
});

function hasSsh(): boolean {
  try {
    execFileSync('ssh', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!hasSsh())('the real ssh -G on a config file', () => {
  it('follows Host blocks and their defaults, and says when ssh itself refuses the config', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ssh-config-'));
    try {
      const key = path.join(dir, 'id_test');
      fs.writeFileSync(key, 'not read here', { mode: 0o600 });
      const file = path.join(dir, 'config');
      fs.writeFileSync(file, [`Host rig`, `  HostName 127.0.0.1`, `  Port 2200`, `  User root`, `  IdentityFile ${key}`, `Host jumpy`, `  HostName inner.lan`, `  ProxyJump rig`, ''].join('\n'));
      expect(await hostFromSshConfig('rig', { file, agentSocket: () => undefined })).toEqual({ destination: 'root@127.0.0.1', port: 2200, keySource: 'file', keyFile: key });
      await expect(hostFromSshConfig('jumpy', { file })).rejects.toThrow(/jump host/);
      fs.writeFileSync(file, 'Host rig\n  NoSuchKeyword yes\n');
      await expect(hostFromSshConfig('rig', { file })).rejects.toThrow(/^alias: ssh -G rig failed: .*(Bad configuration option|terminating)/i);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
