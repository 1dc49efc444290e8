import type { Logger } from '@svc/observability';
import { loadDispatcherConfig, type DispatcherConfig } from '../../services/dispatcher/src/config';
import { startDispatcher, type RunningDispatcher } from '../../services/dispatcher/src/dispatcher';
import { TEST_REDIS_URL, testRedisEnv } from './env';
import type { Receiver, ReceiverOptions } from './https-receiver';
import { captureLogs } from './log-capture';
import { throughProxy } from './tcp-proxy';
import { startGatewayFixture, type GatewayFixture, type GatewayInstanceOptions } from './test-gateway';

export interface TestDispatcher extends RunningDispatcher {
  config: DispatcherConfig;
  logs: { lines: string[]; text(): string };
}

/**
 * The settings of a test dispatcher: an ephemeral metrics port, the test database and Redis prefix,
 * delivering to the loopback receiver (`receiver.test`, `other.test`) unless `env` says otherwise.
 */
export function testDispatcherEnv(opts: { databaseUrl: string; redisPrefix: string; env?: Record<string, string> }): Record<string, string> {
  return {
    DATABASE_URL: opts.databaseUrl,
    ...testRedisEnv(),
    REDIS_PREFIX: opts.redisPrefix,
    DISPATCHER_METRICS_PORT: '0',
    DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1,other.test=127.0.0.1',
    DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
    DB_POOL_SIZE: '5',
    DISPATCHER_CONCURRENCY: '20',
    ...opts.env,
  };
}

/** The very same dispatcher main.ts starts, in this process, with `testDispatcherEnv`'s settings. */
export async function startTestDispatcher(opts: {
  databaseUrl: string;
  redisPrefix: string;
  env?: Record<string, string>;
  logger?: Logger;
}): Promise<TestDispatcher> {
  const config = loadDispatcherConfig(testDispatcherEnv(opts));
  const capture = captureLogs('dispatcher');
  const running = await startDispatcher(config, { logger: opts.logger ?? capture.logger });
  return { ...running, config, logs: capture };
}

/** One dispatcher of a fixture, on the fixture's database and prefix. */
export interface DispatcherInstanceOptions {
  env?: Record<string, string>;
  logger?: Logger;
  /** Reaches Postgres and Redis through the fixture's proxies (`fx.proxies()`); the gateways do not. */
  viaProxies?: boolean;
}

export interface DispatcherFixtureOptions {
  /** The gateway's options; its rate limit is raised to 100000 a minute unless `env` sets it. */
  gateway?: GatewayInstanceOptions;
  /** The HTTPS receiver's options (one is always started). */
  receiver?: ReceiverOptions;
  /** How many dispatchers start with the fixture, each with `dispatcher`'s options. Default 1. */
  dispatchers?: number;
  dispatcher?: DispatcherInstanceOptions;
}

/**
 * What a dispatcher test file runs against: the gateway fixture (database, prefix, gateway, SQL
 * pool) with an HTTPS receiver and in-process dispatchers, all undone by one `stop()`.
 */
export interface DispatcherFixture extends GatewayFixture {
  receiver: Receiver;
  /** The first dispatcher started (with the fixture, or by `addDispatcher()`); throws while there is none. */
  readonly dispatcher: TestDispatcher;
  /** Another dispatcher on the same database and prefix (only the options given here apply to it). */
  addDispatcher(opts?: DispatcherInstanceOptions): Promise<TestDispatcher>;
  /** `testDispatcherEnv` for this fixture: the settings to start a dispatcher as a process of its own. */
  dispatcherEnv(env?: Record<string, string>): Record<string, string>;
}

export async function startDispatcherFixture(label: string, opts: DispatcherFixtureOptions = {}): Promise<DispatcherFixture> {
  const gateway = opts.gateway ?? {};
  const base = await startGatewayFixture(label, {
    ...gateway,
    env: { RATE_LIMIT_PER_MINUTE: '100000', ...gateway.env },
    receiver: opts.receiver ?? true,
  });
  let first: TestDispatcher | undefined;
  const addDispatcher = async ({ viaProxies = false, env, logger }: DispatcherInstanceOptions = {}): Promise<TestDispatcher> => {
    const through = viaProxies ? await base.proxies() : undefined;
    const dispatcher = await startTestDispatcher({
      databaseUrl: through ? throughProxy(base.database.url, through.postgres) : base.database.url,
      redisPrefix: base.prefix,
      env: through ? { ...env, REDIS_URL: throughProxy(TEST_REDIS_URL, through.redis) } : env,
      logger,
    });
    base.onStop(() => dispatcher.stop());
    first ??= dispatcher;
    return dispatcher;
  };
  try {
    for (let i = 0; i < (opts.dispatchers ?? 1); i++) await addDispatcher(opts.dispatcher);
  } catch (err) {
    await base.stop().catch(() => undefined); // the start's own error is the one to see
    throw err;
  }
  return {
    ...base,
    receiver: base.receiver!,
    get dispatcher() {
      if (!first) throw new Error('no dispatcher started yet (dispatchers: 0): use addDispatcher()');
      return first;
    },
    addDispatcher,
    dispatcherEnv: (env) => testDispatcherEnv({ databaseUrl: base.database.url, redisPrefix: base.prefix, env }),
  };
}
