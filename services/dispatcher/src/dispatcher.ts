import { UnrecoverableError, Worker } from 'bullmq';
import {
  coalesceWrites,
  connectRedis,
  createSecretBox,
  createStopStack,
  senderSettings,
  openDatabase,
  checkQueueShards,
  prepareSecretsAtRest,
  queueShardPrefixes,
  serveMetrics,
  shardedQueueFor,
  type ShardedQueue,
  type Db,
  type RedisClient,
  type SecretBox,
  type StopStack,
} from '@svc/platform';
import { createLogger, type Logger } from '@svc/observability';
import { JOBS, type DeliveryJob, type EventName, type ShipmentEventJob } from '@svc/contracts';
import { createWebhookSender, type WebhookSender } from '@svc/webhook-sender';
import type { DispatcherConfig } from './config';
import { createFanOut, type FanOut } from './fan-out/fan-out.worker';
import { createDeliveryPipeline, type DeliveryPipeline } from './pipeline/delivery.pipeline';
import { createDispatcherMetrics, QUEUE_STATES, type DispatcherMetrics } from './observability/dispatcher-metrics';
import { createReconciler, type Reconciler } from './reconcile/reconciler';
import { createDeferralScheduler } from './reconcile/deferral.scheduler';
import { createRetention, type Retention } from './retention/retention.task';
import { createWebhookSlots, type WebhookSlots } from './fair-share/webhook-slots.limiter';
import { createInFlightGovernor } from './concurrency/in-flight.governor';
import { oldestOverdueAge } from './deliveries/delivery.repository';
import { oldestUnfannedAge } from './outbox/outbox.repository';
import { createPostgresWatch } from './support/postgres-watch';
import { createShardShare, type ShardShare } from './support/shard-share';

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
 *
 * Each step below registers its undo as it builds; stop() runs them in reverse order, each on its
 * own, within SHUTDOWN_TIMEOUT_MS.
 */
export async function startDispatcher(config: DispatcherConfig, options: DispatcherOptions = {}): Promise<RunningDispatcher> {
  const logger = options.logger ?? createLogger('dispatcher', config.logLevel);
  const undo = createStopStack(logger, { timeoutMs: config.shutdownTimeoutMs });
  const stop = (): Promise<void> => undo.stop();

  try {
    const stores = await openStores(config, logger, undo);
    const sender = openSender(config, undo);
    const queues = openQueues(config, stores.commands, undo);
    const slots = createFairShare(config, logger);
    const metrics = createMetrics(stores.db, queues, slots);

    const { db, pool, secrets } = stores;
    const postgres = createPostgresWatch((listener) => pool.on('error', listener));
    const deliveries = createDeliveryPipeline({ db, sender, deliveryQueue: queues.deliveryQueue, slots, metrics, logger, postgres, secrets });
    const fanOut = createFanOut({ db, deliveries, postgres, metrics, secrets });

    const workers = startWorkers(config, stores, { fanOut, deliveries });
    startGovernor(config, logger, slots, workers, undo);
    watchWorkers(workers, metrics, logger);
    // close() stops taking jobs and waits for those in flight; their batches commit before they end.
    undo.push('workers', async () => {
      const closing = Promise.all([...workers.fanOut, ...workers.delivery].map((w) => w.close()));
      // Jobs waiting for their webhook's turn go back to the queue rather than hold up the stop.
      slots.close();
      await closing;
      await Promise.all([fanOut.drain(), deliveries.drain()]);
    });

    const { reconciler, retention } = startPeriodicTasks(config, db, queues, logger, metrics, undo);

    // The queues too: BullMQ drops a shared connection's listeners when it closes, so a queue closed
    // while its first checks were still running would raise its late error with no one to hear it.
    // Hence before the metrics port, whose failure (a taken port) stops everything built so far.
    await Promise.all([queues.eventsQueue, queues.deliveryQueue, ...workers.fanOut, ...workers.delivery].map((q) => q.waitUntilReady()));
    const { port: metricsPort } = await serveMetrics(metrics.registry, config.metricsPort, { postgres: pool, redis: stores.commands }, undo, 'DISPATCHER_METRICS_PORT (dispatcher)', config.metricsHost);
    logger.info(
      { metricsPort, concurrency: config.concurrency, maxInFlight: config.maxInFlight, prefix: config.redisPrefix, queueShards: config.queueShards, consumedShards: config.consumedShards },
      'dispatcher started',
    );
    return { metricsPort, metrics, reconciler, retention, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

interface Stores {
  pool: ReturnType<typeof openDatabase>['pool'];
  db: Db;
  secrets: SecretBox;
  /** Queue adds, counts and readiness. */
  commands: RedisClient;
  eventWorkerRedis: RedisClient;
  deliveryWorkerRedis: RedisClient;
}

/** Postgres, with every stored secret opened and sealed, and the Redis clients of the queues and the workers. */
async function openStores(config: DispatcherConfig, logger: Logger, undo: StopStack): Promise<Stores> {
  // Its two hot statements (the fan-out, the attempts' record) are prepared: planned once per connection.
  const { pool, db } = openDatabase(config, 'dispatcher', undo, { genericPlans: true });
  // Before anything sends: every stored secret opens, and none is left in plaintext.
  const secrets = createSecretBox(config.secretsKeys);
  await prepareSecretsAtRest(db, secrets, logger);
  // Before anything is queued or taken: on other shards than the stack's, this process would strand work.
  await checkQueueShards(db, config.queueShards);

  // Queue adds, counts and readiness must not hang while Redis is away; the workers must ride it out.
  const commands = await connectRedis(config, 'commands', undo, 'redis');
  // One client per worker rather than one shared: the dispatcher's bench spent less CPU per delivery
  // so, though why is not known.
  const eventWorkerRedis = await connectRedis(config, 'blocking', undo, 'event worker redis');
  const deliveryWorkerRedis = await connectRedis(config, 'blocking', undo, 'delivery worker redis');
  // A worker completes each job with a command of its own, and the jobs of one batch finish in
  // one turn: their completions leave in one write. (BullMQ's blocking connection, its own
  // duplicate of these, sends one BZPOPMIN at a time and is left alone.)
  coalesceWrites(eventWorkerRedis);
  coalesceWrites(deliveryWorkerRedis);
  return { pool, db, secrets, commands, eventWorkerRedis, deliveryWorkerRedis };
}

function openSender(config: DispatcherConfig, undo: StopStack): WebhookSender {
  const sender = createWebhookSender(senderSettings(config));
  undo.push('sender', () => sender.close());
  return sender;
}

interface Queues {
  eventsQueue: ShardedQueue<ShipmentEventJob>;
  deliveryQueue: ShardedQueue<DeliveryJob>;
}

/** Every shard's queues, the consumed or not: a company's work is queued to its own shard. */
function openQueues(config: DispatcherConfig, commands: RedisClient, undo: StopStack): Queues {
  const eventsQueue = shardedQueueFor(JOBS.shipmentEvent, { connection: commands, layout: config });
  const deliveryQueue = shardedQueueFor(JOBS.delivery, { connection: commands, layout: config });
  undo.push('queues', () => Promise.all([eventsQueue.close(), deliveryQueue.close()]));
  return { eventsQueue, deliveryQueue };
}

/** The send slots, shared fairly between companies and their webhooks; the log says when a webhook is degraded or recovers. */
function createFairShare(config: DispatcherConfig, logger: Logger): WebhookSlots {
  return createWebhookSlots({
    slots: config.concurrency,
    perWebhook: config.webhookConcurrency,
    perCompany: config.companyConcurrency,
    onStateChange: (webhookId, state, score) => {
      if (state === 'degraded') logger.warn({ webhook: webhookId, failureScore: Number(score.toFixed(2)) }, 'webhook degraded: its recent attempts failed or answered slowly; fewer slots until it recovers');
      else logger.info({ webhook: webhookId }, 'webhook recovered: full slots again');
    },
  });
}

function createMetrics(db: Db, { eventsQueue, deliveryQueue }: Queues, slots: WebhookSlots): DispatcherMetrics {
  return createDispatcherMetrics({
    slots,
    // The stack's counts, every shard summed, as every replica reports them (docs/operations.md).
    queueCounts: async () => {
      const [events, deliveries] = await Promise.all([
        eventsQueue.getJobCounts(...QUEUE_STATES),
        deliveryQueue.getJobCounts(...QUEUE_STATES),
      ]);
      return { [JOBS.shipmentEvent.queue]: events, [JOBS.delivery.queue]: deliveries };
    },
    backlog: { oldestOverdueDelivery: () => oldestOverdueAge(db), oldestUnfannedEvent: () => oldestUnfannedAge(db) },
  });
}

interface Workers {
  /** One per consumed shard. */
  fanOut: Array<Worker<unknown, number>>;
  /** One per consumed shard. */
  delivery: Array<Worker<unknown>>;
  /** Jobs each kind of worker is running now, every shard's: the governor reads how full they are. */
  running: { events: number; deliveries: number };
  /** Sets the process's limit: each kind's shards share it (`createShardShare`). */
  resize(limit: number): void;
}

/**
 * The two workers of each consumed shard (DISPATCHER_SHARDS), consuming at once; each kind's shards
 * share the process's limit (`createShardShare`), so that with one shard or many the process runs
 * about as many jobs of each kind. Workers take `unknown` payloads: each processor checks its job
 * against the catalog first. An event's job makes its deliveries' first attempts, so it takes as
 * many events at once as there are send slots; the events taken together are fanned out in one
 * statement. The deliveries queue holds retries and deferrals only; both workers share the slots
 * (the limiter), the delivery worker with jobs to spare for a due retry when sends hold the others
 * (DELIVERY_JOBS_PER_SLOT).
 */
function startWorkers(
  config: DispatcherConfig,
  stores: Pick<Stores, 'eventWorkerRedis' | 'deliveryWorkerRedis'>,
  processors: { fanOut: FanOut; deliveries: DeliveryPipeline },
): Workers {
  const workerOptions = {
    prefix: config.redisPrefix,
    // A process that dies holding jobs stops renewing their locks; after lockDuration the stalled
    // check (every stalledInterval) moves them back to waiting for another dispatcher. Two stalls
    // are tolerated, so a job survives two crashes before it is failed.
    lockDuration: config.lockDurationMs,
    stalledInterval: config.lockDurationMs,
    maxStalledCount: 2,
  };
  const prefixes = queueShardPrefixes(config);
  const consumed = config.consumedShards.map((k) => prefixes[k]!);
  const fanOut: Array<Worker<unknown, number>> = [];
  const delivery: Array<Worker<unknown>> = [];
  const shares: Record<'events' | 'deliveries', ShardShare> = {
    events: createShardShare(consumed.length, config.concurrency, (i, n) => setConcurrency(fanOut[i], n)),
    deliveries: createShardShare(consumed.length, config.concurrency * DELIVERY_JOBS_PER_SLOT, (i, n) => setConcurrency(delivery[i], n)),
  };
  const running = {
    get events() {
      return shares.events.running();
    },
    get deliveries() {
      return shares.deliveries.running();
    },
  };
  const counted = async <T>(kind: keyof typeof shares, index: number, run: () => Promise<T>): Promise<T> => {
    shares[kind].change(index, 1);
    try {
      return await run();
    } finally {
      shares[kind].change(index, -1);
    }
  };
  consumed.forEach((prefix, i) => {
    fanOut.push(
      new Worker<unknown, number>(JOBS.shipmentEvent.queue, (job) => counted('events', i, () => processors.fanOut.process(job)), {
        ...workerOptions,
        prefix,
        connection: stores.eventWorkerRedis,
        concurrency: shares.events.concurrency(i),
      }),
    );
    delivery.push(
      new Worker<unknown>(JOBS.delivery.queue, (job, token) => counted('deliveries', i, () => processors.deliveries.deliverJob(job, token)), {
        ...workerOptions,
        prefix,
        connection: stores.deliveryWorkerRedis,
        concurrency: shares.deliveries.concurrency(i),
      }),
    );
  });
  return {
    fanOut,
    delivery,
    running,
    resize(limit) {
      shares.events.resize(limit);
      shares.deliveries.resize(limit * DELIVERY_JOBS_PER_SLOT);
    },
  };
}

/** A worker's concurrency, once it exists (the shares are computed before the workers are made). */
function setConcurrency(worker: Worker | undefined, concurrency: number): void {
  if (worker) worker.concurrency = concurrency;
}

/**
 * Sends that wait on slow receivers cost no CPU: while they fill the pool and the thread is idle
 * the governor widens it, and the workers take as many jobs as it has slots.
 */
function startGovernor(config: DispatcherConfig, logger: Logger, slots: WebhookSlots, workers: Workers, undo: StopStack): void {
  const { running } = workers;
  const governor = createInFlightGovernor({
    floor: config.concurrency,
    ceiling: config.maxInFlight,
    used: () => Math.max(slots.inFlight(), running.events, running.deliveries / DELIVERY_JOBS_PER_SLOT) / slots.limit(),
    refusals: () => slots.refusals(),
    apply: (limit) => {
      slots.resize(limit);
      workers.resize(limit);
    },
    onChange: (limit, previous, reading) =>
      logger.debug({ limit, previous, used: Number(reading.used.toFixed(2)), refused: reading.refused, busy: Number(reading.busy.toFixed(2)) }, 'in-flight limit changed'),
  });
  governor.start();
  undo.push('in-flight governor', () => Promise.resolve(governor.stop()));
}

/**
 * The workers' errors and failed jobs, logged and counted. A receiver's failure never fails a job
 * (the worker records it), so every job that ends failed failed for another reason (a malformed
 * payload, Postgres or Redis away past its retries): it is said at error level and counted; the
 * reconciler queues its work again from Postgres.
 */
function watchWorkers(workers: Workers, metrics: DispatcherMetrics, logger: Logger): void {
  const all = [
    ...workers.fanOut.map((worker) => ['fan-out', JOBS.shipmentEvent.queue, worker] as const),
    ...workers.delivery.map((worker) => ['delivery', JOBS.delivery.queue, worker] as const),
  ];
  for (const [name, , worker] of all) {
    worker.on('error', (err) => logger.warn({ worker: name, prefix: worker.opts.prefix, err: err.message }, 'worker error'));
  }
  for (const [, queue, worker] of all) {
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
}

/** The reconciler, the deferral scheduler and the retention, each started with its stop on `undo`. */
function startPeriodicTasks(
  config: DispatcherConfig,
  db: Db,
  { eventsQueue, deliveryQueue }: Queues,
  logger: Logger,
  metrics: DispatcherMetrics,
  undo: StopStack,
): { reconciler: Reconciler; retention: Retention } {
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
  return { reconciler, retention };
}
