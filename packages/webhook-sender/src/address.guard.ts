import ipaddr from 'ipaddr.js';

/**
 * The outbound address guard, applied at send time: a webhook URL is chosen by a customer,
 * so the sender must never become a way into the operator's own network. Every address the sender
 * is about to connect to passes through `guardedRange`; only ordinary public unicast gets through,
 * unless an operator exempts a range with DISPATCH_ALLOW_CIDRS (tests deliver to loopback that way).
 */

export type IpAddress = ipaddr.IPv4 | ipaddr.IPv6;
export type Cidr = readonly [IpAddress, number];
/** Parsed DISPATCH_ALLOW_CIDRS. */
export type AllowList = readonly Cidr[];

type RangeTable = ReadonlyArray<readonly [name: string, cidr: string]>;

// Written out rather than taken from ipaddr's own range names, so the refused set is reviewable in
// one place and does not change silently with a library upgrade.
const IPV4_GUARDED: RangeTable = [
  ['unspecified', '0.0.0.0/8'],
  ['private', '10.0.0.0/8'],
  ['carrier-grade NAT', '100.64.0.0/10'],
  ['loopback', '127.0.0.0/8'],
  ['link-local', '169.254.0.0/16'],
  ['private', '172.16.0.0/12'],
  ['reserved', '192.0.0.0/24'],
  ['documentation', '192.0.2.0/24'],
  ['reserved', '192.88.99.0/24'],
  ['private', '192.168.0.0/16'],
  ['benchmarking', '198.18.0.0/15'],
  ['documentation', '198.51.100.0/24'],
  ['documentation', '203.0.113.0/24'],
  ['multicast', '224.0.0.0/4'],
  ['broadcast', '255.255.255.255/32'],
  ['reserved', '240.0.0.0/4'],
];

const IPV6_GUARDED: RangeTable = [
  ['unspecified', '::/128'],
  ['loopback', '::1/128'],
  // Everything else in ::/96 is the deprecated IPv4-compatible form; ::ffff:0:0/96 (mapped) is
  // unwrapped before this table is consulted.
  ['IPv4-compatible', '::/96'],
  ['IPv4-translated', '::ffff:0:0:0/96'],
  ['NAT64', '64:ff9b::/96'],
  ['NAT64 local-use', '64:ff9b:1::/48'],
  ['discard', '100::/64'],
  ['reserved', '2001::/23'],
  ['documentation', '2001:db8::/32'],
  ['documentation', '3fff::/20'],
  ['unique-local', 'fc00::/7'],
  ['link-local', 'fe80::/10'],
  ['site-local', 'fec0::/10'],
  ['multicast', 'ff00::/8'],
];

const compile = (table: RangeTable): ReadonlyArray<readonly [string, IpAddress, number]> =>
  table.map(([name, cidr]) => {
    const [address, bits] = ipaddr.parseCIDR(cidr);
    return [name, address, bits] as const;
  });

const IPV4_RANGES = compile(IPV4_GUARDED);
const IPV6_RANGES = compile(IPV6_GUARDED);
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');

function inRange(address: IpAddress, base: IpAddress, bits: number): boolean {
  return address.kind() === base.kind() && address.match(base, bits);
}

/** Parses a plain IP address (IPv6 may carry brackets or a zone); undefined when it is none. */
export function parseIp(value: string): IpAddress | undefined {
  let text = value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
  const zone = text.indexOf('%');
  if (zone !== -1 && text.includes(':')) text = text.slice(0, zone);
  // Four-part decimal only: other IPv4 spellings are a URL parser's business, not an address's.
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text);
  if (!ipaddr.IPv6.isValid(text)) return undefined;
  if (text.includes('.')) {
    // ipaddr reads `::a.b.c.d` as the mapped ::ffff:a.b.c.d; the URL parser (like the socket layer)
    // reads it as the IPv4-compatible ::a.b.c.d, so let it write the address in plain hex first.
    try {
      text = new URL(`http://[${text}]/`).hostname.slice(1, -1);
    } catch {
      return undefined;
    }
  }
  return ipaddr.IPv6.parse(text);
}

/**
 * Why an address is refused (the range's name), or null for ordinary public unicast. The
 * IPv4-mapped form (::ffff:a.b.c.d) is judged as the IPv4 address it carries, and 6to4
 * (2002:aabb:ccdd::/48) by the IPv4 address embedded in it.
 */
export function guardedRange(address: IpAddress): string | null {
  if (address.kind() === 'ipv6') {
    const v6 = address as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) {
      const inner = guardedRange(v6.toIPv4Address());
      return inner === null ? null : `IPv4-mapped ${inner}`;
    }
    for (const [name, base, bits] of IPV6_RANGES) if (inRange(v6, base, bits)) return name;
    if (inRange(v6, SIX_TO_FOUR[0], SIX_TO_FOUR[1])) {
      const p = v6.parts;
      const embedded = new ipaddr.IPv4([(p[1]! >> 8) & 0xff, p[1]! & 0xff, (p[2]! >> 8) & 0xff, p[2]! & 0xff]);
      const inner = guardedRange(embedded);
      if (inner !== null) return `6to4 ${inner}`;
    }
    // Outside 2000::/3 nothing is allocated for ordinary hosts.
    return inRange(v6, GLOBAL_UNICAST[0], GLOBAL_UNICAST[1]) ? null : 'reserved';
  }
  for (const [name, base, bits] of IPV4_RANGES) if (inRange(address, base, bits)) return name;
  return null;
}

/** True when the operator's allow list exempts the address (an IPv4-mapped address also by its IPv4 form). */
export function isAllowed(address: IpAddress, allow: AllowList): boolean {
  const forms: IpAddress[] = [address];
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    forms.push((address as ipaddr.IPv6).toIPv4Address());
  }
  return allow.some(([base, bits]) => forms.some((form) => inRange(form, base, bits)));
}

/**
 * True when the sender must not connect to `ip`: it is in a guarded range and not exempted by
 * `allow`. Anything that is not a valid IP address is guarded too (fail closed).
 */
export function isGuardedAddress(ip: string, allow: AllowList): boolean {
  const address = parseIp(ip);
  if (address === undefined) return true;
  return guardedRange(address) !== null && !isAllowed(address, allow);
}

/**
 * Parses DISPATCH_ALLOW_CIDRS (`a.b.c.d/n,x::/n`, blanks ignored). A bare address counts as a single
 * host. Throws on anything malformed, so a misconfigured process fails at start, not at send time.
 */
export function parseCidrs(value: string): AllowList {
  const list: Cidr[] = [];
  for (const raw of value.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    const slash = item.indexOf('/');
    const addressText = slash === -1 ? item : item.slice(0, slash);
    const address = parseIp(addressText);
    if (address === undefined) throw new Error(`DISPATCH_ALLOW_CIDRS: "${item}" is not an IP address or CIDR`);
    const max = address.kind() === 'ipv4' ? 32 : 128;
    let bits = max;
    if (slash !== -1) {
      const bitsText = item.slice(slash + 1);
      if (!/^\d{1,3}$/.test(bitsText) || Number(bitsText) > max) {
        throw new Error(`DISPATCH_ALLOW_CIDRS: "${item}" has an invalid prefix length (0 to ${max})`);
      }
      bits = Number(bitsText);
    }
    list.push([address, bits]);
  }
  return list;
}
