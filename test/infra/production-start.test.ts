import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { serviceStartEnv } from '../support/service-start-env';
import { estimatedEntropyBits, loadGatewayConfig } from '../../services/gateway/src/config';
import { loadDispatcherConfig } from '../../services/dispatcher/src/config';

/**
 * `NODE_ENV=production` refuses what is only safe on a developer's machine, at start, before
 * anything is built: each service's real entry (`node --import tsx services/<name>/src/main.ts`, as
 * `pnpm --filter <name> start` runs it) exits 2 with every problem listed, and never repeats a
 * token or a key. Outside production the same settings start, saying at warn level what is unsafe.
 */

const ROOT = join(__dirname, '../..');
const ENTRY = { gateway: 'services/gateway/src/main.ts', dispatcher: 'services/dispatcher/src/main.ts' } as const;
type Service = keyof typeof ENTRY;

interface Outcome {
  code: number | null;
  output: string;
}

/** Runs the entry until it exits, or until `readyLine` appears (then SIGTERM, and waits for the exit). */
function run(service: Service, env: Record<string, string>, readyLine?: string): Promise<Outcome> {
  // Nothing of this process's own settings leaks in (a developer's shell, or jest's NODE_ENV=test).
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(NODE_ENV|ADMIN_|SECRETS_KEY|DISPATCH_|PORT$|DATABASE_URL|REDIS_)/.test(k)));
  const child = spawn(process.execPath, ['--import', 'tsx', ENTRY[service]], { cwd: ROOT, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const hear = (b: Buffer): void => {
    output += b.toString('utf8');
    if (readyLine && output.includes(readyLine)) child.kill('SIGTERM');
  };
  child.stdout!.on('data', hear);
  child.stderr!.on('data', hear);
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

const logLines = (output: string): Array<Record<string, unknown>> =>
  output.split('\n').flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });

describe('production refuses unsafe settings at start; development says so', () => {
  const started = serviceStartEnv('prodstart');
  const key = randomBytes(32).toString('base64');
  const strongAdmin = randomBytes(32).toString('base64url'); // 43 characters
  /** What else production requires of the gateway: the operator's own port and an https portal. */
  const door = { ADMIN_PORT: '0', PORTAL_BASE_URL: 'https://portal.courier.example' };
  /** Resolvers that see only public names (never asked here: nothing is delivered). */
  const publicDns = { DISPATCH_DNS_SERVERS: '192.0.2.53,[2001:db8::53]:53' };

  it('the gateway refuses an ADMIN_TOKEN under 32 characters, a missing SECRETS_KEY and DISPATCH_ALLOW_CIDRS, all in one start (exit 2)', async () => {
    const weak = 'change-me-please-0123456789abcd'; // 31 characters
    const { code, output } = await run('gateway', { ...started.env(), NODE_ENV: 'production', ADMIN_TOKEN: weak, DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' });
    expect({ code, output }).toEqual({ code: 2, output: expect.stringContaining('gateway: invalid settings') });
    expect(output).toMatch(/ADMIN_TOKEN: must be at least 32 characters with NODE_ENV=production/);
    expect(output).toMatch(/SECRETS_KEY: required with NODE_ENV=production/);
    expect(output).toMatch(/DISPATCH_ALLOW_CIDRS: is for tests only and refused with NODE_ENV=production/);
    expect(output).not.toContain(weak);
    expect(output).not.toContain('gateway listening');
  }, 30_000);

  it.each([
    ['a weak ADMIN_TOKEN alone', { ADMIN_TOKEN: 'short-admin-token', SECRETS_KEY: key }, /ADMIN_TOKEN: must be at least 32/],
    ['a missing SECRETS_KEY alone', { ADMIN_TOKEN: strongAdmin }, /SECRETS_KEY: required with NODE_ENV=production/],
    ['DISPATCH_ALLOW_CIDRS alone', { ADMIN_TOKEN: strongAdmin, SECRETS_KEY: key, DISPATCH_ALLOW_CIDRS: '127.0.0.1/32' }, /DISPATCH_ALLOW_CIDRS: is for tests only/],
    ['a SECRETS_KEY that is not 32 bytes', { ADMIN_TOKEN: strongAdmin, SECRETS_KEY: `${key},${randomBytes(16).toString('base64')}` }, /SECRETS_KEY: key 2 of the list is not the base64 of 32 bytes/],
    ['no ADMIN_PORT (the operator\'s routes on the public port)', { ADMIN_TOKEN: strongAdmin, SECRETS_KEY: key, ADMIN_PORT: '' }, /ADMIN_PORT: required with NODE_ENV=production/],
    ['an ADMIN_TOKEN of one repeated character', { ADMIN_TOKEN: 'a'.repeat(40), SECRETS_KEY: key }, /ADMIN_TOKEN: is one character repeated/],
    ['a low-entropy ADMIN_TOKEN', { ADMIN_TOKEN: 'change-me-please-change-me-please', SECRETS_KEY: key }, /ADMIN_TOKEN: has about \d+ bits of entropy, under 128/],
    ['a plain-HTTP PORTAL_BASE_URL', { ADMIN_TOKEN: strongAdmin, SECRETS_KEY: key, PORTAL_BASE_URL: 'http://portal.courier.example' }, /PORTAL_BASE_URL: must be an https:\/\/ URL/],
    ['DB_STATEMENT_TIMEOUT_MS=0', { ADMIN_TOKEN: strongAdmin, SECRETS_KEY: key, DB_STATEMENT_TIMEOUT_MS: '0' }, /DB_STATEMENT_TIMEOUT_MS: must not be 0/],
    ['a weak ADMIN_TOKEN with NODE_ENV=Production (any case)', { NODE_ENV: 'Production', ADMIN_TOKEN: 'short-admin-token', SECRETS_KEY: key }, /ADMIN_TOKEN: must be at least 32/],
  ])('the gateway refuses %s', async (_name, env, expected) => {
    const { code, output } = await run('gateway', { ...started.env(), NODE_ENV: 'production', ...door, ...env });
    expect(code).toBe(2);
    expect(output).toMatch(expected);
    expect(output.split('\n').filter((l) => l.startsWith('  - '))).toHaveLength(1);
    expect(output).not.toContain(key);
  }, 30_000);

  it('the dispatcher refuses a missing SECRETS_KEY and DISPATCH_ALLOW_CIDRS (exit 2)', async () => {
    const { code, output } = await run('dispatcher', { ...started.env(), NODE_ENV: 'production', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' });
    expect(code).toBe(2);
    expect(output).toContain('dispatcher: invalid settings');
    expect(output).toMatch(/SECRETS_KEY: required with NODE_ENV=production/);
    expect(output).toMatch(/DISPATCH_ALLOW_CIDRS: is for tests only/);
    expect(output).not.toContain('dispatcher started');
  }, 30_000);

  it('outside production, a range wider than a /8 is refused too', async () => {
    const { code, output } = await run('dispatcher', { ...started.env(), DISPATCH_ALLOW_CIDRS: '0.0.0.0/0' });
    expect(code).toBe(2);
    expect(output).toMatch(/DISPATCH_ALLOW_CIDRS: "0.0.0.0\/0" is wider than a \/8/);
  }, 30_000);

  it('production with safe settings starts (and stops on SIGTERM), warning of nothing', async () => {
    const { code, output } = await run('gateway', { ...started.env(), NODE_ENV: 'production', ...door, ADMIN_TOKEN: strongAdmin, SECRETS_KEY: key, ...publicDns }, 'gateway listening');
    expect({ code, tail: output.slice(-300) }).toEqual({ code: 0, tail: expect.any(String) });
    const lines = logLines(output);
    expect(lines.some((l) => l.msg === 'gateway listening')).toBe(true);
    expect(lines.filter((l) => l.level === 40)).toEqual([]);
    expect(output).not.toContain(strongAdmin);
    expect(output).not.toContain(key);
  }, 30_000);

  it('production serves the operator\'s routes on the public port only when told by name, and warns at every start of that and the rest', async () => {
    const env = { ...started.env(), NODE_ENV: 'production', ADMIN_TOKEN: strongAdmin, SECRETS_KEY: key, ADMIN_ON_PUBLIC_PORT: '1', DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1' };
    for (let start = 0; start < 2; start++) {
      const { code, output } = await run('gateway', env, 'gateway listening');
      expect(code).toBe(0);
      expect(logLines(output).filter((l) => l.level === 40)).toEqual([
        expect.objectContaining({ setting: 'DISPATCH_HOST_MAP', msg: expect.stringContaining('receiver.test=127.0.0.1') }),
        expect.objectContaining({ setting: 'DISPATCH_DNS_SERVERS', msg: expect.stringContaining("a tenant's PINGs can tell which internal names exist") }),
        expect.objectContaining({ setting: 'ADMIN_ON_PUBLIC_PORT', msg: expect.stringContaining('public PORT') }),
        expect.objectContaining({ setting: 'PORTAL_BASE_URL', msg: expect.stringContaining('unset') }),
      ]);
    }
    const { code, output } = await run('gateway', { ...started.env(), NODE_ENV: 'production', ...door, ADMIN_TOKEN: strongAdmin, SECRETS_KEY: key, ADMIN_HOST: '0.0.0.0', ...publicDns }, 'gateway listening');
    expect(code).toBe(0);
    expect(logLines(output).filter((l) => l.level === 40)).toEqual([expect.objectContaining({ setting: 'ADMIN_HOST', msg: expect.stringContaining('every interface') })]);
  }, 60_000);

  it('the dispatcher shares the common rules: NODE_ENV in any case, DB_STATEMENT_TIMEOUT_MS=0, the DISPATCH_HOST_MAP and DISPATCH_DNS_SERVERS warnings, a bad DISPATCH_DNS_SERVERS', () => {
    expect(() => loadDispatcherConfig({ NODE_ENV: 'PRODUCTION' })).toThrow(/SECRETS_KEY: required/);
    expect(() => loadDispatcherConfig({ NODE_ENV: 'production', SECRETS_KEY: key, DB_STATEMENT_TIMEOUT_MS: '0' })).toThrow(/DB_STATEMENT_TIMEOUT_MS: must not be 0/);
    const config = loadDispatcherConfig({ NODE_ENV: 'production', SECRETS_KEY: key, DISPATCH_HOST_MAP: 'a.test=203.0.113.1' });
    expect(config.startWarnings).toEqual([expect.objectContaining({ setting: 'DISPATCH_HOST_MAP' }), expect.objectContaining({ setting: 'DISPATCH_DNS_SERVERS' })]);
    expect(loadDispatcherConfig({ NODE_ENV: 'production', SECRETS_KEY: key, ...publicDns }).startWarnings).toEqual([]);
    expect(() => loadDispatcherConfig({ DISPATCH_DNS_SERVERS: 'ns1.example' })).toThrow(/DISPATCH_DNS_SERVERS: "ns1\.example" is not an ip, ip:port or \[ipv6\]:port/);
    // Outside production, 0 (no timeout) is still accepted, and the map is said nothing of.
    expect(loadDispatcherConfig({ DB_STATEMENT_TIMEOUT_MS: '0', DISPATCH_HOST_MAP: 'a.test=203.0.113.1' }).startWarnings.map((w) => w.setting)).toEqual(['SECRETS_KEY']);
  });

  it('estimates entropy low for few or repeated characters and high for random values', () => {
    expect(estimatedEntropyBits('a'.repeat(64))).toBe(0);
    expect(estimatedEntropyBits('ab'.repeat(32))).toBe(64);
    expect(estimatedEntropyBits('change-me-please-change-me-please')).toBeLessThan(128);
    for (let i = 0; i < 20; i++) {
      expect(estimatedEntropyBits(randomBytes(32).toString('base64'))).toBeGreaterThan(180);
      expect(estimatedEntropyBits(randomBytes(32).toString('hex'))).toBeGreaterThan(200);
    }
    const strong = { NODE_ENV: 'production', SECRETS_KEY: key, ...door };
    expect(() => loadGatewayConfig({ ...strong, ADMIN_TOKEN: randomBytes(32).toString('base64') })).not.toThrow();
    expect(() => loadGatewayConfig({ ...strong, ADMIN_TOKEN: 'a'.repeat(32) })).toThrow(/ADMIN_TOKEN: is one character repeated/);
    expect(() => loadGatewayConfig({ ...strong, ADMIN_ON_PUBLIC_PORT: 'yes' })).toThrow(/ADMIN_ON_PUBLIC_PORT: must be 1/);
  });

  it.each(['gateway', 'dispatcher'] as const)('outside production the %s starts, warning at every start of the development key and DISPATCH_ALLOW_CIDRS', async (service) => {
    const ready = service === 'gateway' ? 'gateway listening' : 'dispatcher started';
    for (let start = 0; start < 2; start++) {
      const { code, output } = await run(service, { ...started.env(), DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' }, ready);
      expect(code).toBe(0);
      const warnings = logLines(output).filter((l) => l.level === 40);
      const expected = [
        expect.objectContaining({ setting: 'SECRETS_KEY', msg: expect.stringContaining('development key') }),
        expect.objectContaining({ setting: 'DISPATCH_ALLOW_CIDRS', msg: expect.stringContaining('127.0.0.0/8') }),
      ];
      if (service === 'gateway') expected.push(expect.objectContaining({ setting: 'ADMIN_TOKEN', msg: expect.stringContaining('unset') }));
      expect(warnings).toEqual(expected);
    }
  }, 60_000);
});
