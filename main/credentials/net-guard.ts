// Refuses destinations on the host's own networks. The check runs on the
// addresses a name RESOLVES to, and the connection is made to the checked
// address (the lookup hook below), so DNS rebinding cannot slip past it.
import dns from 'node:dns';
import net from 'node:net';
import { FactoryError } from '../../common/errors.js';

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
  ['2001:2::', 48], // benchmarking
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
  ['fc00::', 7], // unique local (incl. fd00:ec2::254 metadata)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  blocked.addSubnet(addr, bits, 'ipv6');
}

/** The eight 16-bit words of a valid IPv6 address (zone id dropped), e.g. for ::ffff:1.2.3.4. */
export function ipv6Words(ip: string): number[] {
  let s = ip.toLowerCase().replace(/%.*$/, '');
  // A trailing dotted quad is the last two words.
  const quad = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(s);
  if (quad) {
    const [a, b, c, d] = quad.slice(2).map(Number) as [number, number, number, number];
    s = `${quad[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const words = (part: string | undefined) => (part ? part.split(':').map((w) => parseInt(w, 16)) : []);
  const h = words(head);
  const t = words(tail);
  return tail === undefined ? h : [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t];
}

const dotted = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * Every IPv4 address an IPv6 address carries by a standard embedding, with the
 * embedding's name. A refused IPv4 address is refused in any of these forms.
 */
export function embeddedIpv4(ip: string): Array<{ form: string; ipv4: string }> {
  const w = ipv6Words(ip);
  const zero = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  const found: Array<{ form: string; ipv4: string }> = [];
  if (zero(0, 5) && w[5] === 0xffff) found.push({ form: 'IPv4-mapped ::ffff:0:0/96', ipv4: dotted(w[6]!, w[7]!) });
  if (zero(0, 6)) found.push({ form: 'IPv4-compatible ::/96', ipv4: dotted(w[6]!, w[7]!) });
  if (zero(0, 4) && w[4] === 0xffff && w[5] === 0) found.push({ form: 'IPv4-translated ::ffff:0:0:0/96', ipv4: dotted(w[6]!, w[7]!) });
  if (w[0] === 0x64 && w[1] === 0xff9b && zero(2, 6)) found.push({ form: 'NAT64 64:ff9b::/96', ipv4: dotted(w[6]!, w[7]!) });
  if (w[0] === 0x2002) found.push({ form: '6to4 2002::/16', ipv4: dotted(w[1]!, w[2]!) });
  if (w[0] === 0x2001 && w[1] === 0) {
    // Teredo: the server's address as is, the client's with every bit inverted.
    found.push({ form: 'Teredo 2001::/32 (server)', ipv4: dotted(w[2]!, w[3]!) });
    found.push({ form: 'Teredo 2001::/32 (client)', ipv4: dotted(w[6]! ^ 0xffff, w[7]! ^ 0xffff) });
  }
  return found;
}

/** Why an address may not be a destination, or undefined when it may. */
export function forbiddenReason(ip: string): string | undefined {
  const family = net.isIP(ip);
  if (family === 0) return 'not an IP address';
  if (family === 6) {
    const w = ipv6Words(ip);
    const reserved = `${ip} is a loopback, private, link-local or reserved address`;
    // :: and ::1 are themselves, not IPv4-compatible forms of 0.0.0.0 and 0.0.0.1.
    if (w.slice(0, 7).every((x) => x === 0) && w[7]! <= 1) return reserved;
    // The rest of 64:ff9b::/32, local-use NAT64 64:ff9b:1::/48 included, places the
    // IPv4 address where the local translator's prefix length says: refused whole.
    if (w[0] === 0x64 && w[1] === 0xff9b && !w.slice(2, 6).every((x) => x === 0)) {
      return `${ip} is in a local-use NAT64 prefix (64:ff9b::/32 outside 64:ff9b::/96), which may embed any IPv4 address`;
    }
    for (const { form, ipv4 } of embeddedIpv4(ip)) {
      const why = forbiddenReason(ipv4);
      if (why) return `${ip} embeds ${ipv4} (${form}): ${why}`;
    }
    return blocked.check(ip.replace(/%.*$/, ''), 'ipv6') ? reserved : undefined;
  }
  return blocked.check(ip, 'ipv4') ? `${ip} is a loopback, private, link-local, metadata or reserved address` : undefined;
}

export class DestinationRefused extends FactoryError {
  constructor(host: string, reason: string) {
    super('DestinationRefused', `destination ${host} refused: ${reason}`);
  }
}

// Never a destination, whatever a rule's address ranges say: this host, its
// link-local neighbours and cloud metadata, "this network", multicast.
const never = new net.BlockList();
for (const [addr, bits] of [['0.0.0.0', 8], ['127.0.0.0', 8], ['169.254.0.0', 16], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const) never.addSubnet(addr, bits, 'ipv4');
for (const [addr, bits] of [['::', 127], ['fe80::', 10], ['ff00::', 8], ['fd00:ec2::', 64]] as const) never.addSubnet(addr, bits, 'ipv6');

/**
 * The address ranges a rule lets its host resolve to (e.g. a LAN mirror), as a
 * test on one address; throws naming a range that is malformed or that reaches
 * loopback, link-local or metadata addresses.
 */
export function rangeAllowance(ranges: readonly string[] | undefined): ((ip: string) => boolean) | undefined {
  if (!ranges?.length) return undefined;
  const list = new net.BlockList();
  for (const range of ranges) {
    const [addr = '', bitsText = ''] = range.split('/');
    const family = net.isIP(addr);
    const bits = Number(bitsText);
    if (!family || !/^\d+$/.test(bitsText) || bits > (family === 4 ? 32 : 128)) throw new FactoryError('InvalidInput', `address range ${JSON.stringify(range)} is not an IPv4 or IPv6 range`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (never.check(addr, type) || (bits < (family === 4 ? 8 : 16))) {
      throw new FactoryError('InvalidInput', `address range ${range} reaches loopback, link-local or metadata addresses (or is too wide): it cannot be allowed`);
    }
    list.addSubnet(addr, bits, type);
  }
  return (ip: string) => {
    const family = net.isIP(ip);
    if (!family) return false;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    return list.check(ip, type) && !never.check(ip, type);
  };
}

/** Test-only escape hatch: lets a test reach its own loopback upstreams. Never built from config. */
export type AddressAllowance = (ip: string, host: string) => boolean;

export interface NetGuard {
  /** Throws DestinationRefused unless every address the host resolves to is allowed (`alsoAllow`: a rule's ranges). */
  resolve(host: string, alsoAllow?: (ip: string) => boolean): Promise<{ address: string; family: 4 | 6 }[]>;
  /** A `lookup` for net/tls/https options that only ever yields checked addresses. */
  lookup: net.LookupFunction;
  /** The same, also allowing a rule's address ranges. */
  lookupAllowing(alsoAllow?: (ip: string) => boolean): net.LookupFunction;
}

export function createNetGuard(opts: { allowAddress?: AddressAllowance; resolver?: typeof dns.promises.lookup } = {}): NetGuard {
  const resolver = opts.resolver ?? dns.promises.lookup;
  const check = (ip: string, host: string, alsoAllow?: (ip: string) => boolean): void => {
    const why = forbiddenReason(ip);
    if (why && !opts.allowAddress?.(ip, host) && !alsoAllow?.(ip)) throw new DestinationRefused(host, why);
  };
  const resolve = async (host: string, alsoAllow?: (ip: string) => boolean) => {
    const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    if (net.isIP(bare)) {
      check(bare, host, alsoAllow);
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
    for (const a of answers) check(a.address, host, alsoAllow);
    return answers.map((a) => ({ address: a.address, family: a.family as 4 | 6 }));
  };
  const lookupAllowing = (alsoAllow?: (ip: string) => boolean): net.LookupFunction => (hostname, options, callback) => {
    resolve(hostname, alsoAllow).then(
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
  return { resolve, lookup: lookupAllowing(), lookupAllowing };
}
