import pg from 'pg';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent';
import { systemClock, type Clock } from '@svc/schema';
import type { Logger } from '@svc/observability';
import { loadGatewayConfig, type GatewayConfig } from '../../services/gateway/src/config';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../services/gateway/src/gateway';
import { TEST_REDIS_URL } from './env';
import { dropPrefix, uniquePrefix } from './redis-prefix';
import { createTestDatabase, type TestDatabase } from './test-database';
import { captureLogs } from './log-capture';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export interface TestGateway extends RunningGateway {
  http: TestAgent;
  logs: { lines: string[]; text(): string };
  admin(method: 'get' | 'post' | 'patch' | 'delete', path: string, body?: unknown): Promise<request.Response>;
}

/** The very same gateway main.ts starts, on ephemeral ports, against a test database and prefix. */
export async function startTestGateway(opts: {
  databaseUrl: string;
  redisPrefix: string;
  env?: Record<string, string>;
  clock?: Clock;
  logger?: Logger;
  wrapRelayQueue?: GatewayOptions['wrapRelayQueue'];
}): Promise<TestGateway> {
  const config: GatewayConfig = loadGatewayConfig({
    DATABASE_URL: opts.databaseUrl,
    REDIS_URL: TEST_REDIS_URL,
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
  const http = request(`http://127.0.0.1:${gw.port}`);
  return {
    ...gw,
    http,
    logs: capture,
    admin(method, path, body) {
      const r = http[method](`/internal/v1${path}`).set('Authorization', `Bearer ${ADMIN_TOKEN}`);
      return body === undefined ? r : r.send(body as object);
    },
  };
}

/** What most gateway test files run against: their own database, Redis prefix, gateway and SQL pool. */
export interface GatewayFixture {
  database: TestDatabase;
  prefix: string;
  gw: TestGateway;
  /** For checking rows directly (two connections). */
  pool: pg.Pool;
  /** Undoes all of it; safe after a start that failed halfway. */
  stop(): Promise<void>;
}

export async function startGatewayFixture(
  label: string,
  opts: Omit<Parameters<typeof startTestGateway>[0], 'databaseUrl' | 'redisPrefix'> = {},
): Promise<GatewayFixture> {
  const database = await createTestDatabase();
  const prefix = uniquePrefix(label);
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  const stop = async (gw?: TestGateway): Promise<void> => {
    await gw?.stop();
    await pool.end();
    await dropPrefix(prefix);
    await database.drop();
  };
  let gw: TestGateway;
  try {
    gw = await startTestGateway({ ...opts, databaseUrl: database.url, redisPrefix: prefix });
  } catch (err) {
    await stop();
    throw err;
  }
  return { database, prefix, gw, pool, stop: () => stop(gw) };
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
