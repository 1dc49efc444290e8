import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { closeServer, createLogger, createMetricsServer, createStopStack, listen, type Logger } from '@svc/observability';
import { createDb, createPool, JOBS, lateExtraCaCerts, type DeliveryJob, type ShipmentEventJob } from '@svc/schema';
import { createWebhookSender } from '@svc/webhook-sender';
import type { DispatcherConfig } from './config';
import { createFanOut } from './fan-out.worker';
import { createDeliveryProcessor } from './delivery.worker';
import { createDispatcherMetrics, QUEUE_STATES, type DispatcherMetrics } from './observability/dispatcher-metrics';

export interface RunningDispatcher {
  metricsPort: number;
  metrics: DispatcherMetrics;
  /** Undoes start in reverse order, each step on its own: in-flight deliveries finish first. */
  stop(): Promise<void>;
}

/** Event fan-outs taken at once; they are batched together, so this is the batch's upper size. */
const FANOUT_CONCURRENCY = 64;

export interface DispatcherOptions {
  logger?: Logger;
}

/**
 * Builds every dependency from the config and starts consuming: the fan-out worker (events →
 * deliveries) and the delivery worker (one attempt per job run, `DISPATCHER_CONCURRENCY` in flight).
 * Any number of dispatchers may run side by side on one Redis prefix: BullMQ hands each job to one
 * of them, and a dead one's jobs move on after `DISPATCHER_LOCK_DURATION_MS`.
 */
export async function startDispatcher(config: DispatcherConfig, options: DispatcherOptions = {}): Promise<RunningDispatcher> {
  const logger = options.logger ?? createLogger('dispatcher', config.logLevel);
  const undo = createStopStack(logger);
  const stop = (): Promise<void> => undo.stop();

  try {
    const pool = createPool({ connectionString: config.databaseUrl, max: config.dbPoolSize, applicationName: 'dispatcher' });
    const db = createDb(pool);
    undo.push('db', () => db.destroy());

    // Commands that must not hang while Redis is away (queue adds, counts, readiness): fail fast.
    const commands = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000, lazyConnect: true });
    commands.on('error', () => undefined); // reported by the failing command and by /readyz
    undo.push('redis', () => commands.quit().catch(() => commands.disconnect()));
    await commands.connect();
    // Workers block on Redis and must ride out an outage: BullMQ requires maxRetriesPerRequest null.
    const workerRedis = new Redis(config.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
    workerRedis.on('error', () => undefined);
    undo.push('worker redis', () => workerRedis.quit().catch(() => workerRedis.disconnect()));
    await workerRedis.connect();

    const sender = createWebhookSender({
      hostMap: config.dispatchHostMap,
      allowCidrs: config.dispatchAllowCidrs,
      extraCaFile: lateExtraCaCerts(),
    });
    undo.push('sender', () => sender.close());

    const eventsQueue = new Queue<ShipmentEventJob>(JOBS.shipmentEvent.queue, { connection: commands, prefix: config.redisPrefix });
    eventsQueue.on('error', () => undefined);
    const deliveryQueue = new Queue<DeliveryJob>(JOBS.delivery.queue, {
      connection: commands,
      prefix: config.redisPrefix,
      defaultJobOptions: JOBS.delivery.options,
    });
    deliveryQueue.on('error', () => undefined);
    undo.push('queues', () => Promise.all([eventsQueue.close(), deliveryQueue.close()]));

    const metrics = createDispatcherMetrics(async () => {
      const [events, deliveries] = await Promise.all([
        eventsQueue.getJobCounts(...QUEUE_STATES),
        deliveryQueue.getJobCounts(...QUEUE_STATES),
      ]);
      return { [JOBS.shipmentEvent.queue]: events, [JOBS.delivery.queue]: deliveries };
    });

    const fanOut = createFanOut({ db, deliveryQueue });
    const deliveries = createDeliveryProcessor({ db, sender, metrics, logger });

    const workerOptions = {
      connection: workerRedis,
      prefix: config.redisPrefix,
      // A process that dies holding jobs stops renewing their locks; after lockDuration the stalled
      // check (every stalledInterval) moves them back to waiting for another dispatcher. Two stalls
      // are tolerated, so a job survives two crashes before it is failed.
      lockDuration: config.lockDurationMs,
      stalledInterval: config.lockDurationMs,
      maxStalledCount: 2,
    };
    const fanOutWorker = new Worker<ShipmentEventJob, number>(JOBS.shipmentEvent.queue, (job) => fanOut.process(job), {
      ...workerOptions,
      concurrency: FANOUT_CONCURRENCY,
    });
    const deliveryWorker = new Worker<DeliveryJob>(JOBS.delivery.queue, (job) => deliveries.process(job), {
      ...workerOptions,
      concurrency: config.concurrency,
    });
    for (const [name, worker] of [
      ['fan-out', fanOutWorker],
      ['delivery', deliveryWorker],
    ] as const) {
      worker.on('error', (err) => logger.warn({ worker: name, err: err.message }, 'worker error'));
    }
    fanOutWorker.on('failed', (job, err) => {
      logger.warn({ eventId: job?.data.eventId, requestId: job?.data.requestId, err: err.message }, 'fan-out failed; will retry');
    });
    // close() stops taking jobs and waits for those in flight; their batches commit before they end.
    undo.push('workers', async () => {
      await Promise.all([fanOutWorker.close(), deliveryWorker.close()]);
      await Promise.all([fanOut.drain(), deliveries.drain()]);
    });

    const metricsServer = createMetricsServer(metrics.registry, [
      { name: 'postgres', check: async () => void (await pool.query('select 1')) },
      { name: 'redis', check: async () => void (await commands.ping()) },
    ]);
    const metricsPort = await listen(metricsServer, config.metricsPort);
    undo.push('metrics server', () => closeServer(metricsServer));

    // The queues too: BullMQ drops a shared connection's listeners when it closes, so a queue closed
    // while its first checks were still running would raise its late error with no one to hear it.
    await Promise.all([eventsQueue, deliveryQueue, fanOutWorker, deliveryWorker].map((q) => q.waitUntilReady()));
    logger.info({ metricsPort, concurrency: config.concurrency, prefix: config.redisPrefix }, 'dispatcher started');
    return { metricsPort, metrics, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
