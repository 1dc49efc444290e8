import type { Job, Queue } from 'bullmq';
import { parse as parseUuid, v5 as uuidv5 } from 'uuid';
import { bulkJobs, deliveryJobOf, JOBS, validPayload, webhookTargetOf, type Db, type DeliveryJob, type ShipmentEventJob, type WebhookTarget, type WebhookTargetRow } from '@svc/schema';
import { createMicroBatcher } from '../support/micro-batch';
import { findRoutedDeliveries, insertNewDeliveries, type NewDelivery, type RoutedDelivery } from '../deliveries/delivery.repository';
import type { DeliveryProcessor, DeliveryStep, FirstAttempt } from '../deliveries/delivery.worker';
import { routedWebhooks } from '../webhooks/webhook.repository';
import { createRoutesCache, type RouteKey } from '../webhooks/routes.cache';
import { markFannedOut } from '../outbox/outbox.repository';
import type { DispatcherMetrics } from '../observability/dispatcher-metrics';

export interface FanOut {
  /** The processor of the shipment-events queue: resolves with the number of deliveries it found owed. */
  process(job: Job<unknown>): Promise<number>;
  drain(): Promise<void>;
}

/**
 * The namespace of delivery ids (a fixed random UUID): ids are name-based on it, see `deliveryIdOf`.
 * Given to `v5` as bytes: as a string, uuid 11 parses it twice on every call (2.7% of the
 * dispatcher's samples at 200/s went to `v5`, bench/README.md "seventh session").
 */
const DELIVERY_ID_NAMESPACE = parseUuid('5f0c7e52-8f43-4a8e-9d53-2b7f1c1e6a90');

/**
 * The id of an event's original delivery to a webhook (the payload's `webhookId`, `X-Request-Id`):
 * a name-based UUID (RFC 4122 version 5) of the pair, so that a run which sent a first attempt and
 * crashed before recording it sends again under the same id, as the contract allows.
 * The name is given as its UTF-8 bytes, which is what uuid makes of a string, through
 * `unescape(encodeURIComponent(...))` and a loop: `v5` was 3.7% of the dispatcher's busy time at
 * saturation, a quarter of it that conversion (bench/README.md, "eighth session").
 */
export const deliveryIdOf = (eventId: string, webhookId: string): string => uuidv5(Buffer.from(`${eventId}/${webhookId}`, 'utf8'), DELIVERY_ID_NAMESPACE);

/**
 * How long an event's record waits for others when none is being written, and for how many: at a
 * moderate rate nothing else batches, and each event paid its own insert and its own job
 * completion, each a round trip that wakes the dispatcher (issue 16). The receiver already has
 * the delivery: the wait delays only the row in the delivery log and the end of the event's job,
 * and a crash in it is a crash before the record, as before (sent again, same `webhookId`).
 * Bench at 200/s, alternated runs (bench/README.md, "24 November 2026 (fourth session)"): sleeps
 * of the main thread per delivery 4.4-4.5 -> 3.2-3.3, dispatcher CPU per delivery 3.4-4.1 ->
 * 2.9-3.1 x the no-op worker's, Postgres's 1.10-1.17 -> 0.58-0.76 ms; commit -> receipt p99
 * unchanged. Waiting up to 30 ms for 6 saved no more.
 */
const RECORD_LINGER = { ms: 20, items: 4 };

/**
 * Companies whose routes a dispatcher holds, and route keys (mode, branch, event) per company: a
 * company's entry is a few rows per key, so 10,000 companies take a few MB at most.
 */
const ROUTES_CACHE = { companies: 10_000, keysPerCompany: 64 };

/**
 * Held routes are used only while Postgres answers the fan-out: one of its statements succeeded
 * this recently, and none has failed and no connection was lost since. A first attempt made from
 * held routes while Postgres is away could not be recorded, and would be sent again once it is
 * back; without them the fan-out waits for Postgres before it sends, as when every event read its
 * routes (test/readiness.test.ts). Under load the recorder commits every few tens of milliseconds;
 * after a quiet second the next event reads.
 */
const POSTGRES_ANSWERED_WITHIN_MS = 1000;

/** An event queued before events carried a mode is live: only live shipments emitted then. */
const routeKeyOf = (e: ShipmentEventJob): RouteKey => ({ empresaId: e.empresaId, mode: e.mode ?? 'live', sucursalId: e.sucursalId, evento: e.evento });

/** A batch of new deliveries to record, and the event to mark fanned out with them (null: not yet). */
interface FanOutRecord {
  rows: NewDelivery[];
  eventId: string | null;
}

/**
 * Turns each event into one delivery per routed, subscribed, active webhook of the event's mode,
 * making each delivery's first attempt itself: one queue hop per delivery. (Issue 16: the
 * alternative, the gateway's relay fanning out, would put the webhooks' reads and the deliveries'
 * rows on the gateway, which scales with the API, and would queue one job per webhook instead of
 * one per event; here an event's job carries all its webhooks' first attempts, and only retries and
 * deferrals go through the deliveries queue.)
 *
 * Send first, then record: one read finds where the event goes (and what an earlier run of it
 * recorded), or on a first run the routes held for its company (`heldRoutes`), the first attempts
 * are made, and one insert writes each new delivery as it then
 * stands, with its attempt, in the statement that marks the event fanned out. A successful first
 * attempt so costs one insert and no update (issue 16: insert then update left a dead row and a
 * second set of index entries per delivery; Postgres's CPU per delivery went from 0.16-0.18 to
 * 0.08-0.09 ms at saturation and from 1.6-2.2 to 0.6-0.65 ms at 200/s, bench/README.md).
 * Nothing is lost in between: until that statement commits the event is not fanned out, so a crash
 * leaves its job to run again (BullMQ's stalled-job check) or, if Redis lost it, the reconciler
 * queues it again from `outbox`; the run sends again under the same name-based id. Events taken
 * together are read and recorded in one statement each. A second run finds the first one's rows
 * and sends only what was not made: a delivery waiting for a retry has its job queued again under
 * the same job id (a no-op while Redis still holds it).
 */
export function createFanOut(deps: {
  db: Db;
  deliveries: Pick<DeliveryProcessor, 'attempt' | 'sendFirst' | 'settleFirst' | 'untilWritten'>;
  deliveryQueue: Pick<Queue<DeliveryJob>, 'addBulk'>;
  /** Registers a listener for a connection to Postgres lost while idle (the pool's 'error'). */
  onPostgresLost(listener: () => void): void;
  metrics: Pick<DispatcherMetrics, 'routes'>;
}): FanOut {
  const { db, deliveries, deliveryQueue } = deps;
  const routesCache = createRoutesCache<WebhookTargetRow>(ROUTES_CACHE);
  // Bound once: an event then counts without a label set to hash.
  const routedHeld = deps.metrics.routes.labels({ source: 'held' });
  const routedRead = deps.metrics.routes.labels({ source: 'read' });
  /** When one of the fan-out's statements last succeeded; 0 once one has failed, or a connection was lost, since. */
  let postgresAnsweredAt = 0;
  deps.onPostgresLost(() => {
    postgresAnsweredAt = 0;
  });
  const answered = <T>(statement: Promise<T>): Promise<T> =>
    statement.then(
      (result) => {
        postgresAnsweredAt = Date.now();
        return result;
      },
      (err: unknown) => {
        postgresAnsweredAt = 0;
        throw err;
      },
    );

  const router = createMicroBatcher<ShipmentEventJob, RoutedDelivery<WebhookTargetRow>[]>(
    async (events) => {
      // A stalled job can be run twice at once; one entry per event is enough.
      const byId = new Map(events.map((e) => [e.eventId, e]));
      const routable = [...byId.values()].map((e) => ({ ...e, mode: e.mode ?? 'live' }));
      const { routes, versions } = await answered(findRoutedDeliveries(db, routedWebhooks(routable)));
      const perEvent = new Map<string, RoutedDelivery<WebhookTargetRow>[]>();
      for (const r of routes) {
        const list = perEvent.get(r.eventId);
        if (list) list.push(r);
        else perEvent.set(r.eventId, [r]);
      }
      for (const e of byId.values()) {
        const version = versions.get(e.eventId);
        if (version !== undefined) routesCache.put(routeKeyOf(e), version, (perEvent.get(e.eventId) ?? []).map((r) => r.webhook));
      }
      return events.map((e) => perEvent.get(e.eventId) ?? []);
    },
    { maxBatch: 200, maxInFlight: 2 },
  );

  /**
   * An event's routes from memory, without the read, when that is exact: on its job's first run
   * (an earlier run, retried or stalled, may have recorded deliveries the read would find), for an
   * event that carries its company's webhook count (one rebuilt from `outbox` does not), with
   * routes held at that count or later, while Postgres answers (POSTGRES_ANSWERED_WITHIN_MS).
   * Otherwise undefined: the routes are read.
   * Bench at 200/s, alternated with the tree before (bench/README.md, "seventh session"):
   * dispatcher CPU per delivery 1.59 -> 1.29 ms and 2.73 -> 2.11 x the no-op worker's on the means
   * of three runs each, sleeps per delivery 3.07-3.26 -> 2.64-2.73; saturation unchanged.
   */
  function heldRoutes(job: Job<unknown>, event: ShipmentEventJob): RoutedDelivery<WebhookTargetRow>[] | undefined {
    if (job.attemptsStarted !== 1 || event.webhooksVersion === undefined) return undefined;
    if (Date.now() - postgresAnsweredAt > POSTGRES_ANSWERED_WITHIN_MS) return undefined;
    const held = routesCache.get(routeKeyOf(event), event.webhooksVersion);
    return held?.map((webhook) => ({ eventId: event.eventId, webhook, existing: null }));
  }

  const recorder = createMicroBatcher<FanOutRecord, Set<string>>(
    async (records) => {
      const eventIds = [...new Set(records.flatMap((r) => (r.eventId === null ? [] : [r.eventId])))];
      const inserted = await answered(insertNewDeliveries(db, records.flatMap((r) => r.rows), markFannedOut(eventIds)));
      return records.map(() => inserted);
    },
    { maxBatch: 200, maxInFlight: 2, linger: RECORD_LINGER },
  );

  const newDelivery = (d: DeliveryJob, numeroGuia: string, first: FirstAttempt): NewDelivery => ({
    id: d.deliveryId,
    webhookId: d.webhookId,
    eventId: d.eventId,
    evento: d.evento,
    numeroGuia,
    attempt: 'sent' in first ? first.sent.record : null,
    nextAt: 'sent' in first ? first.sent.record.nextAt : new Date(first.deferredUntil),
  });

  async function process(job: Job<unknown>): Promise<number> {
    const event = validPayload(JOBS.shipmentEvent, job);
    const held = heldRoutes(job, event);
    (held ? routedHeld : routedRead).inc();
    const routes = held ?? (await router.submit(event));

    const fresh: Array<{ d: DeliveryJob; target: WebhookTarget }> = [];
    const retries: DeliveryJob[] = [];
    const unsent: DeliveryJob[] = [];
    for (const { webhook, existing } of routes) {
      if (existing === null) fresh.push({ d: deliveryJobOf(event, { deliveryId: deliveryIdOf(event.eventId, webhook.id), attempt: 1, webhookId: webhook.id }), target: webhookTargetOf(webhook) });
      else if (existing.estado !== 'pendiente') continue;
      // Past its first attempt: its retry's job, again (a no-op while Redis holds it).
      else if (existing.intentos > 0) retries.push(deliveryJobOf(event, { deliveryId: existing.id, attempt: existing.intentos + 1, webhookId: webhook.id }));
      // Recorded before its first attempt (deferred, or by an earlier version): sent as a job would.
      else unsent.push(deliveryJobOf(event, { deliveryId: existing.id, attempt: 1, webhookId: webhook.id }));
    }
    if (retries.length > 0) await deliveryQueue.addBulk(bulkJobs(JOBS.delivery, retries));

    // Every attempt runs to its end before the job does: one failing must not end the job while
    // the others are still sending.
    const [firsts, others] = await Promise.all([
      Promise.allSettled(fresh.map(({ d, target }) => deliveries.sendFirst(d, target))),
      Promise.allSettled(unsent.map((d) => deliveries.attempt(d))),
    ]);
    const made = fresh.flatMap(({ d }, i) => {
      const first = firsts[i];
      return first?.status === 'fulfilled' ? [{ d, first: first.value }] : [];
    });
    // An event is fanned out once every delivery it owes is recorded: if a first attempt threw,
    // the event stays owed and its job's next run (or the reconciler) makes that one.
    const complete = made.length === fresh.length;
    const numeroGuia = event.data.numeroGuia;
    const inserted = await deliveries.untilWritten(
      () => recorder.submit({ rows: made.map(({ d, first }) => newDelivery(d, numeroGuia, first)), eventId: complete ? event.eventId : null }),
      { eventId: event.eventId, deliveries: made.length },
    );
    const settled = await Promise.allSettled(made.map(({ d, first }): Promise<DeliveryStep> => deliveries.settleFirst(d, first, inserted.has(d.deliveryId))));

    const failed = [...firsts, ...others, ...settled].find((m): m is PromiseRejectedResult => m.status === 'rejected');
    if (failed) throw failed.reason;
    return fresh.length + retries.length + unsent.length;
  }

  return {
    process,
    async drain() {
      await router.drain();
      await recorder.drain();
    },
  };
}
