// What Settings and the hosts.* API refuse before anything reaches ssh, a command
// line or libvirt XML: hostile names, destinations, folders and key paths.
import { describe, expect, it } from 'vitest';
import { apiInputs, toWireError } from '../../../common/contract.js';

const good = { name: 'kvm-box', destination: 'alice@kvm.example.org', port: 22, keySource: 'file', keyFile: '/home/alice/.ssh/id_ed25519', capacity: 4, storageDir: '/var/lib/factory-in-a-box', virtType: 'kvm' };

function refusal(method: 'hosts.check' | 'hosts.save' | 'hosts.remove', input: unknown): string {
  const r = apiInputs[method].safeParse(input);
  if (r.success) return 'accepted';
  return toWireError(r.error).error.message;
}

describe('a sandbox host as the user types it', () => {
  it('accepts a plain host, an IPv6 literal, and the agent without a key file', () => {
    expect(refusal('hosts.check', good)).toBe('accepted');
    expect(refusal('hosts.check', { ...good, destination: 'root@[fe80::1]' })).toBe('accepted');
    const { keyFile: _, ...agent } = good;
    expect(refusal('hosts.check', { ...agent, keySource: 'agent' })).toBe('accepted');
  });

  it('accepts a key file in a folder with a space (only the app reads it), but no other kind of space', () => {
    expect(refusal('hosts.check', { ...good, keyFile: '/home/alice/Keys/work laptop/id_ed25519' })).toBe('accepted');
    expect(refusal('hosts.check', { ...good, keyFile: '~/Keys/work laptop/id_ed25519' })).toBe('accepted');
    expect(refusal('hosts.check', { ...good, keyFile: '/home/alice/Keys/work\u00a0laptop/id' })).toContain('keyFile: contains a space other than a plain one');
    expect(refusal('hosts.check', { ...good, keyFile: '/home/alice/Keys/work\tlaptop/id' })).toContain('keyFile: contains a control character');
  });

  it.each([
    ['a newline in the name', { name: 'box\nrm' }, 'name: contains a control character'],
    ['an escape sequence in the destination', { destination: 'alice@kvm\u001b[2J' }, 'destination: contains a control character'],
    ['a C1 control character', { destination: 'alice@kvm\u009b' }, 'destination: contains a control character'],
    ['a space that would split the command', { destination: 'alice@kvm -oProxyCommand=touch' }, 'destination: contains a space'],
    ['an option as the destination', { destination: '-oProxyCommand=sh' }, 'destination: starts with a dash (ssh would read it as an option)'],
    ['an option after the @', { destination: 'alice@-oProxyCommand=sh' }, 'destination: has a host that starts with a dash'],
    ['an option as the user', { destination: '-l@kvm' }, 'destination: starts with a dash'],
    ['an uppercase or shell user', { destination: 'al$ice@kvm' }, 'destination: has a user name that is not a plain login'],
    ['no user', { destination: 'kvm.example.org' }, 'destination: must be user@host'],
    ['a path in the host', { destination: 'alice@kvm/../etc' }, 'destination: has a host that is not a DNS name'],
    ['an overlong destination', { destination: `alice@${'a'.repeat(300)}` }, 'destination: is longer than 286 characters'],
    ['an overlong name', { name: 'a'.repeat(33) }, 'name: is longer than 32 characters'],
    ['the placement word any', { name: 'any' }, 'name: "local" and "any" are placements'],
    ['an uppercase name', { name: 'Box' }, 'name: must be lowercase letters'],
    ['a storage folder that climbs out', { storageDir: '/var/lib/../../etc' }, 'storageDir: must not contain ..'],
    ['a relative storage folder', { storageDir: 'images' }, 'storageDir: must be an absolute folder'],
    ['a storage folder with a shell character', { storageDir: '/srv/$(reboot)' }, 'storageDir: must be an absolute folder'],
    ['a key file that is an option', { keyFile: '-i/etc/shadow' }, 'keyFile: starts with a dash'],
    ['a relative key file', { keyFile: 'id_rsa' }, 'keyFile: must be an absolute path'],
    ['port 0', { port: 0 }, 'port: must be 1 to 65535'],
    ['a fractional capacity', { capacity: 1.5 }, 'capacity: must be a whole number'],
    ['an unknown virt type', { virtType: 'xen' }, 'virtType:'],
    ['a stray field', { proxyCommand: 'sh' }, 'input:'],
  ])('refuses %s, naming the field and the problem', (_what, change, message) => {
    expect(refusal('hosts.check', { ...good, ...change })).toContain(message);
  });

  it('needs a key file when the key comes from a file', () => {
    const { keyFile: _, ...noKey } = good;
    expect(refusal('hosts.check', noKey)).toBe('keyFile: is needed when the key comes from a file');
  });

  it('saves only with a real SHA256 fingerprint, and removes only a plain name', () => {
    expect(refusal('hosts.save', good)).toContain('hostKeyFingerprint:');
    expect(refusal('hosts.save', { ...good, hostKeyFingerprint: 'SHA256:short' })).toContain('hostKeyFingerprint: must be a SHA256 fingerprint');
    expect(refusal('hosts.save', { ...good, hostKeyFingerprint: `SHA256:${'A'.repeat(43)}` })).toBe('accepted');
    expect(refusal('hosts.save', { ...good, hostKeyFingerprint: `SHA256:${'A'.repeat(43)}`, previousName: 'x y' })).toContain('previousName: contains a space');
    expect(refusal('hosts.remove', { name: 'box;reboot' })).toContain('name: must be lowercase letters');
  });
});
