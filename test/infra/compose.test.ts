import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { loadGatewayConfig } from '../../services/gateway/src/config';
import { loadDispatcherConfig } from '../../services/dispatcher/src/config';

/**
 * No Docker engine runs where the tests do, so docker-compose.yml and the Dockerfiles are checked
 * as files: their structure, and that they agree with the code (settings the services really read,
 * ports they really listen on, entry points that exist).
 */

const root = join(__dirname, '../..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

interface Healthcheck {
  test?: string | string[];
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
  disable?: boolean;
}
interface Service {
  image?: string;
  build?: { context: string; dockerfile: string; args?: Record<string, string> };
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null>;
  ports?: Array<string | { target: number; published?: number | string }>;
  expose?: Array<string | number>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: Healthcheck;
  restart?: string;
  container_name?: string;
  deploy?: unknown;
  [key: string]: unknown;
}
interface ComposeFile {
  name?: string;
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

const compose = parse(read('docker-compose.yml'), { merge: true }) as ComposeFile;
const services = compose.services;

// The Compose specification's keys for what this file uses; a misspelt key is silently ignored by
// some tools, so the test refuses anything outside them.
const SERVICE_KEYS = new Set([
  'image', 'build', 'command', 'entrypoint', 'environment', 'env_file', 'ports', 'expose', 'volumes', 'depends_on',
  'healthcheck', 'restart', 'init', 'stop_grace_period', 'stop_signal', 'user', 'working_dir', 'networks', 'deploy',
  'labels', 'logging', 'ulimits', 'read_only', 'tmpfs', 'shm_size', 'profiles', 'pull_policy',
]);
const HEALTHCHECK_KEYS = new Set(['test', 'interval', 'timeout', 'retries', 'start_period', 'start_interval', 'disable']);
const CONDITIONS = new Set(['service_started', 'service_healthy', 'service_completed_successfully']);
const DURATION = /^(\d+(\.\d+)?(us|ms|s|m|h))+$/;

/** Compose's variable substitution with nothing set in the environment: what a bare `up` gets. */
function interpolate(value: string, env: Record<string, string> = {}): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, name?: string, colon?: string, kind?: string, arg?: string, bare?: string) => {
    if (whole === '$$') return '$';
    const key = (name ?? bare)!;
    const v = env[key];
    const missing = v === undefined || (colon === ':' && v === '');
    if (kind === '?' && missing) throw new Error(`${key} is required: ${arg}`);
    if (kind === '-' && missing) return arg ?? '';
    return v ?? '';
  });
}

/**
 * What an operator must set before `up` (each is `${VAR:?message}` in the file): the passwords and
 * the secrets key, none with a default. URL-safe passwords, as the file's header asks.
 */
const REQUIRED: Record<string, string> = {
  POSTGRES_PASSWORD: 'pg0123456789abcdef',
  REDIS_PASSWORD: 'redis0123456789abcdef',
  GRAFANA_ADMIN_PASSWORD: 'grafana0123456789',
  SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
};

/** A service's environment as compose would pass it, given the operator's environment (by default the required settings only). */
function environment(service: string, env: Record<string, string> = REQUIRED): Record<string, string> {
  return Object.fromEntries(
    Object.entries(services[service]?.environment ?? {}).map(([k, v]) => [k, interpolate(v === null ? '' : String(v), env)]),
  );
}

/** Where the settings every service reads are read (`readCommonSettings`). */
const COMMON_SETTINGS = 'packages/platform/src/settings.ts';

/** The environment names a service's config.ts reads (`r.int('PORT', ...)` and the like), the common ones included. */
function settingsReadBy(configPath: string): Set<string> {
  const names = (path: string) => [...read(path).matchAll(/\br\.\w+\(\s*'([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!);
  return new Set([...names(configPath), ...names(COMMON_SETTINGS)]);
}

/** The names in the first column of a document's `| variable |` table (up to its first blank line). */
const settingsTable = (markdown: string): Set<string> => {
  const table = markdown.slice(markdown.indexOf('| variable |')).split(/\n\s*\n/)[0]!;
  return new Set([...table.matchAll(/^\| ([A-Z][A-Z0-9_]*) \|/gm)].map((m) => m[1]!));
};

/**
 * Settings operations.md already lists but no code reads yet, each with the issue that builds it,
 * left out of docs/operations.md's settings table until they land; the test below fails as soon as
 * one is documented or read, so the entry is removed with the work.
 */
const NOT_YET_BUILT: Record<string, string> = {};

const SPEC_PATH = join(root, '../shared/spec/operations.md');
/** Where the project documents every setting. */
const SETTINGS_DOC = 'docs/operations.md';

/**
 * The settings table of docs/operations.md, which carries every variable of the spec operations.md's
 * table (the names tools outside the project rely on) but those `NOT_YET_BUILT`. The spec lives beside
 * the repository, not in it: where it is reachable the table is checked against it, so a clean clone
 * still tests the rest.
 */
function operationsSettings(): Set<string> {
  const documented = settingsTable(read(SETTINGS_DOC));
  if (existsSync(SPEC_PATH)) {
    const missing = [...settingsTable(readFileSync(SPEC_PATH, 'utf8'))].filter((k) => !documented.has(k) && !(k in NOT_YET_BUILT));
    expect({ missingFromSettingsTable: missing }).toEqual({ missingFromSettingsTable: [] });
  }
  return documented;
}

const healthcheckUrl = (h: Healthcheck | undefined): string | undefined =>
  [h?.test ?? []].flat().join(' ').match(/http:\/\/[^'"\s)]+/)?.[0];

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

/**
 * A Dockerfile as instructions (continuation lines joined, comments dropped), split by stage, as
 * built with `buildArgs`: `$NAME` and `${NAME}` are replaced by the build arguments a stage declares
 * (and by the global ones in FROM), except in ARG lines and the exec forms (CMD, HEALTHCHECK), which
 * Docker does not expand either.
 */
function dockerfile(path: string, buildArgs: Record<string, string> = {}): { args: Record<string, string>; stages: Stage[] } {
  const lines = read(path)
    .replace(/\\\r?\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  let scope: Record<string, string> = {};
  const expand = (text: string, vars: Record<string, string>) =>
    text.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a?: string, b?: string) => vars[(a ?? b)!] ?? '');
  for (const line of lines) {
    const [, keyword = '', rest = ''] = line.match(/^(\S+)\s*(.*)$/) ?? [];
    const kw = keyword.toUpperCase();
    if (kw === 'FROM') {
      const m = rest.match(/^(\S+)(?:\s+AS\s+(\S+))?$/i);
      stages.push({ from: expand(m?.[1] ?? '', args), name: m?.[2], instructions: [] });
      scope = {};
    } else if (kw === 'ARG') {
      const [name = '', value] = rest.split('=', 2);
      if (stages.length === 0) args[name] = buildArgs[name] ?? value ?? '';
      else scope[name] = buildArgs[name] ?? value ?? args[name] ?? '';
      stages.at(-1)?.instructions.push({ keyword: kw, args: rest });
    } else {
      const raw = ['CMD', 'HEALTHCHECK', 'ENTRYPOINT'].includes(kw);
      stages.at(-1)?.instructions.push({ keyword: kw, args: raw ? rest : expand(rest, scope) });
    }
  }
  return { args, stages };
}

const SERVICES = ['gateway', 'dispatcher'] as const;
type ServiceName = (typeof SERVICES)[number];
const packageJson = (svc: ServiceName) =>
  JSON.parse(read(`services/${svc}/package.json`)) as {
    name: string;
    scripts: Record<string, string>;
    dependencies: Record<string, string>;
    devDependencies?: Record<string, string>;
  };

describe('docker-compose.yml', () => {
  it('runs the whole platform: Postgres, Redis, migrations, gateway, dispatcher, Prometheus, Alertmanager, Grafana', () => {
    expect(Object.keys(services).sort()).toEqual(['alertmanager', 'dispatcher', 'gateway', 'grafana', 'migrate', 'postgres', 'prometheus', 'redis']);
    expect(services.alertmanager?.image).toMatch(/^prom\/alertmanager:v\d/);
    expect(services.postgres?.image).toMatch(/^postgres:16(\.|-|$)/);
    expect(services.redis?.image).toMatch(/^redis:7(\.|-|$)/);
    expect(services.prometheus?.image).toMatch(/^prom\/prometheus:v\d/);
    expect(services.grafana?.image).toMatch(/^grafana\/grafana(-oss)?:\d/);
  });

  it('uses only keys of the Compose specification, with valid durations and conditions', () => {
    for (const [name, s] of Object.entries(services)) {
      expect({ name, unknown: Object.keys(s).filter((k) => !SERVICE_KEYS.has(k)) }).toEqual({ name, unknown: [] });
      expect({ name, unknown: Object.keys(s.healthcheck ?? {}).filter((k) => !HEALTHCHECK_KEYS.has(k)) }).toEqual({ name, unknown: [] });
      for (const d of ['interval', 'timeout', 'start_period'] as const) {
        const v = s.healthcheck?.[d];
        if (v !== undefined) expect({ name, [d]: v }).toEqual({ name, [d]: expect.stringMatching(DURATION) });
      }
      if (typeof s.stop_grace_period === 'string') expect(s.stop_grace_period).toMatch(DURATION);
      for (const [dep, cond] of Object.entries(s.depends_on ?? {})) {
        expect(services[dep]).toBeDefined();
        expect({ name, dep, condition: CONDITIONS.has(cond.condition) }).toEqual({ name, dep, condition: true });
      }
      for (const v of s.volumes ?? []) {
        const [source = ''] = v.split(':');
        if (source.startsWith('.')) expect({ name, mount: v, exists: existsSync(join(root, source)) }).toEqual({ name, mount: v, exists: true });
        else expect({ name, volume: source, declared: source in (compose.volumes ?? {}) }).toEqual({ name, volume: source, declared: true });
      }
    }
  });

  it('gives every long-running service a health check; migrate runs once', () => {
    for (const name of ['postgres', 'redis', 'gateway', 'dispatcher', 'prometheus', 'alertmanager', 'grafana']) {
      const h = services[name]?.healthcheck;
      expect({ name, disabled: h?.disable ?? false }).toEqual({ name, disabled: false });
      const test = [h?.test ?? []].flat();
      expect({ name, kind: test[0] }).toEqual({ name, kind: expect.stringMatching(/^CMD(-SHELL)?$/) });
      expect(test.length).toBeGreaterThan(1);
    }
    expect([services.postgres?.healthcheck?.test].flat().join(' ')).toMatch(/pg_isready/);
    expect([services.redis?.healthcheck?.test].flat().join(' ')).toMatch(/redis-cli.*ping/);
    expect(services.migrate?.restart).toBe('no');
  });

  it('keeps Postgres and Redis data in volumes; Redis never evicts (BullMQ) and persists', () => {
    expect(services.postgres?.volumes).toContainEqual(expect.stringMatching(/^[\w-]+:\/var\/lib\/postgresql\/data$/));
    expect(services.redis?.volumes).toContainEqual(expect.stringMatching(/^[\w-]+:\/data$/));
    const command = [services.redis?.command ?? []].flat().join(' ');
    expect(command).toMatch(/--maxmemory-policy noeviction\b/);
    expect(command).toMatch(/--appendonly yes\b/);
  });

  it('starts in order: data stores healthy, then migrations completed, then the services', () => {
    for (const svc of SERVICES) {
      expect(services[svc]?.depends_on).toEqual({
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
        migrate: { condition: 'service_completed_successfully' },
      });
    }
    expect(services.migrate?.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    expect(services.grafana?.depends_on?.prometheus).toEqual({ condition: 'service_healthy' });
  });

  it('migrate runs `pnpm migrate`’s entry point, compiled, with the gateway image, which carries it', () => {
    expect(services.migrate?.build).toEqual(services.gateway?.build);
    expect(services.migrate?.image).toBe(services.gateway?.image);
    const command = [services.migrate?.command ?? []].flat();
    const rootScripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    // `pnpm migrate` is `tsx packages/platform/src/db/migrate.main.ts`; the gateway's build bundles that
    // same entry point into dist/migrate.js, which the image runs with plain node.
    const entry = rootScripts.migrate!.match(/(packages\/platform\/\S+)$/)?.[1];
    expect(entry).toBeDefined();
    expect(existsSync(join(root, entry!))).toBe(true);
    expect(packageJson('gateway').scripts.build).toContain(`migrate=../../${entry}`);
    expect(command).toEqual(['node', 'dist/migrate.js']);
    expect(packageJson('gateway').dependencies).toEqual(expect.objectContaining({ '@svc/platform': expect.any(String) }));
    expect(environment('migrate').DATABASE_URL).toBe(environment('gateway').DATABASE_URL);
  });

  it('leaves out of the settings table only spec settings not built yet, each naming its issue; none of them documented or read', () => {
    const documented = settingsTable(read(SETTINGS_DOC));
    const readByAny = new Set(SERVICES.flatMap((svc) => [...settingsReadBy(`services/${svc}/src/config.ts`)]));
    for (const [name, issue] of Object.entries(NOT_YET_BUILT)) {
      expect({ name, issue }).toEqual({ name, issue: expect.stringMatching(/^issue \d+/) });
      // Built: document it in docs/operations.md's table and drop it from NOT_YET_BUILT.
      expect({ name, documented: documented.has(name), read: readByAny.has(name) }).toEqual({ name, documented: false, read: false });
    }
    if (existsSync(SPEC_PATH)) {
      const spec = settingsTable(readFileSync(SPEC_PATH, 'utf8'));
      // An entry the spec no longer lists is stale.
      expect(Object.keys(NOT_YET_BUILT).filter((k) => !spec.has(k))).toEqual([]);
    }
  });

  it('sets only settings the services read, names from operations.md, and values their config accepts', () => {
    const documented = operationsSettings();
    expect(documented.size).toBeGreaterThanOrEqual(10);
    for (const svc of SERVICES) {
      const reads = settingsReadBy(`services/${svc}/src/config.ts`);
      const env = environment(svc);
      expect({ svc, unread: Object.keys(env).filter((k) => !reads.has(k)) }).toEqual({ svc, unread: [] });
      // The names the contract fixes are set under exactly those names.
      for (const k of ['DATABASE_URL', 'REDIS_URL', 'REDIS_PREFIX']) {
        expect(documented.has(k)).toBe(true);
        expect({ svc, k, set: k in env }).toEqual({ svc, k, set: true });
      }
      expect(new URL(env.DATABASE_URL!).hostname).toBe('postgres');
      expect(new URL(env.REDIS_URL!).hostname).toBe('redis');
    }
    const gw = environment('gateway');
    const disp = environment('dispatcher');
    for (const k of ['PORT', 'GATEWAY_METRICS_PORT', 'ADMIN_TOKEN', 'RATE_LIMIT_PER_MINUTE']) expect(documented.has(k) && k in gw).toBe(true);
    for (const k of ['DISPATCHER_METRICS_PORT', 'DISPATCHER_CONCURRENCY', 'DISPATCHER_WEBHOOK_CONCURRENCY']) expect(documented.has(k) && k in disp).toBe(true);
    // Both services must agree on the database and on the Redis keys they share.
    expect(disp.DATABASE_URL).toBe(gw.DATABASE_URL);
    expect(disp.REDIS_URL).toBe(gw.REDIS_URL);
    expect(disp.REDIS_PREFIX).toBe(gw.REDIS_PREFIX);
    const db = new URL(gw.DATABASE_URL!);
    const pg = environment('postgres');
    expect(db.pathname).toBe(`/${pg.POSTGRES_DB}`);
    expect(decodeURIComponent(db.username)).toBe(pg.POSTGRES_USER);
    expect(decodeURIComponent(db.password)).toBe(pg.POSTGRES_PASSWORD);
    // With nothing set and with overrides, the services' own loaders accept what compose passes.
    const overrides: Array<Record<string, string>> = [REQUIRED, { ...REQUIRED, ADMIN_TOKEN: 'secret-admin-token', POSTGRES_PASSWORD: 'p@ss', REDIS_PREFIX: 'stack2' }];
    for (const env of overrides) {
      expect(() => loadGatewayConfig(environment('gateway', env))).not.toThrow();
      expect(() => loadDispatcherConfig(environment('dispatcher', env))).not.toThrow();
    }
    expect(loadGatewayConfig(environment('gateway', { ...REQUIRED, ADMIN_TOKEN: 'x' })).adminToken).toBe('x');
    expect(loadGatewayConfig(gw).adminToken).toBeUndefined();
  });

  it('publishes the gateway on its public port only and checks /readyz on its metrics port', () => {
    const config = loadGatewayConfig(environment('gateway'));
    expect(services.gateway?.ports).toEqual([`${config.port}:${config.port}`]);
    expect((services.gateway?.expose ?? []).map(String).sort()).toEqual([String(config.adminPort), String(config.metricsPort)].sort());
    expect(config.metricsPort).toBe(9101);
    expect(healthcheckUrl(services.gateway?.healthcheck)).toBe(`http://127.0.0.1:${config.metricsPort}/readyz`);
  });

  it('lets `docker compose up --scale dispatcher=3` work: no fixed host port, no container name', () => {
    const dispatcher = services.dispatcher!;
    expect(dispatcher.container_name).toBeUndefined();
    // A published host port can be bound by one replica only; container ports alone are fine.
    const fixed = (dispatcher.ports ?? []).filter((p) => (typeof p === 'string' ? /^\d[^:]*:|:\d+:/.test(p) : p.published !== undefined));
    expect(fixed).toEqual([]);
    const config = loadDispatcherConfig(environment('dispatcher'));
    expect(config.metricsPort).toBe(9102);
    expect((dispatcher.expose ?? []).map(String)).toContain(String(config.metricsPort));
    expect(healthcheckUrl(dispatcher.healthcheck)).toBe(`http://127.0.0.1:${config.metricsPort}/readyz`);
    // Prometheus finds the replicas through the service name, on the port they listen on.
    const prometheus = parse(read('infra/prometheus/prometheus.yml')) as {
      scrape_configs: Array<{ job_name: string; dns_sd_configs?: Array<{ names: string[]; port: number }> }>;
    };
    const sd = prometheus.scrape_configs.find((c) => c.job_name === 'dispatcher')?.dns_sd_configs?.[0];
    expect(sd?.names).toEqual(['dispatcher']);
    expect(sd?.port).toBe(config.metricsPort);
  });

  it('mounts the Prometheus config and the Grafana provisioning read-only', () => {
    expect(services.prometheus?.volumes).toContain('./infra/prometheus:/etc/prometheus:ro');
    expect([services.prometheus?.command].flat()).toContain('--config.file=/etc/prometheus/prometheus.yml');
    expect(existsSync(join(root, 'infra/prometheus/prometheus.yml'))).toBe(true);
    expect(services.grafana?.volumes).toEqual(
      expect.arrayContaining(['./infra/grafana/provisioning:/etc/grafana/provisioning:ro', './infra/grafana/dashboards:/etc/grafana/dashboards:ro']),
    );
    const home = environment('grafana').GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH;
    expect(home).toMatch(/^\/etc\/grafana\/dashboards\//);
    expect(existsSync(join(root, 'infra/grafana/dashboards', home!.replace('/etc/grafana/dashboards/', '')))).toBe(true);
  });

  it('runs Alertmanager with its config mounted, checked on /-/ready, and Prometheus pointed at it', () => {
    const am = services.alertmanager!;
    expect(am.volumes).toContain('./infra/alertmanager:/etc/alertmanager:ro');
    expect(existsSync(join(root, 'infra/alertmanager/alertmanager.yml'))).toBe(true);
    const command = [am.command ?? []].flat();
    expect(command).toContain('--config.file=/etc/alertmanager/alertmanager.yml');
    // Silences and notification state survive a restart.
    const storage = command.find((c) => c.startsWith('--storage.path='))?.split('=')[1];
    expect(am.volumes).toContainEqual(`alertmanager-data:${storage}`);
    expect(am.ports).toBeUndefined();
    expect((am.expose ?? []).map(String)).toEqual(['9093']);
    expect(healthcheckUrl(am.healthcheck)).toBe('http://127.0.0.1:9093/-/ready');
    expect(am.restart).toBe('unless-stopped');
    // Started first, but not a condition of Prometheus' health: metrics keep flowing without it.
    expect(services.prometheus?.depends_on?.alertmanager).toEqual({ condition: 'service_started' });
    const prometheus = parse(read('infra/prometheus/prometheus.yml')) as {
      alerting?: { alertmanagers: Array<{ static_configs?: Array<{ targets: string[] }> }> };
    };
    const targets = prometheus.alerting?.alertmanagers.flatMap((a) => a.static_configs ?? []).flatMap((c) => c.targets) ?? [];
    expect(targets).toEqual(['alertmanager:9093']);
  });

  it('builds each service from the workspace root with the one Dockerfile template, given every argument it declares', () => {
    expect(existsSync(join(root, 'Dockerfile'))).toBe(true);
    const declared = dockerfile('Dockerfile').stages.flatMap((s) => s.instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args));
    const required = [...new Set(declared.filter((a) => !a.includes('=')))].sort();
    expect(required).toEqual(['METRICS_PORT', 'METRICS_PORT_VAR', 'PORTS', 'SERVICE']);
    for (const svc of SERVICES) {
      const build = services[svc]?.build;
      expect({ context: build?.context, dockerfile: build?.dockerfile, service: build?.args?.SERVICE }).toEqual({ context: '.', dockerfile: 'Dockerfile', service: svc });
      // Every argument without a default is given, and nothing the template does not declare.
      const names = new Set(declared.map((a) => a.split('=')[0]));
      const given = Object.keys(build?.args ?? {}).sort();
      expect(given.filter((a) => !names.has(a))).toEqual([]);
      expect(required.filter((a) => !given.includes(a))).toEqual([]);
      // No second copy beside the service.
      expect(existsSync(join(root, `services/${svc}/Dockerfile`))).toBe(false);
    }
  });
});

describe('the heap bounds (issue 30)', () => {
  it('each image runs its service with the node flags `pnpm start:prod` gives it, which the bench reads', () => {
    const startProd = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts['start:prod'] ?? '';
    for (const svc of SERVICES) {
      const flags = new RegExp(`exec node ((?:--\\S+ )*)services/${svc}/dist/main\\.js`).exec(startProd)?.[1]?.trim();
      expect(flags).toMatch(/--max-old-space-size=\d+/);
      // V8's collector keeps its helper threads: on Node 24, collecting on the main thread alone cost
      // the dispatcher more CPU than it saved (decision 0007).
      expect(flags?.split(' ')).not.toContain('--single-threaded-gc');
      expect(services[svc]?.build?.args?.NODE_FLAGS).toBe(flags);
    }
    // The runtime stage declares the argument and hands it to node's command line (the parser
    // substitutes ARG values, so read the text): NODE_OPTIONS would refuse most V8 flags.
    const runtime = read('Dockerfile').slice(read('Dockerfile').lastIndexOf('FROM '));
    expect(runtime).toMatch(/^ARG NODE_FLAGS=/m);
    expect(runtime).toContain('NODE_FLAGS=${NODE_FLAGS}');
    expect(runtime).not.toMatch(/^\s*(ENV\s+)?NODE_OPTIONS=/m);
    expect(runtime).toContain('CMD ["/bin/sh", "-c", "exec node $NODE_FLAGS dist/main.js"]');
  });
});

describe('docker-compose.yml, hardened (issue 28)', () => {
  const raw = read('docker-compose.yml');
  const hostPorts = (svc: Service): string[] => (svc.ports ?? []).map((p) => (typeof p === 'string' ? p : `${p.published ?? ''}:${p.target}`));

  it('publishes only the gateway\'s public port and Grafana', () => {
    const published = Object.entries(services).flatMap(([name, svc]) => hostPorts(svc).map((p) => `${name} ${p}`));
    const gateway = loadGatewayConfig(environment('gateway'));
    expect(published.sort()).toEqual([`gateway ${gateway.port}:${gateway.port}`, 'grafana 3001:3000']);
  });

  it('sets ADMIN_PORT (listening on the stack\'s network) and does not publish it', () => {
    const config = loadGatewayConfig(environment('gateway'));
    expect(config.adminPort).toEqual(expect.any(Number));
    expect(config.adminPort).not.toBe(config.port);
    expect(config.adminHost).toBe('0.0.0.0');
    expect(hostPorts(services.gateway!).some((p) => p.endsWith(`:${config.adminPort}`) || p.startsWith(`${config.adminPort}:`))).toBe(false);
  });

  it('has no password or key that works by default: a bare `up` is refused, naming each missing one', () => {
    for (const name of Object.keys(REQUIRED)) {
      const missing = { ...REQUIRED };
      delete missing[name];
      const all = Object.keys(services).flatMap((svc) => Object.values(services[svc]?.environment ?? {}).map(String).concat([services[svc]?.command ?? []].flat().map(String)));
      expect(() => all.forEach((v) => interpolate(v, missing))).toThrow(new RegExp(`${name} is required`));
    }
    // No default for any of them anywhere in the file: only `${VAR:?message}`.
    for (const name of [...Object.keys(REQUIRED), 'ADMIN_TOKEN']) {
      expect({ name, defaults: raw.match(new RegExp(`\\$\\{${name}:?-[^}]+\\}`, 'g')) ?? [] }).toEqual({ name, defaults: [] });
    }
    expect(raw).not.toMatch(/change-me|admin\/admin|:-postgres\}|:-admin\}/);
  });

  it('Postgres, Redis and Grafana take their passwords from the environment; the services connect with them', () => {
    expect(environment('postgres').POSTGRES_PASSWORD).toBe(REQUIRED.POSTGRES_PASSWORD);
    const redisCommand = [services.redis?.command ?? []].flat().map((c) => interpolate(String(c), REQUIRED)).join(' ');
    expect(redisCommand).toContain(`--requirepass ${REQUIRED.REDIS_PASSWORD}`);
    expect(environment('redis').REDISCLI_AUTH).toBe(REQUIRED.REDIS_PASSWORD);
    expect(environment('grafana').GF_SECURITY_ADMIN_PASSWORD).toBe(REQUIRED.GRAFANA_ADMIN_PASSWORD);
    expect(environment('grafana').GF_AUTH_ANONYMOUS_ENABLED).toBe('false');
    for (const svc of SERVICES) {
      const env = environment(svc);
      expect(decodeURIComponent(new URL(env.REDIS_URL!).password)).toBe(REQUIRED.REDIS_PASSWORD);
      expect(decodeURIComponent(new URL(env.DATABASE_URL!).password)).toBe(REQUIRED.POSTGRES_PASSWORD);
      expect(env.SECRETS_KEY).toBe(REQUIRED.SECRETS_KEY);
      // Test-only settings are not passed at all: a .env beside the file cannot carry them in.
      expect(env.DISPATCH_ALLOW_CIDRS).toBeUndefined();
    }
  });

  it('the services start in production (the images\' NODE_ENV) with what compose passes', () => {
    // Strong: 40 characters of a random generator (one repeated character is refused, issue 42).
    const strong = { ...REQUIRED, ADMIN_TOKEN: 'Qm9sZXRvLXNlY3JldG8tZGUtb3BlcmFkb3ItNDI0' };
    expect(loadGatewayConfig({ ...environment('gateway', strong), NODE_ENV: 'production' }).production).toBe(true);
    expect(loadDispatcherConfig({ ...environment('dispatcher', strong), NODE_ENV: 'production' }).production).toBe(true);
    // Left unset, the admin token closes the internal routes; a weak one stops the gateway.
    expect(() => loadGatewayConfig({ ...environment('gateway', REQUIRED), NODE_ENV: 'production' })).not.toThrow();
    expect(() => loadGatewayConfig({ ...environment('gateway', { ...REQUIRED, ADMIN_TOKEN: 'change-me' }), NODE_ENV: 'production' })).toThrow(/ADMIN_TOKEN/);
  });

  it('Prometheus without its lifecycle API and unpublished; Alertmanager unpublished', () => {
    expect([services.prometheus?.command ?? []].flat()).not.toContain('--web.enable-lifecycle');
    expect(services.prometheus?.ports).toBeUndefined();
    expect(services.alertmanager?.ports).toBeUndefined();
    // Grafana still reads Prometheus on the stack's network.
    expect(read('infra/grafana/provisioning/datasources/prometheus.yml')).toContain('url: http://prometheus:9090');
  });

  it('DB_POOL_SIZE from the environment; Postgres max_connections and Redis maxmemory fit the documented scale', () => {
    for (const svc of SERVICES) {
      expect(services[svc]?.environment?.DB_POOL_SIZE).toMatch(/^\$\{DB_POOL_SIZE:-\d+\}$/);
      expect(environment(svc, { ...REQUIRED, DB_POOL_SIZE: '7' }).DB_POOL_SIZE).toBe('7');
    }
    const pool = Number(environment('gateway').DB_POOL_SIZE);
    expect(Number(environment('dispatcher').DB_POOL_SIZE)).toBe(pool);
    const postgres = [services.postgres?.command ?? []].flat().join(' ');
    const maxConnections = Number(postgres.match(/max_connections=(\d+)/)?.[1]);
    // The README's rule: DB_POOL_SIZE × (gateways + dispatchers) + migrate and tools. One gateway and
    // `--scale dispatcher=3` (the file's own example) with room to spare, and then some.
    expect(maxConnections).toBeGreaterThanOrEqual(pool * (1 + 3) + 10);
    expect(maxConnections).toBeLessThanOrEqual(500);
    const redis = [services.redis?.command ?? []].flat().map((c) => interpolate(String(c), REQUIRED)).join(' ');
    const maxmemory = redis.match(/--maxmemory (\d+)(gb|mb)\b/i);
    expect(maxmemory).not.toBeNull();
    const bytes = Number(maxmemory![1]) * (maxmemory![2]!.toLowerCase() === 'gb' ? 1024 ** 3 : 1024 ** 2);
    expect(bytes).toBeGreaterThanOrEqual(256 * 1024 ** 2);
    expect(redis).toMatch(/--maxmemory-policy noeviction\b/);
  });
});

describe.each(SERVICES)('Dockerfile, built for the %s', (svc) => {
  const { args, stages } = dockerfile('Dockerfile', services[svc]?.build?.args);
  const pkg = packageJson(svc);
  const final = stages.at(-1)!;
  const all = (stage: Stage, kw: string) => stage.instructions.filter((i) => i.keyword === kw).map((i) => i.args);
  const env = Object.fromEntries(
    all(final, 'ENV').flatMap((a) => [...a.matchAll(/([A-Z_][A-Z0-9_]*)=("[^"]*"|\S+)/g)].map((m) => [m[1]!, m[2]!.replace(/^"|"$/g, '')])),
  );

  it('is multi-stage: a named build stage, then a slim Node 24 runtime copying only its output', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages.find((s) => s.name && s !== final)!;
    expect(build).toBeDefined();
    expect(final.from).toMatch(/^node:24([.\d]*)-(slim|alpine)/);
    expect(all(final, 'COPY').some((c) => c.startsWith(`--from=${build.name} `))).toBe(true);
    // Nothing but the deployed tree reaches the runtime: no COPY of the build context itself.
    expect(all(final, 'COPY').filter((c) => !c.startsWith('--from='))).toEqual([]);
    expect(all(final, 'RUN')).toEqual([]);
  });

  it('installs, builds and deploys through scripts/image-build.sh, the production tree of this service only', () => {
    const build = stages.find((s) => s !== final && s.instructions.some((i) => /image-build\.sh deploy\b/.test(i.args)))!;
    expect(build).toBeDefined();
    const pnpmVersion = (JSON.parse(read('package.json')) as { packageManager: string }).packageManager.split('@')[1];
    const version = build.instructions.find((i) => i.keyword === 'ARG' && i.args.startsWith('PNPM_VERSION='))?.args.split('=')[1];
    expect(version).toBe(pnpmVersion);
    // Every install and deploy step is in the script (which test/infra/image-build.test.ts runs): the
    // fetch before the sources are copied, the deploy of this service after.
    const runs = all(build, 'RUN');
    expect(runs.filter((r) => /\bpnpm (install|fetch|deploy|build)\b|pnpm .*deploy/.test(r))).toEqual([]);
    const fetchAt = build.instructions.findIndex((i) => i.keyword === 'RUN' && /^scripts\/image-build\.sh fetch$/.test(i.args));
    const sourcesAt = build.instructions.findIndex((i) => i.keyword === 'COPY' && /^\. \.$/.test(i.args));
    const deployAt = build.instructions.findIndex((i) => i.keyword === 'RUN' && i.args === `scripts/image-build.sh deploy /out ${svc}`);
    expect({ fetchAt: fetchAt >= 0, deployAt: deployAt >= 0 }).toEqual({ fetchAt: true, deployAt: true });
    expect(fetchAt).toBeLessThan(sourcesAt);
    expect(sourcesAt).toBeLessThan(deployAt);
    // The lockfile (and the script) are copied before the sources, so the store's layer survives source changes.
    const copies = all(build, 'COPY');
    expect(copies[0]).toMatch(/^pnpm-lock\.yaml pnpm-workspace\.yaml/);
    expect(copies.slice(0, copies.indexOf('. .'))).toContain('scripts/image-build.sh scripts/');
    // The script deploys from the lockfile (no --legacy: that re-resolves), offline, production only.
    const script = read('scripts/image-build.sh').split('\n').filter((l) => !/^\s*#/.test(l)).join('\n');
    expect(script).toMatch(/pnpm fetch\b/);
    expect(script).toMatch(/pnpm install --offline --frozen-lockfile\b/);
    expect(script).toMatch(/pnpm build\b/);
    expect(script).toMatch(/--config\.inject-workspace-packages=true --filter "@svc\/\$service" --prod --offline\b/);
    expect(script).not.toMatch(/deploy[^\n]*--legacy/);
    // The runtime stage takes this service's deployed folder only.
    expect(all(final, 'COPY')).toEqual([`--from=${build.name} /out/${svc} ./`]);
  });

  it('runs as the non-root user node, in production mode, on the ports its config reads', () => {
    const users = all(final, 'USER');
    expect(users.at(-1)).toBe('node');
    expect(env.NODE_ENV).toBe('production');
    const exposed = all(final, 'EXPOSE').flatMap((e) => e.split(/\s+/)).map(Number);
    // The image carries no key (an operator passes SECRETS_KEY, which production requires), and no
    // secret at all: no ENV of the image names one.
    expect(Object.keys(env).filter((k) => /SECRET|PASSWORD|TOKEN/.test(k))).toEqual([]);
    // What an operator passes: the key, and for the gateway the operator's own port, which
    // production requires (compose passes 3100, on the stack's network only).
    const withKey = { ...env, SECRETS_KEY: REQUIRED.SECRETS_KEY!, ...(svc === 'gateway' ? { ADMIN_PORT: '3100' } : {}) };
    const config = svc === 'gateway' ? loadGatewayConfig(withKey) : loadDispatcherConfig(withKey);
    const ports = 'port' in config ? [config.port, config.metricsPort] : [config.metricsPort];
    expect(exposed.sort()).toEqual(ports.sort());
    const health = all(final, 'HEALTHCHECK')[0] ?? '';
    expect(health).toMatch(/CMD/);
    expect(health).toContain('/readyz');
    // The check reads the port from the variable the service reads it from, named in SVC_METRICS_PORT_VAR.
    expect(health).toContain('e[e.SVC_METRICS_PORT_VAR]');
    expect(env.SVC_METRICS_PORT_VAR).toBe(svc === 'gateway' ? 'GATEWAY_METRICS_PORT' : 'DISPATCHER_METRICS_PORT');
    expect(env[env.SVC_METRICS_PORT_VAR!]).toBe(String(config.metricsPort));
  });

  it('starts the compiled entry point with plain node, as `start:prod` does; tsx is for development only', () => {
    // `pnpm start` stays on tsx (development); the image runs the build's bundle, as `start:prod`.
    expect(pkg.scripts.start).toBe('exec node --import tsx src/main.ts');
    expect(pkg.dependencies.tsx).toBeUndefined();
    expect(pkg.devDependencies?.tsx).toBeDefined();
    expect(pkg.scripts.build).toMatch(/scripts\/bundle\.mjs src\/main\.ts\b/);
    const cmd = JSON.parse(all(final, 'CMD').at(-1)!) as string[];
    // The script `exec`s node so that pnpm's signal reaches it; so does the image's shell, which
    // only puts node's flags (NODE_FLAGS, the heap bounds test above) on its command line.
    expect(pkg.scripts['start:prod']).toBe('exec node dist/main.js');
    expect(cmd).toEqual(['/bin/sh', '-c', 'exec node $NODE_FLAGS dist/main.js']);
    expect(existsSync(join(root, `services/${svc}/src/main.ts`))).toBe(true);
    expect(args.NODE_IMAGE ?? final.from).toMatch(/^node:24/);
  });
});

describe('.dockerignore', () => {
  const patterns = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));

  it('keeps node_modules, git history, secrets and tests out of the build context', () => {
    expect(patterns).toEqual(expect.arrayContaining(['**/node_modules', '**/dist', '.git', '.env', '.test-certs', '**/test']));
  });

  it('keeps what the build needs: manifests, lockfile, workspace file, sources', () => {
    for (const needed of ['package.json', 'pnpm-lock.yaml', 'pnpm-workspace.yaml', 'packages', 'services', 'src', 'services/gateway/src', 'scripts', 'scripts/image-build.sh', 'scripts/bundle.mjs', 'tsconfig.base.json', 'tsconfig.build.json']) {
      expect({ needed, ignored: patterns.some((p) => p === needed || p === `${needed}/` || p === `**/${needed}`) }).toEqual({ needed, ignored: false });
    }
  });
});
