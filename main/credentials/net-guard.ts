// Refuses destinations on the host's own networks. The check runs on the
// addresses a name RESOLVES to, and the connection is made to the checked
// address (the lookup hook below), so DNS rebinding cannot slip past it.
import dns from 'node:dns';
import net from 'node:net';
import { FactoryError } from '../../common/contract.js';

const blocked = new net.BlockList();
for (const [addr, bits] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(addr, bits, 'ipv4');
}
for (const [addr, bits] of [
  ['::', 128],
  ['::1', 128],
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local (incl. fd00:ec2::254 metadata)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  blocked.addSubnet(addr, bits, 'ipv6');
}

/** The IPv4 address embedded in an IPv4-mapped / NAT64 / IPv4-compatible IPv6 address, if any. */
function embeddedIpv4(ip: string): string | undefined {
  const lower = ip.toLowerCase();
  const m = /^(?:::ffff:|::ffff:0:|64:ff9b::|::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (m) return m[1];
  // Hex form of the same prefixes, e.g. ::ffff:7f00:1
  const h = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (h) {
    const hi = parseInt(h[1]!, 16);
    const lo = parseInt(h[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return undefined;
}

/** Why an address may not be a destination, or undefined when it may. */
export function forbiddenReason(ip: string): string | undefined {
  const family = net.isIP(ip);
  if (family === 0) return 'not an IP address';
  if (family === 6) {
    const v4 = embeddedIpv4(ip);
    if (v4) return forbiddenReason(v4);
    return blocked.check(ip, 'ipv6') ? `${ip} is a loopback, private, link-local or reserved address` : undefined;
  }
  return blocked.check(ip, 'ipv4') ? `${ip} is a loopback, private, link-local, metadata or reserved address` : undefined;
}

export class DestinationRefused extends FactoryError {
  constructor(host: string, reason: string) {
    super('DestinationRefused', `destination ${host} refused: ${reason}`);
  }
}

/** Test-only escape hatch: lets a test reach its own loopback upstreams. Never built from config. */
export type AddressAllowance = (ip: string, host: string) => boolean;

export interface NetGuard {
  /** Throws DestinationRefused unless every address the host resolves to is allowed. */
  resolve(host: string): Promise<{ address: string; family: 4 | 6 }[]>;
  /** A `lookup` for net/tls/https options that only ever yields checked addresses. */
  lookup: net.LookupFunction;
}

export function createNetGuard(opts: { allowAddress?: AddressAllowance; resolver?: typeof dns.promises.lookup } = {}): NetGuard {
  const resolver = opts.resolver ?? dns.promises.lookup;
  const check = (ip: string, host: string): void => {
    const why = forbiddenReason(ip);
    if (why && !opts.allowAddress?.(ip, host)) throw new DestinationRefused(host, why);
  };
  const resolve = async (host: string) => {
    const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    if (net.isIP(bare)) {
      check(bare, host);
      return [{ address: bare, family: net.isIP(bare) as 4 | 6 }];
    }
    let answers: dns.LookupAddress[];
    try {
      answers = await resolver(bare, { all: true, verbatim: true });
    } catch (err) {
      throw new DestinationRefused(host, `it does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    if (answers.length === 0) throw new DestinationRefused(host, 'it does not resolve');
    // Every answer must pass: a mixed public/private answer is a rebinding trick.
    for (const a of answers) check(a.address, host);
    return answers.map((a) => ({ address: a.address, family: a.family as 4 | 6 }));
  };
  const lookup: net.LookupFunction = (hostname, options, callback) => {
    resolve(hostname).then(
      (addrs) => {
        if ((options as dns.LookupAllOptions).all) {
          (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, addrs);
        } else {
          callback(null, addrs[0]!.address, addrs[0]!.family);
        }
      },
      (err: Error) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };
  return { resolve, lookup };
}
