import { randomBytes } from 'node:crypto';
import { DEVELOPMENT_SECRETS_KEY, loadSettings, WIDEST_ALLOWED_PREFIX } from '@svc/platform';

const load = (env: Record<string, string>) => loadSettings('svc', env, () => ({}));
const problems = (env: Record<string, string>): string => {
  try {
    load(env);
    return '';
  } catch (err) {
    return (err as Error).message;
  }
};
const KEY = randomBytes(32);
const PROD = { NODE_ENV: 'production', SECRETS_KEY: KEY.toString('base64') };

describe('SECRETS_KEY', () => {
  it('reads a comma-separated list of base64 keys of 32 bytes (standard or URL-safe), first first, each with its id', () => {
    const second = randomBytes(32);
    const s = load({ SECRETS_KEY: ` ${KEY.toString('base64')} ,${second.toString('base64url')}` });
    expect(s.secretsKeys.map((k) => k.key)).toEqual([KEY, second]);
    expect(s.secretsKeys.map((k) => k.id)).toEqual([expect.stringMatching(/^[0-9a-f]{8}$/), expect.stringMatching(/^[0-9a-f]{8}$/)]);
    expect(s.secretsKeys[0]!.id).not.toBe(s.secretsKeys[1]!.id);
    // The same key has the same id in every process: a sealed value can name it.
    expect(load({ SECRETS_KEY: KEY.toString('base64') }).secretsKeys[0]!.id).toBe(s.secretsKeys[0]!.id);
    expect(s.startWarnings.filter((w) => w.setting === 'SECRETS_KEY')).toEqual([]);
  });

  it.each([
    ['not base64', 'not a key'],
    ['16 bytes', randomBytes(16).toString('base64')],
    ['33 bytes', randomBytes(33).toString('base64')],
    ['an empty item', `${KEY.toString('base64')},,`],
    ['hex', randomBytes(32).toString('hex')],
  ])('refuses %s, without repeating the value', (_name, value) => {
    const message = problems({ SECRETS_KEY: value });
    expect(message).toMatch(/SECRETS_KEY: key \d of the list is not the base64 of 32 bytes/);
    expect(message).not.toContain(value.split(',')[0]!.slice(0, 12));
  });

  it('outside production, unset: the fixed development key, and a warning', () => {
    const s = load({});
    expect(s.production).toBe(false);
    expect(s.secretsKeys).toEqual([DEVELOPMENT_SECRETS_KEY]);
    expect(DEVELOPMENT_SECRETS_KEY.key).toHaveLength(32);
    expect(s.startWarnings).toEqual([{ setting: 'SECRETS_KEY', message: expect.stringContaining('development key') }]);
  });

  it('with NODE_ENV=production, unset is refused', () => {
    expect(problems({ NODE_ENV: 'production' })).toMatch(/SECRETS_KEY: required with NODE_ENV=production/);
    expect(load(PROD).production).toBe(true);
  });
});

describe('DISPATCH_ALLOW_CIDRS', () => {
  it.each(['127.0.0.0/8', '10.1.0.0/16', '127.0.0.1', '::1', 'fd00::/32', '::1/128', '::ffff:127.0.0.0/104', '127.0.0.0/8, ::1/128'])('accepts %s, with a warning at every start', (value) => {
    const s = load({ DISPATCH_ALLOW_CIDRS: value });
    expect(s.dispatchAllowCidrs).toBe(value);
    expect(s.startWarnings).toContainEqual({ setting: 'DISPATCH_ALLOW_CIDRS', message: expect.stringContaining('for tests only') });
  });

  it.each([
    ['0.0.0.0/0', 8],
    ['10.0.0.0/7', 8],
    ['127.0.0.0/8,0.0.0.0/1', 8],
    ['::/0', 32],
    ['fc00::/7', 32],
    ['2000::/31', 32],
    ['::ffff:0:0/96', 104],
    ['::ffff:127.0.0.0/103', 104],
  ])('refuses %s: wider than a /%d', (value, widest) => {
    expect(problems({ DISPATCH_ALLOW_CIDRS: value })).toMatch(new RegExp(`DISPATCH_ALLOW_CIDRS: "[^"]+" is wider than a /${widest}`));
  });

  it.each(['localhost', '127.0.0.1/33', '::1/129', '10.0.0.0/8/8', '10.0.0.0/x', '300.0.0.1'])('refuses %s: not an address or CIDR', (value) => {
    expect(problems({ DISPATCH_ALLOW_CIDRS: value })).toMatch(/DISPATCH_ALLOW_CIDRS: "[^"]+" is not an IP address or CIDR/);
  });

  it('is refused outright with NODE_ENV=production, however narrow', () => {
    expect(problems({ ...PROD, DISPATCH_ALLOW_CIDRS: '127.0.0.1/32' })).toMatch(/DISPATCH_ALLOW_CIDRS: is for tests only and refused with NODE_ENV=production/);
    expect(load({ ...PROD, DISPATCH_ALLOW_CIDRS: '', DISPATCH_DNS_SERVERS: '192.0.2.53' }).startWarnings).toEqual([]);
  });

  it('names its limits once', () => {
    expect(WIDEST_ALLOWED_PREFIX).toEqual({ ipv4: 8, ipv6: 32, ipv4Mapped: 104 });
  });
});

describe('DISPATCH_DNS_SERVERS', () => {
  it('reads a comma list of ip, ip:port and [ipv6]:port; unset, the system resolvers', () => {
    expect(load({ DISPATCH_DNS_SERVERS: ' 192.0.2.53 ,127.0.0.1:5353,[2001:db8::53]:53,2001:db8::1' }).dispatchDnsServers).toEqual([
      '192.0.2.53',
      '127.0.0.1:5353',
      '[2001:db8::53]:53',
      '2001:db8::1',
    ]);
    expect(load({}).dispatchDnsServers).toEqual([]);
  });

  it.each(['dns.example', '127.0.0.1:0', '127.0.0.1:65536', '127.0.0.1:x', '2001:db8::53:53x', '[127.0.0.1]:53', '[2001:db8::53]', '300.0.0.1'])(
    'refuses %s at start, naming the setting and the entry',
    (entry) => {
      expect(problems({ DISPATCH_DNS_SERVERS: `192.0.2.53,${entry}` })).toContain(`DISPATCH_DNS_SERVERS: "${entry}" is not an ip, ip:port or [ipv6]:port`);
    },
  );

  it('with NODE_ENV=production, unset warns at every start that PINGs can map internal names; set, it does not', () => {
    const warning = {
      setting: 'DISPATCH_DNS_SERVERS',
      message:
        "webhook hosts resolve through the system's resolvers: a tenant's PINGs can tell which internal names exist; set DISPATCH_DNS_SERVERS to resolvers that see only public names",
    };
    expect(load({ ...PROD, NODE_ENV: 'Production' }).startWarnings).toContainEqual(warning);
    expect(load({ ...PROD, DISPATCH_DNS_SERVERS: '192.0.2.53:53' }).startWarnings).not.toContainEqual(warning);
    expect(load({}).startWarnings.map((w) => w.setting)).not.toContain('DISPATCH_DNS_SERVERS');
  });
});

describe('every problem at once', () => {
  it('lists each bad setting of one start in one error', () => {
    const message = problems({ NODE_ENV: 'production', DISPATCH_ALLOW_CIDRS: '0.0.0.0/0', DB_POOL_SIZE: 'x' });
    expect(message.split('\n').filter((l) => l.startsWith('  - '))).toEqual([
      expect.stringContaining('DB_POOL_SIZE'),
      expect.stringContaining('SECRETS_KEY'),
      expect.stringContaining('DISPATCH_ALLOW_CIDRS: is for tests only'),
      expect.stringContaining('DISPATCH_ALLOW_CIDRS: "0.0.0.0/0" is wider than a /8'),
    ]);
  });
});
