import { parseIp } from './address.guard';

/** Host names compare case-insensitively and a trailing dot names the same host. */
export function normaliseHostName(name: string): string {
  return name.trim().toLowerCase().replace(/\.+$/, '');
}

/**
 * Parses DISPATCH_HOST_MAP (`name=address,name=address`): names the sender resolves without DNS.
 * Returns host name → IP address (normalised text). Throws on anything malformed (a missing `=`,
 * an empty or duplicated name, an address that is not an IP), so a bad setting stops the process at
 * start instead of turning every delivery into a network error.
 */
export function parseHostMap(value: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const raw of value.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq === -1) throw new Error(`DISPATCH_HOST_MAP: "${item}" is not of the form name=address`);
    const name = normaliseHostName(item.slice(0, eq));
    const addressText = item.slice(eq + 1).trim();
    if (name === '' || !/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(name)) {
      throw new Error(`DISPATCH_HOST_MAP: "${item}" does not start with a host name`);
    }
    if (parseIp(name) !== undefined) {
      // The socket layer never looks an IP literal up, so such an entry would silently do nothing.
      throw new Error(`DISPATCH_HOST_MAP: "${item}" maps an IP address; map host names only`);
    }
    const address = parseIp(addressText);
    if (address === undefined || addressText.startsWith('[')) {
      throw new Error(`DISPATCH_HOST_MAP: "${addressText}" (for ${name}) is not an IP address`);
    }
    if (map.has(name)) throw new Error(`DISPATCH_HOST_MAP: ${name} is mapped twice`);
    map.set(name, address.toString());
  }
  return map;
}
