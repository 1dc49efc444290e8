import { Queue } from 'bullmq';
import pg from 'pg';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent';
import { systemClock, type Clock } from '@svc/contracts';
import type { Logger } from '@svc/observability';
import { loadGatewayConfig, type GatewayConfig } from '../../services/gateway/src/config';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../services/gateway/src/gateway';
import { TEST_REDIS_CLUSTER_NODES, TEST_REDIS_URL, testKeyPrefix, testRedisEnv } from './env';
import { startReceiver, type Receiver, type ReceiverOptions } from './https-receiver';
import { captureLogs } from './log-capture';
import { dropPrefix, testRedisClient, uniquePrefix } from './redis-prefix';
import { hostPort, startTcpProxy, throughProxy, type TcpProxy } from './tcp-proxy';
import { createTeardown } from './teardown';
import { createTestDatabase, testPool, type TestDatabase } from './test-database';
import { checkedAgent, sharedContractChecker } from './openapi-contract';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export interface TestGateway extends RunningGateway {
  http: TestAgent;
  /** Where `/internal/v1` is served: the admin port with ADMIN_PORT set, else `http`. */
  adminHttp: TestAgent;
  logs: { lines: string[]; text(): string };
  admin(method: 'get' | 'post' | 'patch' | 'delete', path: string, body?: unknown): Promise<request.Response>;
}

export interface TestGatewayOptions {
  databaseUrl: string;
  redisPrefix: string;
  env?: Record<string, string>;
  clock?: Clock;
  logger?: Logger;
  wrapRelayQueue?: GatewayOptions['wrapRelayQueue'];
}

/** The very same gateway main.ts starts, on ephemeral ports, against a test database and prefix. */
export async function startTestGateway(opts: TestGatewayOptions): Promise<TestGateway> {
  const config: GatewayConfig = loadGatewayConfig({
    DATABASE_URL: opts.databaseUrl,
    ...testRedisEnv(),
    REDIS_PREFIX: opts.redisPrefix,
    PORT: '0',
    GATEWAY_METRICS_PORT: '0',
    ADMIN_TOKEN,
    DB_POOL_SIZE: '10',
    ...opts.env,
  });
  const capture = captureLogs('gateway');
  const gw = await startGateway(config, {
    clock: opts.clock ?? systemClock,
    logger: opts.logger ?? capture.logger,
    wrapRelayQueue: opts.wrapRelayQueue,
  });
  // Every answer a test receives through `http` is checked against openapi/openapi.yaml: an answer
  // that drifts from the document fails the test that got it (issue 14).
  const checker = await sharedContractChecker();
  const http = checkedAgent(request(`http://127.0.0.1:${gw.port}`), checker);
  const adminHttp = gw.adminPort === undefined ? http : checkedAgent(request(`http://127.0.0.1:${gw.adminPort}`), checker);
  return {
    ...gw,
    http,
    adminHttp,
    logs: capture,
    admin(method, path, body) {
      const r = adminHttp[method](`/internal/v1${path}`).set('Authorization', `Bearer ${ADMIN_TOKEN}`);
      return body === undefined ? r : r.send(body as object);
    },
  };
}

/** One gateway of a fixture: startTestGateway's options, on the fixture's database and prefix. */
export interface GatewayInstanceOptions extends Omit<TestGatewayOptions, 'databaseUrl' | 'redisPrefix'> {
  /** Another Postgres for this instance only (e.g. one that does not answer). Default: the fixture's database. */
  databaseUrl?: string;
  /** Reaches Postgres and Redis through the fixture's proxies (`fx.proxies()`), which the test can cut. */
  viaProxies?: boolean;
}

export interface GatewayFixtureOptions extends GatewayInstanceOptions {
  /** Also serves an HTTPS webhook receiver (`fx.receiver`); `true` for the default one. */
  receiver?: true | ReceiverOptions;
}

/** Loopback proxies in front of the real Postgres and Redis, for the instances started `viaProxies`. */
export interface Proxies {
  postgres: TcpProxy;
  redis: TcpProxy;
}

/**
 * What a test file runs against: its own database, Redis prefix, gateway(s) and SQL pool, and one
 * `stop()` that undoes all of it, newest first.
 */
export interface GatewayFixture {
  database: TestDatabase;
  prefix: string;
  /** The gateway started with the fixture; `addGateway()` starts more. */
  gw: TestGateway;
  /** For checking rows directly (two connections). */
  pool: pg.Pool;
  /** Only with the `receiver` option. */
  receiver?: Receiver;
  /** Another gateway on the same database and prefix (only the options given here apply to it). */
  addGateway(opts?: GatewayInstanceOptions): Promise<TestGateway>;
  /** The proxies the `viaProxies` instances use, started on first use. */
  proxies(): Promise<Proxies>;
  /** A BullMQ queue on the fixture's prefix, to look at its jobs. */
  queue<T = unknown>(name: string): Queue<T>;
  /** Registers the undo of something the test built on top: stop() runs it before what came earlier. */
  onStop(step: () => unknown): void;
  /** Undoes all of it; safe after a start that failed halfway, and to call twice. */
  stop(): Promise<void>;
}

export async function startGatewayFixture(label: string, opts: GatewayFixtureOptions = {}): Promise<GatewayFixture> {
  const { receiver: receiverOptions, ...first } = opts;
  const teardown = createTeardown();
  try {
    const database = await createTestDatabase();
    teardown.push(() => database.drop());
    const prefix = uniquePrefix(label);
    teardown.push(() => dropPrefix(prefix));
    const pool = testPool(database.url);
    teardown.push(() => pool.end());
    let receiver: Receiver | undefined;
    if (receiverOptions !== undefined) {
      const started = await startReceiver(receiverOptions === true ? {} : receiverOptions);
      teardown.push(() => started.close());
      receiver = started;
    }

    let proxies: Promise<Proxies> | undefined;
    const startProxies = async (): Promise<Proxies> => {
      const postgres = await startTcpProxy(hostPort(database.url));
      teardown.push(() => postgres.close());
      const redis = await startTcpProxy(hostPort(TEST_REDIS_URL));
      teardown.push(() => redis.close());
      return { postgres, redis };
    };
    const addGateway = async ({ databaseUrl = database.url, viaProxies = false, env, ...rest }: GatewayInstanceOptions = {}) => {
      const through = viaProxies ? await (proxies ??= startProxies()) : undefined;
      const gw = await startTestGateway({
        ...rest,
        databaseUrl: through ? throughProxy(databaseUrl, through.postgres) : databaseUrl,
        redisPrefix: prefix,
        env: through ? { ...env, REDIS_URL: throughProxy(TEST_REDIS_URL, through.redis) } : env,
      });
      teardown.push(() => gw.stop());
      return gw;
    };

    return {
      database,
      prefix,
      gw: await addGateway(first),
      pool,
      receiver,
      addGateway,
      proxies: () => (proxies ??= startProxies()),
      queue<T>(name: string) {
        // BullMQ takes a cluster only as a client instance, which the queue does not close itself.
        const cluster = TEST_REDIS_CLUSTER_NODES ? testRedisClient() : undefined;
        if (cluster) teardown.push(() => cluster.quit());
        const queue = new Queue<T>(name, { connection: cluster ?? { url: TEST_REDIS_URL }, prefix: testKeyPrefix(prefix) });
        // Closed only after its Redis check (see startGateway): a queue closed mid-check crashes later.
        teardown.push(() => queue.waitUntilReady().then(() => queue.close()));
        return queue;
      },
      onStop: (step) => teardown.push(step),
      stop: () => teardown.run(),
    };
  } catch (err) {
    await teardown.run().catch(() => undefined); // the start's own error is the one to see
    throw err;
  }
}

export interface Company {
  id: string;
  live: string;
  test: string;
}

/** A verified company with its token pair, made through the portal's internal routes. */
export async function createCompany(gw: TestGateway, fields: Record<string, unknown> = {}): Promise<Company> {
  const created = await gw.admin('post', '/empresas', { nombre: 'Empresa de prueba', verificada: true, ...fields });
  if (created.status !== 201) throw new Error(`company: ${created.status} ${JSON.stringify(created.body)}`);
  const id = (created.body as { data: { id: string } }).data.id;
  const tokens = await gw.admin('post', `/empresas/${id}/tokens`);
  if (tokens.status !== 201) throw new Error(`tokens: ${tokens.status} ${JSON.stringify(tokens.body)}`);
  const { live, test } = (tokens.body as { data: { live: string; test: string } }).data;
  return { id, live, test };
}

/** A branch of a company (branches must be enabled) with its token pair. */
export async function createBranch(gw: TestGateway, empresaId: string, nombre = 'Sucursal'): Promise<Company & { empresaId: string }> {
  const created = await gw.admin('post', `/empresas/${empresaId}/sucursales`, { nombre });
  if (created.status !== 201) throw new Error(`branch: ${created.status} ${JSON.stringify(created.body)}`);
  const id = (created.body as { data: { id: string } }).data.id;
  const tokens = await gw.admin('post', `/empresas/${empresaId}/sucursales/${id}/tokens`);
  if (tokens.status !== 201) throw new Error(`branch tokens: ${tokens.status} ${JSON.stringify(tokens.body)}`);
  const { live, test } = (tokens.body as { data: { live: string; test: string } }).data;
  return { id, empresaId, live, test };
}

export const bearer = (token: string): string => `Bearer ${token}`;
