import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { guardedRange, isAllowed, parseIp, type AllowList } from './address.guard';
import { normaliseHostName } from './host-map.parser';
import { NameResolutionError, type ResolvedAddress } from './dns.resolver';

/** The code of BlockedAddressError, by which the sender tells a refused address from other failures. */
export const BLOCKED_CODE = 'SVC_ADDRESS_BLOCKED';

/**
 * Raised inside the connector when the address guard refuses the resolved address. Its message is
 * what the delivery log (`mensaje`) and the PING's record show the tenant, so it is the same whatever
 * the range and names neither the address nor the range (docs/architecture.md, "Security on the
 * way"): a tenant must not map the operator's private network through PINGs. The address and range
 * stay on the error, unlogged.
 */
export class BlockedAddressError extends Error {
  readonly code = BLOCKED_CODE;
  constructor(
    host: string,
    readonly address: string,
    readonly range: string,
  ) {
    // Neither the address nor its range: a tenant must not map the private network through its PINGs.
    super(`${host} resolves to a non-public address`);
    this.name = 'BlockedAddressError';
  }
}

/** The address the guard refuses for this host, or null when every address is acceptable. */
export function refusal(host: string, addresses: readonly string[], allow: AllowList): BlockedAddressError | null {
  if (addresses.length === 0) return new BlockedAddressError(host, '(nothing)', 'missing');
  for (const text of addresses) {
    const address = parseIp(text);
    if (address === undefined) return new BlockedAddressError(host, text, 'unparseable');
    const range = guardedRange(address);
    if (range !== null && !isAllowed(address, allow)) return new BlockedAddressError(host, text, range);
  }
  return null;
}

/** Asks for a name's addresses; rejects when it cannot tell them. */
export type ResolveName = (hostname: string) => Promise<readonly ResolvedAddress[]>;

const wantedFamily = (family: LookupOptions['family']): 0 | 4 | 6 => {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
};

/**
 * The connector's `lookup`: DISPATCH_HOST_MAP first, then `resolve` with every address, each vetted.
 * Node connects to exactly what this returns, so the address checked is the address used (no second
 * lookup that a rebinding DNS server could answer differently). A name with any guarded address is
 * refused as a whole rather than filtered, since a mixed answer is itself suspicious.
 */
export function createGuardedLookup(hostMap: ReadonlyMap<string, string>, allow: AllowList, resolve: ResolveName): LookupFunction {
  return (hostname, options: LookupOptions, callback) => {
    const answer = (found: readonly ResolvedAddress[]): void => {
      const blocked = refusal(hostname, found.map((a) => a.address), allow);
      if (blocked !== null) {
        callback(blocked, '', 0);
        return;
      }
      const family = wantedFamily(options.family);
      // Vetted as a whole above; only then narrowed to the family the socket asked for.
      const addresses: LookupAddress[] = found.filter((a) => family === 0 || a.family === family).map((a) => ({ address: a.address, family: a.family }));
      const first = addresses[0];
      if (first === undefined) callback(new NameResolutionError(hostname, `no IPv${family} address (ENODATA)`, 'ENODATA'), '', 0);
      else if (options.all === true) callback(null, addresses);
      else callback(null, first.address, first.family);
    };
    const mapped = hostMap.get(normaliseHostName(hostname));
    if (mapped !== undefined) {
      // net expects the lookup to answer asynchronously, as DNS would.
      process.nextTick(answer, [{ address: mapped, family: isIP(mapped) === 6 ? 6 : 4 }]);
      return;
    }
    // The callbacks run on a tick of their own: what net does with the answer is not the promise's business.
    void resolve(hostname).then(
      (found) => process.nextTick(answer, found),
      (err: unknown) => process.nextTick(callback, err as NodeJS.ErrnoException, '', 0),
    );
  };
}
