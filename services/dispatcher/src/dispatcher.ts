import { UnrecoverableError, Worker } from 'bullmq';
import {
  coalesceWrites,
  connectRedis,
  createSecretBox,
  createStopStack,
  lateExtraCaCerts,
  openDatabase,
  prepareSecretsAtRest,
  queueFor,
  serveMetrics,
} from '@svc/platform';
import { createLogger, type Logger } from '@svc/observability';
import { JOBS, type EventName } from '@svc/contracts';
import { createWebhookSender } from '@svc/webhook-sender';
import type { DispatcherConfig } from './config';
import { createFanOut } from './fan-out/fan-out.worker';
import { createDeliveryPipeline } from './deliveries/delivery.pipeline';
import { createDispatcherMetrics, QUEUE_STATES, type DispatcherMetrics } from './observability/dispatcher-metrics';
import { createReconciler, type Reconciler } from './reconcile/reconciler';
import { createDeferralScheduler } from './reconcile/deferral.scheduler';
import { createRetention, type Retention } from './retention/retention.task';
import { createWebhookSlots } from './deliveries/webhook-slots.limiter';
import { createInFlightGovernor } from './deliveries/in-flight.governor';
import { oldestOverdueAge } from './deliveries/delivery.repository';
import { oldestUnfannedAge } from './outbox/outbox.repository';
import { createPostgresWatch } from './support/postgres-watch';

/**
 * Jobs the delivery worker takes per send slot. Each of its jobs holds its send (a dead endpoint's
 * for the 5 s deadline), so with one job per slot a saturated pool left none free and a due retry
 * waited in the queue for one. The slots still bound the sends; the jobs beyond them only wait in
 * the limiter or are deferred.
 */
const DELIVERY_JOBS_PER_SLOT = 2;

const isUnrecoverable = (err: Error): boolean => err instanceof UnrecoverableError || err.name === 'UnrecoverableError';

export interface RunningDispatcher {
  metricsPort: number;
  metrics: DispatcherMetrics;
  reconciler: Reconciler;
  retention: Retention;
  /** Undoes start in reverse order, each step on its own: in-flight deliveries finish first. */
  stop(): Promise<void>;
}

export interface DispatcherOptions {
  logger?: Logger;
}

/**
 * Builds every dependency from the config and starts consuming: the fan-out worker (events →
 * deliveries, and each delivery's first attempt) and the delivery worker (retries and deferred
 * attempts, one per job run); at most `DISPATCHER_CONCURRENCY` sends in flight in all, or, while
 * it is unset, as many as the governor finds receivers' latency needs, up to DISPATCHER_MAX_IN_FLIGHT.
 * Any number of dispatchers may run side by side on one Redis prefix: BullMQ hands each job to one
 * of them, and a dead one's jobs move on after `DISPATCHER_LOCK_DURATION_MS`.
 */
export async function startDispatcher(config: DispatcherConfig, options: DispatcherOptions = {}): Promise<RunningDispatcher> {
  const logger = options.logger ?? createLogger('dispatcher', config.logLevel);
  const undo = createStopStack(logger, { timeoutMs: config.shutdownTimeoutMs });
  const stop = (): Promise<void> => undo.stop();

  try {
    // Its two hot statements (the fan-out, the attempts' record) are prepared: planned once per connection.
    const { pool, db } = openDatabase(config, 'dispatcher', undo, { genericPlans: true });
    // Before anything sends: every stored secret opens, and none is left in plaintext.
    const secrets = createSecretBox(config.secretsKeys);
    await prepareSecretsAtRest(db, secrets, logger);

    // Queue adds, counts and readiness must not hang while Redis is away; the workers must ride it out.
    const commands = await connectRedis(config, 'commands', undo, 'redis');
    // One client per worker rather than one shared: it measured less CPU per delivery, unexplained.
    const eventWorkerRedis = await connectRedis(config, 'blocking', undo, 'event worker redis');
    const deliveryWorkerRedis = await connectRedis(config, 'blocking', undo, 'delivery worker redis');
    // A worker completes each job with a command of its own, and the jobs of one batch finish in
    // one turn: their completions leave in one write. (BullMQ's blocking connection, its own
    // duplicate of these, sends one BZPOPMIN at a time and is left alone.)
    coalesceWrites(eventWorkerRedis);
    coalesceWrites(deliveryWorkerRedis);

    const sender = createWebhookSender({
      hostMap: config.dispatchHostMap,
      allowCidrs: config.dispatchAllowCidrs,
      extraCaFile: lateExtraCaCerts(),
    });
    undo.push('sender', () => sender.close());

    const eventsQueue = queueFor(JOBS.shipmentEvent, { connection: commands, prefix: config.redisPrefix });
    eventsQueue.on('error', () => undefined);
    const deliveryQueue = queueFor(JOBS.delivery, { connection: commands, prefix: config.redisPrefix });
    deliveryQueue.on('error', () => undefined);
    undo.push('queues', () => Promise.all([eventsQueue.close(), deliveryQueue.close()]));

    const slots = createWebhookSlots({
      slots: config.concurrency,
      perWebhook: config.webhookConcurrency,
      perCompany: config.companyConcurrency,
      onStateChange: (webhookId, state, score) => {
        if (state === 'degraded') logger.warn({ webhookId, failureScore: Number(score.toFixed(2)) }, 'webhook degraded: its recent attempts failed or answered slowly; fewer slots until it recovers');
        else logger.info({ webhookId }, 'webhook recovered: full slots again');
      },
    });

    const metrics = createDispatcherMetrics({
      slots,
      queueCounts: async () => {
        const [events, deliveries] = await Promise.all([
          eventsQueue.getJobCounts(...QUEUE_STATES),
          deliveryQueue.getJobCounts(...QUEUE_STATES),
        ]);
        return { [JOBS.shipmentEvent.queue]: events, [JOBS.delivery.queue]: deliveries };
      },
      backlog: { oldestOverdueDelivery: () => oldestOverdueAge(db), oldestUnfannedEvent: () => oldestUnfannedAge(db) },
    });

    const postgres = createPostgresWatch((listener) => pool.on('error', listener));
    const deliveries = createDeliveryPipeline({ db, sender, deliveryQueue, slots, metrics, logger, postgres, secrets });
    const fanOut = createFanOut({ db, deliveries, postgres, metrics, secrets });

    const workerOptions = {
      prefix: config.redisPrefix,
      // A process that dies holding jobs stops renewing their locks; after lockDuration the stalled
      // check (every stalledInterval) moves them back to waiting for another dispatcher. Two stalls
      // are tolerated, so a job survives two crashes before it is failed.
      lockDuration: config.lockDurationMs,
      stalledInterval: config.lockDurationMs,
      maxStalledCount: 2,
    };
    // Workers take `unknown` payloads: each processor checks its job against the catalog first.
    // An event's job makes its deliveries' first attempts, so it takes as many events at once as
    // there are send slots; the events taken together are fanned out in one statement. The
    // deliveries queue holds retries and deferrals only; both workers share the slots (the limiter),
    // the delivery worker with jobs to spare for a due retry when sends hold the others (above).
    // Jobs each worker is running now: the governor reads how full they are.
    const running = { events: 0, deliveries: 0 };
    const counted = async <T>(worker: keyof typeof running, run: () => Promise<T>): Promise<T> => {
      running[worker]++;
      try {
        return await run();
      } finally {
        running[worker]--;
      }
    };
    const fanOutWorker = new Worker<unknown, number>(JOBS.shipmentEvent.queue, (job) => counted('events', () => fanOut.process(job)), {
      ...workerOptions,
      connection: eventWorkerRedis,
      concurrency: config.concurrency,
    });
    const deliveryWorker = new Worker<unknown>(JOBS.delivery.queue, (job, token) => counted('deliveries', () => deliveries.deliverJob(job, token)), {
      ...workerOptions,
      connection: deliveryWorkerRedis,
      concurrency: config.concurrency * DELIVERY_JOBS_PER_SLOT,
    });
    // Sends that wait on slow receivers cost no CPU: while they fill the pool and the thread is idle
    // the governor widens it, and the workers take as many jobs as it has slots.
    const governor = createInFlightGovernor({
      floor: config.concurrency,
      ceiling: config.maxInFlight,
      used: () => Math.max(slots.inFlight(), running.events, running.deliveries / DELIVERY_JOBS_PER_SLOT) / slots.limit(),
      refusals: () => slots.refusals(),
      apply: (limit) => {
        slots.resize(limit);
        fanOutWorker.concurrency = limit;
        deliveryWorker.concurrency = limit * DELIVERY_JOBS_PER_SLOT;
      },
      onChange: (limit, previous, reading) =>
        logger.debug({ limit, previous, used: Number(reading.used.toFixed(2)), refused: reading.refused, busy: Number(reading.busy.toFixed(2)) }, 'in-flight limit changed'),
    });
    governor.start();
    undo.push('in-flight governor', () => Promise.resolve(governor.stop()));
    for (const [name, worker] of [
      ['fan-out', fanOutWorker],
      ['delivery', deliveryWorker],
    ] as const) {
      worker.on('error', (err) => logger.warn({ worker: name, err: err.message }, 'worker error'));
    }
    // A receiver's failure never fails a job (the worker records it), so every job that ends failed
    // failed for another reason (a malformed payload, Postgres or Redis away past its retries): it
    // is said at error level and counted; the reconciler queues its work again from Postgres.
    for (const [queue, worker] of [
      [JOBS.shipmentEvent.queue, fanOutWorker],
      [JOBS.delivery.queue, deliveryWorker],
    ] as const) {
      worker.on('failed', (job, err) => {
        const ids = { queue, jobId: job?.id, attemptsMade: job?.attemptsMade, err: err.message };
        if (isUnrecoverable(err)) {
          metrics.jobsFailed.inc({ queue, reason: 'malformed' });
          logger.error(ids, 'malformed job failed');
          return;
        }
        // Whether BullMQ kept it for a retry or failed it for good (retries spent, or stalled too
        // often) is in Redis: ask rather than guess from the counters.
        void (job ? job.isFailed() : Promise.resolve(true))
          .catch(() => true)
          .then((final) => {
            if (!final) return logger.warn(ids, 'job failed; will retry');
            metrics.jobsFailed.inc({ queue, reason: 'retries_exhausted' });
            logger.error(ids, 'job failed for good; the reconciler will queue its work again');
          });
      });
    }
    // close() stops taking jobs and waits for those in flight; their batches commit before they end.
    undo.push('workers', async () => {
      const closing = Promise.all([fanOutWorker.close(), deliveryWorker.close()]);
      // Jobs waiting for their webhook's turn go back to the queue rather than hold up the stop.
      slots.close();
      await closing;
      await Promise.all([fanOut.drain(), deliveries.drain()]);
    });

    // A delivery either periodic task ends as failed (its event row gone) is counted as every failed one is.
    const deliveryFailed = (evento: EventName): void => metrics.delivered(evento, 'failure');
    const reconciler = createReconciler({
      db,
      eventsQueue,
      deliveryQueue,
      logger,
      requeued: (kind, n) => metrics.reconcilerRequeued.inc({ kind }, n),
      failed: deliveryFailed,
      intervalMs: config.reconcileIntervalMs,
      graceMs: config.reconcileGraceMs,
    });
    reconciler.start();
    undo.push('reconciler', () => reconciler.stop());

    const deferrals = createDeferralScheduler({ db, deliveryQueue, logger, queuedBound: config.queuedBound, failed: deliveryFailed });
    deferrals.start();
    undo.push('deferral scheduler', () => deferrals.stop());

    const retention = createRetention({
      db,
      logger,
      retentionDays: config.retentionDays,
      removed: (table, n) => metrics.retentionRemoved.inc({ table }, n),
    });
    retention.start();
    undo.push('retention', () => retention.stop());

    const { port: metricsPort } = await serveMetrics(metrics.registry, config.metricsPort, { postgres: pool, redis: commands }, undo, config.metricsHost);

    // The queues too: BullMQ drops a shared connection's listeners when it closes, so a queue closed
    // while its first checks were still running would raise its late error with no one to hear it.
    await Promise.all([eventsQueue, deliveryQueue, fanOutWorker, deliveryWorker].map((q) => q.waitUntilReady()));
    logger.info({ metricsPort, concurrency: config.concurrency, maxInFlight: config.maxInFlight, prefix: config.redisPrefix }, 'dispatcher started');
    return { metricsPort, metrics, reconciler, retention, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
