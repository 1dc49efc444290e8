import { isGuardedAddress, parseCidrs, parseHostMap } from '@svc/webhook-sender';

/** The outbound address guard's ranges, its allow-list exemption, and the settings' parsing. */

describe('isGuardedAddress (no allow list)', () => {
  const blocked: Array<[range: string, ip: string]> = [
    ['loopback', '127.0.0.1'],
    ['loopback top', '127.255.255.254'],
    ['private 10/8', '10.0.0.1'],
    ['private 10/8 top', '10.255.255.255'],
    ['private 172.16/12 bottom', '172.16.0.0'],
    ['private 172.16/12 top', '172.31.255.255'],
    ['private 192.168/16', '192.168.0.1'],
    ['link-local', '169.254.169.254'],
    ['carrier-grade NAT bottom', '100.64.0.0'],
    ['carrier-grade NAT top', '100.127.255.255'],
    ['unspecified', '0.0.0.0'],
    ['this network', '0.1.2.3'],
    ['multicast', '224.0.0.251'],
    ['multicast top', '239.255.255.255'],
    ['broadcast', '255.255.255.255'],
    ['reserved class E', '240.0.0.1'],
    ['IETF protocol assignments', '192.0.0.8'],
    ['documentation 192.0.2/24', '192.0.2.1'],
    ['documentation 198.51.100/24', '198.51.100.7'],
    ['documentation 203.0.113/24', '203.0.113.255'],
    ['benchmarking', '198.19.255.255'],
    ['6to4 relay anycast', '192.88.99.1'],
    ['IPv6 loopback', '::1'],
    ['IPv6 unspecified', '::'],
    ['IPv6 link-local', 'fe80::1'],
    ['IPv6 link-local with zone', 'fe80::1%eth0'],
    ['IPv6 unique-local fc', 'fc00::1'],
    ['IPv6 unique-local fd', 'fdff:ffff::1'],
    ['IPv6 site-local', 'fec0::1'],
    ['IPv6 multicast', 'ff02::1'],
    ['IPv6 documentation', '2001:db8::1'],
    ['IPv6 documentation 3fff::/20', '3fff:0fff::1'],
    ['IPv6 discard', '100::1'],
    ['IPv6 Teredo', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
    ['IPv6 unallocated (outside 2000::/3)', '4000::1'],
    ['IPv4-mapped loopback', '::ffff:127.0.0.1'],
    ['IPv4-mapped loopback (hex)', '::ffff:7f00:1'],
    ['IPv4-mapped private', '::ffff:192.168.1.1'],
    ['IPv4-mapped link-local', '::ffff:169.254.169.254'],
    ['IPv4-mapped CGNAT', '::ffff:100.64.0.1'],
    ['IPv4-compatible loopback', '::127.0.0.1'],
    ['IPv4-compatible public', '::8.8.8.8'],
    ['IPv4-translated', '::ffff:0:7f00:1'],
    ['NAT64 of loopback', '64:ff9b::127.0.0.1'],
    ['6to4 of loopback', '2002:7f00:1::1'],
    ['6to4 of private', '2002:0a00:0001::1'],
    ['not an address', 'example.com'],
    ['odd IPv4 spelling (fails closed)', '0x7f.1'],
    ['empty', ''],
  ];
  it.each(blocked)('%s %s is guarded', (_range, ip) => {
    expect(isGuardedAddress(ip, [])).toBe(true);
  });

  const allowed: Array<[what: string, ip: string]> = [
    ['public IPv4', '8.8.8.8'],
    ['public IPv4 next to 10/8', '11.0.0.1'],
    ['public IPv4 next to 172.16/12', '172.32.0.1'],
    ['public IPv4 below 172.16/12', '172.15.255.255'],
    ['public IPv4 next to CGNAT', '100.128.0.1'],
    ['public IPv4 next to 192.168/16', '192.169.0.1'],
    ['public IPv4 next to link-local', '169.255.0.1'],
    ['public IPv4 below multicast', '223.255.255.255'],
    ['public IPv6', '2606:4700:4700::1111'],
    ['public IPv6 (Google DNS)', '2001:4860:4860::8888'],
    ['IPv4-mapped public', '::ffff:8.8.8.8'],
    ['6to4 of public', '2002:0808:0808::1'],
  ];
  it.each(allowed)('%s %s is not guarded', (_what, ip) => {
    expect(isGuardedAddress(ip, [])).toBe(false);
  });
});

describe('DISPATCH_ALLOW_CIDRS exemption', () => {
  it('exempts addresses inside the allowed ranges only', () => {
    const allow = parseCidrs('127.0.0.0/8, 10.1.0.0/16');
    expect(isGuardedAddress('127.0.0.1', allow)).toBe(false);
    expect(isGuardedAddress('127.200.0.9', allow)).toBe(false);
    expect(isGuardedAddress('10.1.2.3', allow)).toBe(false);
    expect(isGuardedAddress('10.2.0.1', allow)).toBe(true);
    expect(isGuardedAddress('192.168.0.1', allow)).toBe(true);
    expect(isGuardedAddress('::1', allow)).toBe(true);
  });

  it('exempts the IPv4-mapped form of an allowed IPv4 address', () => {
    const allow = parseCidrs('127.0.0.0/8');
    expect(isGuardedAddress('::ffff:127.0.0.1', allow)).toBe(false);
    expect(isGuardedAddress('::ffff:10.0.0.1', allow)).toBe(true);
  });

  it('takes IPv6 ranges and bare addresses', () => {
    const allow = parseCidrs('::1,fd00::/8');
    expect(isGuardedAddress('::1', allow)).toBe(false);
    expect(isGuardedAddress('fd12::5', allow)).toBe(false);
    expect(isGuardedAddress('fc00::5', allow)).toBe(true);
    expect(isGuardedAddress('127.0.0.1', allow)).toBe(true);
  });

  it('an empty setting exempts nothing', () => {
    expect(parseCidrs('')).toEqual([]);
    expect(parseCidrs(' , ')).toEqual([]);
  });

  it.each([
    ['not an address', 'loopback'],
    ['prefix too long for IPv4', '127.0.0.0/33'],
    ['prefix too long for IPv6', '::1/129'],
    ['prefix not a number', '10.0.0.0/x'],
    ['empty prefix', '10.0.0.0/'],
    ['odd IPv4 spelling', '0x7f.1/8'],
    ['one bad item among good ones', '127.0.0.0/8,300.0.0.0/8'],
  ])('rejects a malformed list: %s (%s)', (_what, value) => {
    expect(() => parseCidrs(value)).toThrow(/DISPATCH_ALLOW_CIDRS/);
  });
});

describe('parseHostMap', () => {
  it('maps names case-insensitively, without the trailing dot', () => {
    const map = parseHostMap(' receiver.test=127.0.0.1 , Other.Test.=10.0.0.1,v6.test=::1');
    expect([...map]).toEqual([
      ['receiver.test', '127.0.0.1'],
      ['other.test', '10.0.0.1'],
      ['v6.test', '::1'],
    ]);
  });

  it('an empty setting maps nothing', () => {
    expect(parseHostMap('').size).toBe(0);
  });

  it.each([
    ['no equals sign', 'receiver.test'],
    ['empty name', '=127.0.0.1'],
    ['empty address', 'receiver.test='],
    ['address is a name', 'receiver.test=example.com'],
    ['odd IPv4 spelling', 'receiver.test=2130706433'],
    ['bracketed IPv6', 'receiver.test=[::1]'],
    ['name with a space', 'rec eiver.test=127.0.0.1'],
    ['name with a port', 'receiver.test:8443=127.0.0.1'],
    ['duplicate name', 'a.test=127.0.0.1,A.test=127.0.0.2'],
    ['an IP address as the name', '8.8.8.8=127.0.0.1'],
  ])('rejects %s (%s)', (_what, value) => {
    expect(() => parseHostMap(value)).toThrow(/DISPATCH_HOST_MAP/);
  });
});
