import { createServer as createHttpServer, type Server } from 'node:http';
import type { RedisOptions } from 'ioredis';
import {
  closeServer,
  connectRedis,
  createSecretBox,
  createStopStack,
  senderSettings,
  listen,
  openDatabase,
  checkQueueShards,
  prepareSecretsAtRest,
  serveMetrics,
  shardedQueueFor,
  type RedisClient,
} from '@svc/platform';
import { createLogger, type Logger } from '@svc/observability';
import { JOBS, systemClock, type Clock } from '@svc/contracts';
import { createWebhookSender } from '@svc/webhook-sender';
import type { GatewayConfig } from './config';
import { createAdminApp, createApp } from './app';
import { answerClientErrors } from './http/client-error.handler';
import { isUnavailableError } from './http/unavailable';
import type { GatewayDeps } from './deps';
import { TokenCache } from './auth/token-cache';
import { AdminAuthLimiter, API_AUTH_FAILURES_PER_WINDOW, API_AUTH_WINDOW_MS } from './auth/admin-auth.limiter';
import { AuthFailureLimiter } from './auth/auth-failure.limiter';
import { clientAddressResolver } from './http/client-address';
import { PORTAL_SESSIONS_PER_MINUTE } from './rate-limit/portal-session.limit';
import { RateLimiter } from './rate-limit/rate-limiter';
import { createGatewayMetrics } from './observability/gateway-metrics';
import { createOutboxRelay, type OutboxRelayOptions } from './outbox/outbox.relay';
import { pendingStats } from './outbox/outbox.repository';
import { createResendRelay } from './deliveries/resend.relay';
import { createResendLimiter } from './deliveries/resend.limiter';
import { createIdempotencyRetention, type IdempotencyRetention } from './idempotency/idempotency.retention';
import { createActivityRetention, type ActivityRetention } from './activity/activity.retention';
import { createSecretsUpkeep, type SecretsUpkeep } from './webhooks/secrets.upkeep';

export interface GatewayOptions {
  clock?: Clock;
  logger?: Logger;
  /** Tests: wraps the queue the outbox relay adds to (e.g. to make one add fail). */
  wrapRelayQueue?: (queue: OutboxRelayOptions['queue']) => OutboxRelayOptions['queue'];
}

export interface RunningGateway {
  deps: GatewayDeps;
  /** The public listener (PORT). */
  server: Server;
  metricsServer: Server;
  port: number;
  metricsPort: number;
  /** With ADMIN_PORT: the listener that alone serves `/internal/v1`, and its port. */
  adminServer: Server | undefined;
  adminPort: number | undefined;
  /** Removes expired idempotency keys (24 h) and their answers, every 10 minutes. */
  idempotencyRetention: IdempotencyRetention;
  /** Removes activity entries past RETENTION_DAYS, every hour. */
  activityRetention: ActivityRetention;
  /** Erases previous secrets past their overlap and seals any left in plaintext, every minute. */
  secretsUpkeep: SecretsUpkeep;
  /** Undoes start in reverse order; each step on its own, so one failure does not skip the rest. */
  stop(): Promise<void>;
}

/** Builds every dependency from the config, then serves the API and the metrics port. */
export async function startGateway(config: GatewayConfig, options: GatewayOptions = {}): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger('gateway', config.logLevel);
  const clock = options.clock ?? systemClock;
  const undo = createStopStack(logger, { timeoutMs: config.shutdownTimeoutMs });
  const stop = (): Promise<void> => undo.stop();

  try {
    const { pool, db } = openDatabase(config, 'gateway', undo);
    // Before anything serves: a webhook's secret must open, and none may stay in plaintext. The
    // gateway still starts while Postgres is away (it answers 503 until it is back): the upkeep
    // below does the same pass every minute, and a secret that does not open is never used.
    const secrets = createSecretBox(config.secretsKeys);
    await prepareSecretsAtRest(db, secrets, logger).catch((err: unknown) => {
      if (!isUnavailableError(err)) throw err;
      logger.warn({ err: { message: (err as Error).message } }, 'Postgres is unreachable: the webhook secrets pass waits for the secrets upkeep');
    });
    // Before anything is queued: on other shards than the stack's, its events would reach no
    // dispatcher. With Postgres away nothing can be committed, hence queued, until it is back.
    await checkQueueShards(db, config.queueShards).catch((err: unknown) => {
      if (!isUnavailableError(err)) throw err;
      logger.warn({ err: { message: (err as Error).message } }, 'Postgres is unreachable: QUEUE_SHARDS is not checked against the stack\'s');
    });

    const redis = await connectRedis(config, 'commands', undo, 'redis'); // the request path: a 503, not a wait
    const subscriber = await connectRedis(config, 'subscriber', undo, 'redis subscriber');
    // BullMQ builds a cluster client only from an instance, so on a cluster the queues share the
    // commands client (closed after them: undo runs newest first); on one server, their own.
    const queueConnection = (): RedisClient | RedisOptions =>
      redis.isCluster ? redis : ({ url: config.redisUrl, enableOfflineQueue: false, maxRetriesPerRequest: 1 } as RedisOptions);

    // Every shard's queue: each event goes to its company's shard (the queues route it).
    const eventsQueue = shardedQueueFor(JOBS.shipmentEvent, { connection: queueConnection(), layout: config });
    undo.push('events queue', () => eventsQueue.close());
    // Resends are deliveries: their first attempts go straight to the dispatchers' queue.
    const deliveryQueue = shardedQueueFor(JOBS.delivery, { connection: queueConnection(), layout: config });
    undo.push('delivery queue', () => deliveryQueue.close());
    // A queue checks its Redis (INFO) after construction. Closing it before that check ends leaves
    // the check to fail later on the quit client, where BullMQ reports it as an 'error' nobody
    // hears any more (a crash at shutdown; seen on a cluster, whose retry delays the check; upstream:
    // https://github.com/taskforcesh/bullmq/issues/3546, open). Started means checked.
    await Promise.all([eventsQueue.waitUntilReady(), deliveryQueue.waitUntilReady()]);

    // A test's clock also ages the token cache, so its 60 s can be tested without waiting them.
    const tokenCache = new TokenCache(redis, subscriber, config.redisPrefix, options.clock ? { now: () => clock.now().getTime() } : {});
    await tokenCache.start();
    undo.push('token cache', () => tokenCache.stop());

    const metrics = createGatewayMetrics(() => pendingStats(db));
    const outboxRelay = createOutboxRelay({
      db,
      queue: options.wrapRelayQueue ? options.wrapRelayQueue(eventsQueue) : eventsQueue,
      logger,
      metrics,
    });
    outboxRelay.start();
    undo.push('outbox relay', () => outboxRelay.stop());
    const resendRelay = createResendRelay({ queue: deliveryQueue, logger });
    undo.push('resend relay', () => resendRelay.drain());
    const idempotencyRetention = createIdempotencyRetention({ db, logger });
    idempotencyRetention.start();
    undo.push('idempotency retention', () => idempotencyRetention.stop());
    const activityRetention = createActivityRetention({ db, logger, retentionDays: config.retentionDays });
    activityRetention.start();
    undo.push('activity retention', () => activityRetention.stop());
    const secretsUpkeep = createSecretsUpkeep({ db, secrets, logger });
    secretsUpkeep.start();
    undo.push('secrets upkeep', () => secretsUpkeep.stop());

    const sender = createWebhookSender(senderSettings(config));
    undo.push('sender', () => sender.close());

    let publicPort = config.port;
    const deps: GatewayDeps = {
      config,
      db,
      redis,
      tokenCache,
      rateLimiter: new RateLimiter(redis, config.redisPrefix, config.rateLimitPerMinute),
      portalRateLimiter: new RateLimiter(redis, config.redisPrefix, config.portalRateLimitPerMinute),
      resendLimiter: createResendLimiter(redis, config.redisPrefix),
      adminAuthLimiter: new AdminAuthLimiter(redis, config.redisPrefix),
      authFailureLimiter: new AuthFailureLimiter(redis, config.redisPrefix, API_AUTH_FAILURES_PER_WINDOW, API_AUTH_WINDOW_MS, 'auth:failures'),
      portalSessionLimiter: new RateLimiter(redis, config.redisPrefix, PORTAL_SESSIONS_PER_MINUTE, 60_000, 'portal:sesiones'),
      clientAddress: clientAddressResolver(config.trustedProxies),
      // PORT, or the port the public listener took when PORT is 0 (known once it listens, before
      // any request can ask).
      publicPort: () => publicPort,
      outboxRelay,
      resendRelay,
      sender,
      secrets,
      metrics,
      logger,
      clock,
    };

    const { server: metricsServer, port: metricsPort } = await serveMetrics(
      metrics.registry,
      config.metricsPort,
      { postgres: pool, redis },
      undo,
      'GATEWAY_METRICS_PORT (gateway)',
      config.metricsHost,
    );

    // The operator's door first: the public port never serves a moment without its 404 for it.
    const separateAdmin = config.adminPort !== undefined;
    let adminServer: Server | undefined;
    let adminPort: number | undefined;
    if (config.adminPort !== undefined) {
      const admin = createServer(createAdminApp(deps), deps);
      adminPort = await listen(admin, config.adminPort, config.adminHost, 'ADMIN_PORT (gateway)');
      adminServer = admin;
      undo.push('admin http server', () => closeServer(admin));
    }

    const server = createServer(createApp(deps, { internal: !separateAdmin }), deps);
    const port = await listen(server, config.port, undefined, 'PORT (gateway)');
    publicPort = port;
    undo.push('http server', () => closeServer(server));

    logger.info({ port, metricsPort, ...(separateAdmin ? { adminPort, adminHost: config.adminHost } : {}) }, 'gateway listening');
    return { deps, server, metricsServer, port, metricsPort, adminServer, adminPort, idempotencyRetention, activityRetention, secretsUpkeep, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * How long a client may take to send a request's headers: a slow-headers client (slowloris) holds
 * a socket for at most this. A real client sends its headers in one packet; 10 s covers a bad
 * mobile link. Node's default is 60 s.
 */
export const HEADERS_TIMEOUT_MS = 10_000;
/**
 * How long a client may take to send a whole request, body included (at most 1 MiB): 30 s is 35
 * KB/s, a slow link, and bounds a slow-body client. Node's default is 300 s.
 */
export const REQUEST_TIMEOUT_MS = 30_000;
/**
 * How long an idle keep-alive connection stays open between requests. Long enough that a client
 * sending a request every few seconds keeps its TLS and TCP setup; short enough that idle clients
 * do not hold sockets by the thousand. A proxy in front must close idle connections sooner than
 * this (or it may reuse one the gateway is closing).
 */
export const KEEP_ALIVE_TIMEOUT_MS = 15_000;
/**
 * Connections one gateway process holds at once; past it, a new connection is closed as it is
 * accepted, so a flood of sockets cannot starve the ones being served of memory and descriptors.
 * Far above the keep-alive connections that saturate a process's core (bench:gateway), each a few
 * tens of KB, so the bound only ever meets a flood.
 */
export const MAX_CONNECTIONS = 5_000;
/**
 * How often Node looks for connections past the two timeouts above: a timeout takes effect up to
 * this late. Node's default of 30 s would make a 10 s headers timeout a 40 s one.
 */
export const CONNECTIONS_CHECK_INTERVAL_MS = 1_000;

function createServer(app: ReturnType<typeof createApp>, deps: GatewayDeps): Server {
  // Node's own Host check answers an empty 400; the access log refuses it with the envelope instead.
  const server = createHttpServer(
    { keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, connectionsCheckingInterval: CONNECTIONS_CHECK_INTERVAL_MS, requireHostHeader: false },
    app,
  );
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.maxConnections = MAX_CONNECTIONS;
  answerClientErrors(server, deps.logger, deps.metrics);
  return server;
}
