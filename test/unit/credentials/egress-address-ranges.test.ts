// A rule's address ranges: where a registry resolves to a private or reserved
// address (a mirror on the LAN, a network that maps registries to a gateway),
// the user lets that rule's host reach exactly those ranges. Loopback,
// link-local and cloud metadata stay refused whatever a rule says, and a range
// that is malformed or too wide is refused by name when the rule is added.
// The resolver is injected (a real lookup cannot be made to answer 10.1.2.3).
import { describe, expect, it } from 'vitest';
import { EgressPolicy } from '../../../main/credentials/egress-policy.js';
import { createNetGuard, rangeAllowance } from '../../../main/credentials/net-guard.js';

const answering = (address: string) =>
  (async () => [{ address, family: address.includes(':') ? 6 : 4 }]) as unknown as Parameters<typeof createNetGuard>[0] extends infer O ? O extends { resolver?: infer R } ? R : never : never;

describe('address ranges of an egress rule', () => {
  it('lets a host resolve into its rule\'s range, and only there', async () => {
    const guard = createNetGuard({ resolver: answering('10.1.2.3') });
    await expect(guard.resolve('mirror.example')).rejects.toThrow(/10\.1\.2\.3 is a loopback, private/);
    await expect(guard.resolve('mirror.example', rangeAllowance(['10.1.0.0/16']))).resolves.toEqual([{ address: '10.1.2.3', family: 4 }]);
    await expect(guard.resolve('mirror.example', rangeAllowance(['10.2.0.0/16']))).rejects.toThrow(/refused/);
  });

  it('never lets a range reach loopback, link-local or metadata addresses', async () => {
    for (const range of ['127.0.0.0/8', '127.0.0.1/32', '169.254.169.254/32', '169.254.0.0/16', '0.0.0.0/0', '::1/128', 'fe80::/64', '10.0.0.0/4']) {
      expect(() => rangeAllowance([range]), range).toThrow(/cannot be allowed/);
    }
    for (const range of ['10.0.0.0/33', 'not-an-ip/8', '10.0.0.0/x']) expect(() => rangeAllowance([range]), range).toThrow(/not an IPv4 or IPv6 range/);
    // A range that holds a metadata address inside a wider private one still never yields it.
    const wide = rangeAllowance(['fd00::/16'])!;
    expect(wide('fd00:ec2::254')).toBe(false);
    expect(wide('fd00:1::5')).toBe(true);
  });

  it('refuses a rule with a bad range when it is added, naming the rule', () => {
    expect(() => new EgressPolicy([{ name: 'mirror', host: 'mirror.example', port: 443, scheme: 'https', addresses: ['127.0.0.0/8'] }])).toThrow(/egress rule 0 \("mirror"\) is invalid: addresses: .*cannot be allowed/);
    expect(() => new EgressPolicy([{ name: 'mirror', host: 'mirror.example', port: 443, scheme: 'https', addresses: ['10.0.0.0/8; rm'] as never }])).toThrow(/must be an address range/);
  });
});
