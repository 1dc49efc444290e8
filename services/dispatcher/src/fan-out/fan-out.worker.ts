import type { Job } from 'bullmq';
import { parse as parseUuid, v5 as uuidv5 } from 'uuid';
import { deliveryJobOf, isNoticeEvent, JOBS, type DeliveryJob, type ShipmentEventJob } from '@svc/contracts';
import { partitionRange, validPayload, type Db, type SecretBox, type WebhookTargetRow } from '@svc/platform';
import { createMicroBatcher, type MicroBatchOptions } from '../support/micro-batch';
import type { PostgresWatch } from '../support/postgres-watch';
import { findRoutedDeliveries, type RoutedDelivery } from '../deliveries/delivery.repository';
import type { DeliveryPipeline } from '../pipeline/delivery.pipeline';
import { openTarget, routedWebhooks, type ReadTarget } from '../webhooks/webhook.repository';
import { createRoutesCache, type RouteKey } from '../webhooks/routes.cache';
import type { DispatcherMetrics } from '../observability/dispatcher-metrics';

export interface FanOut {
  /** The processor of the shipment-events queue: resolves with the number of deliveries it found owed. */
  process(job: Job<unknown>): Promise<number>;
  drain(): Promise<void>;
}

/**
 * The namespace of delivery ids (a fixed random UUID), given to `v5` as bytes: as a string, uuid
 * parses it again on every call.
 */
const DELIVERY_ID_NAMESPACE = parseUuid('5f0c7e52-8f43-4a8e-9d53-2b7f1c1e6a90');

/**
 * The id of an event's original delivery to a webhook (the payload's `webhookId`, `X-Request-Id`):
 * a name-based UUID (RFC 4122 version 5) of the pair, so that a run which sent a first attempt and
 * crashed before recording it sends again under the same id, as the contract allows. The name goes
 * in as its UTF-8 bytes, which is what uuid would make of the string, without its slow conversion.
 */
export const deliveryIdOf = (eventId: string, webhookId: string): string => uuidv5(Buffer.from(`${eventId}/${webhookId}`, 'utf8'), DELIVERY_ID_NAMESPACE);

/** Routes read per statement: up to 200 events, two statements in flight so one fills while the other runs. */
const ROUTE_READS: MicroBatchOptions = { maxBatch: 200, maxInFlight: 2 };

/**
 * Companies whose routes a dispatcher holds, and route keys (mode, branch, event) per company: a
 * company's entry is a few rows per key, so 10,000 companies take a few MB at most.
 */
const ROUTES_CACHE = { companies: 10_000, keysPerCompany: 64 };

/**
 * Held routes are used only while Postgres answers the fan-out (PostgresWatch): a first attempt made
 * from memory while it is away could not be recorded and would be sent again once it is back. Under
 * load the record commits every few tens of milliseconds; after a quiet second the next event reads.
 */
const POSTGRES_ANSWERED_WITHIN_MS = 1000;

/** An event queued before events carried a mode is live: only live shipments emitted then. */
const routeKeyOf = (e: ShipmentEventJob): RouteKey => ({ companyId: e.empresaId, mode: e.mode ?? 'live', branchId: e.sucursalId, event: e.evento });

/** The webhook a notice is about; null for a shipment event. */
const aboutOf = (e: ShipmentEventJob): string | null => ('webhook' in e.data ? e.data.webhook.id : null);

/** The shipment of an event's deliveries; null for a notice. */
const shipmentOf = (e: ShipmentEventJob): string | null => ('numeroGuia' in e.data ? e.data.numeroGuia : null);

/**
 * Turns each event into one delivery per routed, subscribed, active webhook of the event's mode,
 * and hands them to the delivery pipeline, which makes their first attempts in this job and
 * records them with the event: one queue hop per delivery (docs/decisions/0004-first-attempts-in-the-fan-out.md).
 * An event's routes come from one batched read, which also finds what an earlier run of the event
 * recorded, or on a first run from the routes held for its company.
 */
export function createFanOut(deps: {
  db: Db;
  deliveries: Pick<DeliveryPipeline, 'deliverEvent'>;
  postgres: PostgresWatch;
  metrics: Pick<DispatcherMetrics, 'routes'>;
  /** Opens the webhooks' secrets as their routes are read (SECRETS_KEY). */
  secrets: SecretBox;
}): FanOut {
  const { db, deliveries, postgres, secrets } = deps;
  // Routes hold their targets opened: a secret is opened once per read, never per delivery.
  const routesCache = createRoutesCache<ReadTarget>(ROUTES_CACHE);
  // Bound once: an event then counts without a label set to hash.
  const routedHeld = deps.metrics.routes.labels({ source: 'held' });
  const routedRead = deps.metrics.routes.labels({ source: 'read' });

  const router = createMicroBatcher<ShipmentEventJob, RoutedDelivery<ReadTarget>[]>(async (events) => {
    // A stalled job can be run twice at once; one entry per event is enough.
    const byId = new Map(events.map((e) => [e.eventId, e]));
    const routable = [...byId.values()].map((e) => ({ eventId: e.eventId, about: aboutOf(e), ...routeKeyOf(e) }));
    const { routes, versions } = await postgres.observe(findRoutedDeliveries<WebhookTargetRow>(db, routedWebhooks(routable), partitionRange([...byId.values()].map((e) => e.partitionAt))));
    // One statement sees each webhook once, however many of its events it routes: opened once.
    const opened = new Map<string, ReadTarget>();
    const perEvent = new Map<string, RoutedDelivery<ReadTarget>[]>();
    for (const r of routes) {
      let webhook = opened.get(r.webhook.id);
      if (webhook === undefined) opened.set(r.webhook.id, (webhook = openTarget(r.webhook, secrets)));
      const route = { ...r, webhook };
      const list = perEvent.get(r.eventId);
      if (list) list.push(route);
      else perEvent.set(r.eventId, [route]);
    }
    for (const e of byId.values()) {
      // A notice's routes leave out the webhook it is about: they hold for that notice only.
      if (isNoticeEvent(e.evento)) continue;
      const version = versions.get(e.eventId);
      if (version !== undefined) routesCache.put(routeKeyOf(e), version, (perEvent.get(e.eventId) ?? []).map((r) => r.webhook));
    }
    return events.map((e) => perEvent.get(e.eventId) ?? []);
  }, ROUTE_READS);

  /**
   * An event's routes from memory, without the read, when that is exact: on its job's first run
   * (an earlier run may have recorded deliveries the read would find), for an event that carries its
   * company's webhook count (one rebuilt from `outbox` does not), with routes held at that count or
   * later, while Postgres answers. Otherwise undefined: the routes are read.
   */
  function heldRoutes(job: Job<unknown>, event: ShipmentEventJob): RoutedDelivery<ReadTarget>[] | undefined {
    if (job.attemptsStarted !== 1 || event.webhooksVersion === undefined || isNoticeEvent(event.evento)) return undefined;
    if (!postgres.answeredWithin(POSTGRES_ANSWERED_WITHIN_MS)) return undefined;
    const held = routesCache.get(routeKeyOf(event), event.webhooksVersion);
    return held?.map((webhook) => ({ eventId: event.eventId, webhook, existing: null }));
  }

  async function process(job: Job<unknown>): Promise<number> {
    const event = validPayload(JOBS.shipmentEvent, job);
    const held = heldRoutes(job, event);
    (held ? routedHeld : routedRead).inc();
    const routes = held ?? (await router.submit(event));

    const fresh: Array<{ delivery: DeliveryJob; target: ReadTarget }> = [];
    const retries: DeliveryJob[] = [];
    const unsent: DeliveryJob[] = [];
    for (const { webhook, existing } of routes) {
      const webhookId = webhook.id;
      if (existing === null) {
        fresh.push({ delivery: deliveryJobOf(event, { deliveryId: deliveryIdOf(event.eventId, webhookId), attempt: 1, webhookId }), target: webhook });
      } else if (existing.estado !== 'pendiente') {
        continue;
      } else if (existing.intentos > 0) {
        retries.push(deliveryJobOf(event, { deliveryId: existing.id, attempt: existing.intentos + 1, webhookId }));
      } else {
        unsent.push(deliveryJobOf(event, { deliveryId: existing.id, attempt: 1, webhookId }));
      }
    }
    await deliveries.deliverEvent({ eventId: event.eventId, numeroGuia: shipmentOf(event), partitionAt: event.partitionAt, fresh, unsent, retries });
    return fresh.length + retries.length + unsent.length;
  }

  return {
    process,
    drain: () => router.drain(),
  };
}
