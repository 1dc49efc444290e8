import type { Queue } from 'bullmq';
import type { Logger } from '@svc/observability';
import type { Db, SecretBox } from '@svc/platform';
import type { DeliveryJob } from '@svc/contracts';
import type { WebhookSender } from '@svc/webhook-sender';
import { createMicroBatcher, type MicroBatcher, type MicroBatchOptions } from '../support/micro-batch';
import type { PostgresWatch } from '../support/postgres-watch';
import type { DispatcherMetrics } from '../observability/dispatcher-metrics';
import { findWebhookTargets, type ReadTarget } from '../webhooks/webhook.repository';
import {
  insertNewDeliveries,
  markFannedOut,
  postponeDeliveries,
  recordAttempts,
  type AttemptRecord,
  type NewDelivery,
  type Postponement,
} from '@svc/platform';
import { findDeliveryProgress, type DeliveryKey, type DeliveryProgress } from '../deliveries/delivery.repository';
import type { WebhookSlots } from '../fair-share/webhook-slots.limiter';
import type { EndpointHealth } from '../health/endpoint-health';
import type { ListenRelay } from '../listen/listen.relay';

/**
 * Statements of deliveries (reads of progress and targets, attempt records, postponements): up to
 * 500 rows each, two in flight, so one batch fills while the other commits.
 */
const DELIVERY_STATEMENTS: MicroBatchOptions = { maxBatch: 500, maxInFlight: 2 };

/**
 * The record of events' new deliveries: up to 200 events a statement (each a row per webhook it
 * reaches), two in flight. When none is being written, an event waits up to 20 ms for three others:
 * at a moderate rate nothing else batches, and a statement per event cost Postgres much more
 * CPU. The receiver already has the attempt; the wait delays only its row (a crash in it is one
 * before the record: sent again under the same id).
 */
const EVENT_RECORDS: MicroBatchOptions = { maxBatch: 200, maxInFlight: 2, linger: { ms: 20, items: 4 } };

/** Waits between tries to record made attempts while Postgres is away: soon after a blip, every 5 s in an outage. */
const RECORD_RETRY_MS = { first: 250, max: 5000 };

/** The pipeline's dependencies, handed over by the composition root. */
export interface DeliveryDeps {
  db: Db;
  sender: WebhookSender;
  deliveryQueue: Pick<Queue<DeliveryJob>, 'addBulk'>;
  slots: WebhookSlots;
  metrics: DispatcherMetrics;
  logger: Logger;
  /** Told of the event records' outcomes: held routes are used only while Postgres answers. */
  postgres: PostgresWatch;
  /** Opens the webhooks' secrets as their targets are read (SECRETS_KEY). */
  secrets: SecretBox;
  /** Told of every delivery that ends after an attempt (health/endpoint-health.ts); absent: nothing counts them. */
  health?: Pick<EndpointHealth, 'ended'>;
  /** Sends the attempts of listening sessions (`svc listen`) through their streams. */
  listen: ListenRelay;
}

export interface DeliveryOptions {
  /** Waits between tries to record an attempt while Postgres is away. Default RECORD_RETRY_MS. */
  recordRetryMs?: { first: number; max: number };
}

/** An event's new deliveries to record, and the event to mark fanned out with them (null: not yet). */
export interface EventRecord {
  rows: NewDelivery[];
  eventId: string | null;
  /** The event's row's partition key, as its job carries it. */
  partitionAt?: string | undefined;
}

/**
 * What every stage takes first: the dependencies, and the batched statements that let attempts in
 * flight together share their reads and writes. Built once per pipeline.
 */
export interface DeliveryContext extends DeliveryDeps {
  /** Webhook targets by id, their secrets opened as read. */
  targets: MicroBatcher<string, ReadTarget | undefined>;
  /** First attempts' targets, reused (opened) for WEBHOOK_CACHE_MS. */
  targetCache: Map<string, { at: number; target: ReadTarget | undefined }>;
  /** Where deliveries stand. */
  progress: MicroBatcher<DeliveryKey, DeliveryProgress | undefined>;
  /** Attempts on existing rows: true where the row took it. */
  attempts: MicroBatcher<AttemptRecord, boolean>;
  /** Due times of deferred attempts on existing rows. */
  postponements: MicroBatcher<Postponement, void>;
  /** Events' new deliveries, and the events marked fanned out with them: the ids inserted. */
  events: MicroBatcher<EventRecord, Set<string>>;
  recordRetryMs: { first: number; max: number };
  /** Set once draining: a record that fails then is left to the reconciler rather than retried. */
  closing: boolean;
}

export function createDeliveryContext(deps: DeliveryDeps, options: DeliveryOptions = {}): DeliveryContext {
  const { db } = deps;
  return {
    ...deps,
    targets: createMicroBatcher(async (ids) => {
      const found = await findWebhookTargets(db, deps.secrets, [...new Set(ids)]);
      return ids.map((id) => found.get(id));
    }, DELIVERY_STATEMENTS),
    targetCache: new Map(),
    progress: createMicroBatcher(async (keys) => {
      const found = await findDeliveryProgress(db, keys);
      return keys.map((k) => found.get(k.id));
    }, DELIVERY_STATEMENTS),
    attempts: createMicroBatcher(async (attempts) => {
      const changed = await recordAttempts(db, attempts);
      return attempts.map((a) => changed.has(a.deliveryId));
    }, DELIVERY_STATEMENTS),
    postponements: createMicroBatcher(async (postponed) => {
      await postponeDeliveries(db, postponed);
      return postponed.map(() => undefined);
    }, DELIVERY_STATEMENTS),
    events: createMicroBatcher(async (records) => {
      const events = new Map(records.flatMap((r) => (r.eventId === null ? [] : [[r.eventId, { eventId: r.eventId, partitionAt: r.partitionAt }] as const])));
      const inserted = await deps.postgres.observe(insertNewDeliveries(db, records.flatMap((r) => r.rows), markFannedOut([...events.values()])));
      return records.map(() => inserted);
    }, EVENT_RECORDS),
    recordRetryMs: options.recordRetryMs ?? RECORD_RETRY_MS,
    closing: false,
  };
}

/** Runs every batch submitted so far; from now on a failing record is not retried. */
export async function drainContext(ctx: DeliveryContext): Promise<void> {
  ctx.closing = true;
  await Promise.all([ctx.targets.drain(), ctx.progress.drain(), ctx.postponements.drain()]);
  await Promise.all([ctx.attempts.drain(), ctx.events.drain()]);
}
