import { createServer as createHttpServer, type Server } from 'node:http';
import { Queue } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { closeServer, createLogger, createMetricsServer, createStopStack, listen, type Logger } from '@svc/observability';
import { createDb, createPool, JOBS, lateExtraCaCerts, systemClock, type Clock, type ShipmentEventJob } from '@svc/schema';
import { createWebhookSender } from '@svc/webhook-sender';
import type { GatewayConfig } from './config';
import { createApp } from './app';
import type { GatewayDeps } from './deps';
import { TokenCache } from './auth/token-cache';
import { RateLimiter } from './rate-limit/rate-limiter';
import { createGatewayMetrics } from './observability/gateway-metrics';
import { createOutboxRelay, type OutboxRelayOptions } from './outbox/outbox.relay';
import { pendingStats } from './outbox/outbox.repository';

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
  /** Undoes start in reverse order; each step on its own, so one failure does not skip the rest. */
  stop(): Promise<void>;
}

/** Redis for request-path commands: fail fast (503) instead of queueing while Redis is away. */
export function requestRedisOptions(): RedisOptions {
  return { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000, lazyConnect: true };
}



/** Builds every dependency from the config, then serves the API and the metrics port. */
export async function startGateway(config: GatewayConfig, options: GatewayOptions = {}): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger('gateway', config.logLevel);
  const clock = options.clock ?? systemClock;
  const undo = createStopStack(logger);
  const stop = (): Promise<void> => undo.stop();

  try {
    const pool = createPool({ connectionString: config.databaseUrl, max: config.dbPoolSize, applicationName: 'gateway' });
    const db = createDb(pool);
    undo.push('db', () => db.destroy());

    const redis = new Redis(config.redisUrl, requestRedisOptions());
    redis.on('error', () => undefined); // reported by the failing command and by /readyz
    undo.push('redis', () => redis.quit().catch(() => redis.disconnect()));
    await redis.connect();
    const subscriber = new Redis(config.redisUrl, { lazyConnect: true });
    subscriber.on('error', () => undefined);
    undo.push('redis subscriber', () => subscriber.quit().catch(() => subscriber.disconnect()));
    await subscriber.connect();

    const eventsQueue = new Queue<ShipmentEventJob>(JOBS.shipmentEvent.queue, {
      connection: { url: config.redisUrl, enableOfflineQueue: false, maxRetriesPerRequest: 1 } as RedisOptions,
      prefix: config.redisPrefix,
      defaultJobOptions: JOBS.shipmentEvent.options,
    });
    eventsQueue.on('error', () => undefined);
    undo.push('events queue', () => eventsQueue.close());

    const tokenCache = new TokenCache(redis, subscriber, config.redisPrefix);
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
      eventsQueue,
      outboxRelay,
      sender,
      metrics,
      logger,
      clock,
    };

    const metricsServer = createMetricsServer(metrics.registry, [
      { name: 'postgres', check: async () => void (await pool.query('select 1')) },
      { name: 'redis', check: async () => void (await redis.ping()) },
    ]);
    const metricsPort = await listen(metricsServer, config.metricsPort);
    undo.push('metrics server', () => closeServer(metricsServer));

    const server = createServer(deps);
    const port = await listen(server, config.port);
    undo.push('http server', () => closeServer(server));

    logger.info({ port, metricsPort }, 'gateway listening');
    return { deps, server, metricsServer, port, metricsPort, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function createServer(deps: GatewayDeps): Server {
  const app = createApp(deps);
  const server = createHttpServer({ keepAliveTimeout: 65_000 }, app);
  server.headersTimeout = 66_000;
  return server;
}
