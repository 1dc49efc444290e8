import { createServer as createHttpServer, type Server } from 'node:http';
import type { RedisOptions } from 'ioredis';
import { closeServer, connectRedis, createLogger, createStopStack, listen, serveMetrics, type Logger, type RedisClient } from '@svc/observability';
import { JOBS, lateExtraCaCerts, openDatabase, queueFor, systemClock, type Clock } from '@svc/schema';
import { createWebhookSender } from '@svc/webhook-sender';
import type { GatewayConfig } from './config';
import { createApp } from './app';
import { answerClientErrors } from './http/client-error.handler';
import type { GatewayDeps } from './deps';
import { TokenCache } from './auth/token-cache';
import { RateLimiter } from './rate-limit/rate-limiter';
import { createGatewayMetrics } from './observability/gateway-metrics';
import { createOutboxRelay, type OutboxRelayOptions } from './outbox/outbox.relay';
import { pendingStats } from './outbox/outbox.repository';
import { createResendRelay } from './webhooks/resend.relay';
import { createIdempotencyRetention, type IdempotencyRetention } from './idempotency/idempotency.retention';

export interface GatewayOptions {
  clock?: Clock;
  logger?: Logger;
  /** Tests: wraps the queue the outbox relay adds to (e.g. to make one add fail). */
  wrapRelayQueue?: (queue: OutboxRelayOptions['queue']) => OutboxRelayOptions['queue'];
}

export interface RunningGateway {
  deps: GatewayDeps;
  server: Server;
  metricsServer: Server;
  port: number;
  metricsPort: number;
  /** Removes idempotency keys past RETENTION_DAYS, every 10 minutes. */
  idempotencyRetention: IdempotencyRetention;
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

    const redis = await connectRedis(config, 'commands', undo, 'redis'); // the request path: a 503, not a wait
    const subscriber = await connectRedis(config, 'subscriber', undo, 'redis subscriber');
    // BullMQ builds a cluster client only from an instance, so on a cluster the queues share the
    // commands client (closed after them: undo runs newest first); on one server, their own.
    const queueConnection = (): RedisClient | RedisOptions =>
      redis.isCluster ? redis : ({ url: config.redisUrl, enableOfflineQueue: false, maxRetriesPerRequest: 1 } as RedisOptions);

    const eventsQueue = queueFor(JOBS.shipmentEvent, {
      connection: queueConnection(),
      prefix: config.redisPrefix,
    });
    eventsQueue.on('error', () => undefined);
    undo.push('events queue', () => eventsQueue.close());
    // Resends are deliveries: their first attempts go straight to the dispatchers' queue.
    const deliveryQueue = queueFor(JOBS.delivery, {
      connection: queueConnection(),
      prefix: config.redisPrefix,
    });
    deliveryQueue.on('error', () => undefined);
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
    const idempotencyRetention = createIdempotencyRetention({ db, logger, retentionDays: config.retentionDays });
    idempotencyRetention.start();
    undo.push('idempotency retention', () => idempotencyRetention.stop());

    const sender = createWebhookSender({
      hostMap: config.dispatchHostMap,
      allowCidrs: config.dispatchAllowCidrs,
      extraCaFile: lateExtraCaCerts(),
    });
    undo.push('sender', () => sender.close());

    const deps: GatewayDeps = {
      config,
      db,
      redis,
      tokenCache,
      rateLimiter: new RateLimiter(redis, config.redisPrefix, config.rateLimitPerMinute),
      outboxRelay,
      resendRelay,
      sender,
      metrics,
      logger,
      clock,
    };

    const { server: metricsServer, port: metricsPort } = await serveMetrics(metrics.registry, config.metricsPort, { postgres: pool, redis }, undo);

    const server = createServer(deps);
    const port = await listen(server, config.port);
    undo.push('http server', () => closeServer(server));

    logger.info({ port, metricsPort }, 'gateway listening');
    return { deps, server, metricsServer, port, metricsPort, idempotencyRetention, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function createServer(deps: GatewayDeps): Server {
  const app = createApp(deps);
  // Node's own Host check answers an empty 400; the access log refuses it with the envelope instead.
  const server = createHttpServer({ keepAliveTimeout: 65_000, requireHostHeader: false }, app);
  server.headersTimeout = 66_000;
  answerClientErrors(server, deps.logger, deps.metrics);
  return server;
}
