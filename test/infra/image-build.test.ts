import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { adminUrl, TEST_DATABASE_BASE, TEST_REDIS_URL } from '../support/env';
import { freePort } from '../support/free-port';
import { dropPrefix, uniquePrefix } from '../support/redis-prefix';

/**
 * The images' build, without Docker: the Dockerfile's steps are scripts/image-build.sh, and this test
 * runs that same script on a copy of the workspace with an empty pnpm store and an empty HOME. The
 * fetch may use the network; everything after it runs against a registry that does not answer, so a
 * step that resolves instead of following the lockfile fails here. Then the deployed trees are run as
 * the images run them (plain node, dist/), against the test Postgres and Redis: migrations from the
 * gateway's tree, then the gateway and the dispatcher until /readyz answers 200, then a SIGTERM.
 */

const ROOT = join(__dirname, '../..');
/**
 * What `docker build` leaves out of the context: .dockerignore's patterns (`name` at the root, a
 * name after `**` anywhere, `*` within one path segment), so the script sees what the Dockerfile's does.
 */
const IGNORED = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#') && !l.startsWith('!'))
  .map((pattern) => {
    const body = pattern.replace(/\/$/, '').replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*\*\//g, '@ANY@').replace(/\*/g, '[^/]*').replace(/@ANY@/g, '(.*/)?');
    return new RegExp(`^${body}$`);
  });
const inContext = (src: string): boolean => {
  const path = relative(ROOT, src).split(sep).join('/');
  return path === '' || !IGNORED.some((re) => re.test(path));
};
/**
 * The sources the Dockerfile's build stage COPYs before `image-build.sh fetch` (that layer sees only
 * them, not the whole context): the fetch runs on these alone, as in `docker build`.
 */
function fetchStageSources(): string[] {
  const lines = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').split('\n');
  const end = lines.findIndex((l) => /^RUN scripts\/image-build\.sh fetch\b/.test(l));
  if (end < 0) throw new Error('Dockerfile: no `RUN scripts/image-build.sh fetch`');
  return lines
    .slice(0, end)
    .filter((l) => /^COPY\s/.test(l))
    .flatMap((l) => l.trim().split(/\s+/).slice(1, -1));
}

/** What only a developer's machine or the test tooling needs: none of it may reach an image. */
const DEV_ONLY = ['typescript', 'tsx', 'esbuild', 'jest', 'eslint', '@swc/core', '@types/node', 'autocannon', 'supertest', 'concurrently'];

let tmp: string;
let out: string;
let buildLog = '';

function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): void {
  const started = Date.now();
  const r = spawnSync('bash', args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  buildLog += `$ ${args.join(' ')} (${Date.now() - started} ms, exit ${r.status})\n${r.stdout}${r.stderr}\n`;
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed (${r.status ?? r.signal}):\n${(r.stdout + r.stderr).split('\n').slice(-40).join('\n')}`);
}

/** This environment without pnpm's and npm's own settings (a `pnpm test` run passes them down). */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(npm_|pnpm_|PNPM_|XDG_|NODE_OPTIONS$|NODE_EXTRA_CA_CERTS$|INIT_CWD$|SVC_)/i.test(k)),
  );
  return { ...env, ...extra };
}

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'svc-image-build-'));
  const workspace = join(tmp, 'workspace');
  const home = join(tmp, 'home');
  mkdirSync(home);
  // The working tree as a `docker build` context would see it (sources, manifests, lockfile).
  cpSync(ROOT, workspace, {
    recursive: true,
    filter: inContext,
  });
  out = join(tmp, 'out');
  const env = cleanEnv({
    HOME: home,
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_DATA_HOME: join(home, '.local/share'),
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_STATE_HOME: join(home, '.local/state'),
    PNPM_STORE_DIR: join(tmp, 'store'),
    // The registry may sit behind a proxy whose CA only the system's store holds (this machine's
    // does), and NODE_EXTRA_CA_CERTS is left out above: on Node 24 pnpm's fetch could then not
    // verify the registry and retried for ever (on Node 20 it got through, unexplained).
    NODE_USE_SYSTEM_CA: '1',
  });
  // The fetch layer: only what the Dockerfile copies before it (a file it needs and does not copy,
  // say a patch of patchedDependencies, fails here as in `docker build`), on the same store.
  const fetchStage = join(tmp, 'fetch-stage');
  for (const src of fetchStageSources()) cpSync(join(ROOT, src), join(fetchStage, src), { recursive: true });
  run(['scripts/image-build.sh', 'fetch'], env, fetchStage);
  // Offline from here: a registry that refuses every connection.
  run(['scripts/image-build.sh', 'deploy', out, 'gateway', 'dispatcher'], { ...env, npm_config_registry: 'http://127.0.0.1:9/' }, workspace);
}, 240_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** Every package (name) in a deployed tree's virtual store. */
function installedPackages(tree: string): Set<string> {
  const store = join(tree, 'node_modules/.pnpm');
  const names = new Set<string>();
  for (const entry of readdirSync(store)) {
    const modules = join(store, entry, 'node_modules');
    if (!existsSync(modules)) continue;
    for (const top of readdirSync(modules)) {
      if (top.startsWith('@')) for (const sub of readdirSync(join(modules, top))) names.add(`${top}/${sub}`);
      else names.add(top);
    }
  }
  return names;
}

/** TypeScript sources (not declarations) of the service and of the @svc packages in a deployed tree. */
function ownSources(tree: string): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory() && entry.name !== 'node_modules') walk(path);
      else if (entry.isFile() && /\.ts$/.test(entry.name) && !/\.d\.ts$/.test(entry.name)) found.push(relative(tree, path));
    }
  };
  walk(tree);
  const store = join(tree, 'node_modules/.pnpm');
  for (const entry of readdirSync(store).filter((e) => e.startsWith('@svc+'))) walk(join(store, entry, 'node_modules/@svc'));
  return found;
}

interface Started {
  child: ChildProcess;
  lines: string[];
  exit: Promise<number | null>;
}

/** A deployed service as its image runs it: `node <entry>` in its folder, only the settings given. */
function startNode(tree: string, entry: string, env: Record<string, string>): Started {
  const child = spawn(process.execPath, [entry], {
    cwd: tree,
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  child.stdout!.on('data', (b: Buffer) => lines.push(...b.toString().split('\n').filter(Boolean)));
  child.stderr!.on('data', (b: Buffer) => lines.push(...b.toString().split('\n').filter(Boolean)));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, lines, exit };
}

async function readyz(port: number, p: Started, timeoutMs = 30_000): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (p.child.exitCode !== null) throw new Error(`exited ${p.child.exitCode} before ready:\n${p.lines.slice(-20).join('\n')}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (res.status === 200) return res.status;
    } catch {}
    if (Date.now() > until) throw new Error(`/readyz on ${port} not 200 within ${timeoutMs} ms:\n${p.lines.slice(-20).join('\n')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('scripts/image-build.sh (the images’ build, replayed without Docker)', () => {
  it('fetches once, then installs, builds and deploys offline from the lockfile', () => {
    // pnpm would report resolving or downloading here if anything left the lockfile and the store.
    const deployPart = buildLog.slice(buildLog.indexOf('image-build.sh deploy'));
    expect(deployPart).not.toMatch(/ERR_PNPM|downloaded [1-9]/);
    for (const svc of ['gateway', 'dispatcher']) {
      expect(existsSync(join(out, svc, 'dist/main.js'))).toBe(true);
      expect(existsSync(join(out, svc, 'node_modules'))).toBe(true);
      // Compiled only: no TypeScript sources or tests of the service or of the workspace packages.
      expect(existsSync(join(out, svc, 'src'))).toBe(false);
      expect(existsSync(join(out, svc, 'test'))).toBe(false);
      expect(ownSources(join(out, svc))).toEqual([]);
    }
    expect(existsSync(join(out, 'gateway/dist/migrate.js'))).toBe(true);
    // The customer portal's build, which the gateway serves at /portal/: its page and hashed scripts.
    expect(existsSync(join(out, 'gateway/dist/portal/index.html'))).toBe(true);
    expect(readdirSync(join(out, 'gateway/dist/portal/assets')).filter((f) => /^index-[\w-]+\.js$/.test(f))).toHaveLength(1);
  });

  it.each(['gateway', 'dispatcher'])('deploys the %s with production dependencies only', (svc) => {
    const installed = installedPackages(join(out, svc));
    expect(installed.has('bullmq')).toBe(true);
    expect(installed.has('@svc/platform')).toBe(true);
    expect(DEV_ONLY.filter((name) => installed.has(name))).toEqual([]);
    // No link back into the workspace it was built from: the tree stands alone in an image.
    const manifest = JSON.parse(readFileSync(join(out, svc, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    expect(Object.values(manifest.dependencies ?? {}).filter((v) => v.startsWith('link:'))).toEqual([]);
    expect(relative(out, join(out, svc))).toBe(svc);
  });

  it('runs the deployed trees with plain node: migrations, then the gateway and the dispatcher ready, then a clean stop', async () => {
    const dbName = `svc_t_img_${randomBytes(5).toString('hex')}`;
    const databaseUrl = `${TEST_DATABASE_BASE}/${dbName}`;
    const prefix = uniquePrefix('image');
    const [port, gatewayMetrics, dispatcherMetrics, adminPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    // NODE_ENV=production, as in the image: a SECRETS_KEY is required.
    const common = { DATABASE_URL: databaseUrl, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, DB_POOL_SIZE: '4', SECRETS_KEY: randomBytes(32).toString('base64') };
    const started: Started[] = [];
    try {
      // The compose `migrate` service: the gateway's image, `node dist/migrate.js`, on a database
      // that does not exist yet (it is created, then every migration applied).
      const migrate = startNode(join(out, 'gateway'), 'dist/migrate.js', common);
      expect({ exit: await migrate.exit, log: migrate.lines.join('\n') }).toEqual({ exit: 0, log: expect.stringMatching(/migrations applied: \d{14}_foundation/) });

      // Production also requires the operator's own port for /internal/v1.
      const gateway = startNode(join(out, 'gateway'), 'dist/main.js', { ...common, PORT: String(port), GATEWAY_METRICS_PORT: String(gatewayMetrics), ADMIN_PORT: String(adminPort) });
      started.push(gateway);
      const dispatcher = startNode(join(out, 'dispatcher'), 'dist/main.js', { ...common, DISPATCHER_METRICS_PORT: String(dispatcherMetrics) });
      started.push(dispatcher);
      expect(await readyz(gatewayMetrics, gateway)).toBe(200);
      expect(await readyz(dispatcherMetrics, dispatcher)).toBe(200);
      // The API answers with the envelope (an unknown route: 404), so the bundle serves requests.
      const res = await fetch(`http://127.0.0.1:${port}/no-such-route`);
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/json/);
      // The portal, from the image's own tree: the page, then the script it names.
      const page = await fetch(`http://127.0.0.1:${port}/portal/`);
      expect(page.status).toBe(200);
      const html = await page.text();
      const script = /src="(\/portal\/assets\/[^"]+\.js)"/.exec(html)?.[1];
      expect(script).toBeDefined();
      const js = await fetch(`http://127.0.0.1:${port}${script!}`);
      // Read whole, as a browser does: an unread body would hold the connection open through the stop.
      const bytes = (await js.arrayBuffer()).byteLength;
      expect({ status: js.status, cache: js.headers.get('cache-control'), read: bytes > 0 }).toEqual({ status: 200, cache: 'public, max-age=31536000, immutable', read: true });

      for (const p of [gateway, dispatcher]) p.child.kill('SIGTERM');
      expect(await Promise.all([gateway.exit, dispatcher.exit])).toEqual([0, 0]);
    } finally {
      for (const p of started) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      const admin = new pg.Client({ connectionString: adminUrl() });
      await admin.connect();
      try {
        await admin.query(`drop database if exists "${dbName}" with (force)`);
      } finally {
        await admin.end();
      }
      await dropPrefix(prefix);
    }
  }, 90_000);
});
