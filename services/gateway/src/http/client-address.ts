import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';

/** The address a request comes from, as every per-address limit keys it. */
export type ClientAddress = (req: IncomingMessage) => string;

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) is 10.0.0.1. */
function plain(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/** A CIDR or a lone address as TRUSTED_PROXIES lists it; undefined when it is neither. */
export function parseCidr(item: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address = '', bits, ...rest] = item.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return undefined;
  const max = family === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return undefined;
  return { address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * The client's address: the TCP peer's, unless the peer is one of the trusted proxies
 * (TRUSTED_PROXIES); then `X-Forwarded-For` is read from its right end, each entry believed only
 * because the hop that wrote it is trusted, and the first address that is no trusted proxy is the
 * client. A caller can write what it likes at the left end of the header, so nothing left of the
 * first untrusted hop is ever read, and an entry that is no address ends the walk at the hop before.
 */
export function clientAddressResolver(trustedProxies: readonly string[]): ClientAddress {
  const trusted = new BlockList();
  for (const item of trustedProxies) {
    const cidr = parseCidr(item);
    if (cidr) trusted.addSubnet(cidr.address, cidr.prefix, cidr.family);
  }
  const isTrusted = (address: string): boolean => {
    const family = isIP(address);
    return family !== 0 && trusted.check(address, family === 4 ? 'ipv4' : 'ipv6');
  };
  const none = trustedProxies.length === 0;
  return (req) => {
    const peer = plain(req.socket.remoteAddress ?? 'unknown');
    if (none || !isTrusted(peer)) return peer;
    const header = req.headers['x-forwarded-for'];
    if (header === undefined) return peer;
    const hops = (Array.isArray(header) ? header.join(',') : header).split(',');
    let client = peer;
    for (let i = hops.length - 1; i >= 0 && isTrusted(client); i--) {
      const hop = plain(hops[i]!.trim());
      if (isIP(hop) === 0) break;
      client = hop;
    }
    return client;
  };
}
