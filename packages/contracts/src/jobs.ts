import type { JobsOptions } from 'bullmq';
import { AUTO_DISABLE_REASONS, ESTADOS, NOTICE_EVENTS, SHIPMENT_EVENTS, type EventName, type LoggedEvent, type ShipmentEventData, type WebhookNoticeData } from './events';
import { compile, type Validator } from './requests/validator';
import type { Modo, OutboxRow } from './db/types';

/**
 * The job catalog: every kind of job by name, with its queue, payload, options and job id. The
 * pairing of a name with its payload and options lives here only; producers and workers go through
 * `bulkJobs` and @svc/platform's `queueFor` and `validPayload`, so the compiler checks it. Queue
 * and job names are stored data (they live in Redis keys and in queued jobs): never rename one
 * without a migration.
 */

/**
 * A committed shipment event (or a notice about a webhook, extensions.md), relayed from the outbox.
 * Job id = event id, so a re-add is harmless.
 */
export interface ShipmentEventJob {
  eventId: string;
  evento: LoggedEvent;
  empresaId: string;
  /** Branch that generated the event (created with a branch token), or null for the company; for a notice, its webhook's branch. */
  sucursalId: string | null;
  data: LoggedEventData;
  /** ISO time the event's transaction committed (measured just before commit). */
  committedAt: string;
  requestId: string | null;
  /** The event's position in its shipment's history (`X-SVC-Secuencia`); absent in jobs queued before it existed. */
  sequence?: number;
  /** The mode of the event's shipment (`X-SVC-Modo`); absent means live, as every event queued before it was. */
  mode?: Modo;
  /**
   * The company's webhook count (`webhook_versions`) as the event's own transaction read it: the
   * dispatcher may route the event from routes it holds if they were read at this count or later.
   * Absent (jobs rebuilt from `outbox` by the relay's sweep or the reconciler, and jobs queued
   * before it existed): the dispatcher reads the routes, and what earlier runs recorded.
   */
  webhooksVersion?: number;
  /**
   * The event's row's partition key (`outbox.created_at`, ISO): the statements that find the row by
   * its id name its day, so they touch one partition (docs/decisions/0009). Absent in jobs queued
   * before it existed: those statements probe every day.
   */
  partitionAt?: string;
}

/**
 * One attempt of one delivery of one event to one webhook. Job id = delivery id and attempt
 * number, so each attempt is queued once however often it is re-added.
 */
export interface DeliveryJob {
  deliveryId: string;
  /**
   * The delivery's company: it names the queue shard the job goes to (`shardOf`), the one its
   * company's events go to. Absent in jobs queued before shards existed, which were all on the one
   * shard of QUEUE_SHARDS=1; such a job is routed to shard 0.
   */
  empresaId?: string;
  /** 1..DELIVERY_MAX_ATTEMPTS. The record in Postgres counts attempts; this names the job. */
  attempt: number;
  /**
   * Set by the fan-out on the first job of a delivery it has just created: no other job can have
   * sent it, so that job's first run need not read the delivery's progress. Absent: read it.
   */
  fresh?: boolean;
  /**
   * When a retry is due (ms since the epoch): its job is queued a little before it and the
   * attempt waits in the process for this time, so the queue's and the pipeline's own delays under
   * load do not make it late. Absent: at once.
   */
  dueAt?: number;
  webhookId: string;
  /** The event's id (`webhook-id`): for the resend of a PING, the PING delivery's own id. */
  eventId: string;
  /** A shipment event, or PING for the resend of a PING. */
  evento: EventName;
  /** The event's data; `{}` for a PING. */
  data: DeliveryData;
  /** When the work was committed: the event's commit, or the resend's. */
  committedAt: string;
  requestId: string | null;
  /** The event's position in its shipment's history; absent for a PING (and in jobs queued before it existed). */
  sequence?: number;
  /** `X-SVC-Modo`: the event's shipment's, or for a PING the webhook's; absent means live. */
  mode?: Modo;
  /**
   * The delivery's partition key (`entregas.particion_en`, ISO): its event's creation for an event's
   * own delivery, its own creation for a resend or a PING. The statements that find the delivery by
   * its id name its day. Absent in jobs queued before it existed: they probe every day.
   */
  partitionAt?: string;
}

/** What an event of the log carries as `data`: a shipment event's fields, or a notice's. */
export type LoggedEventData = ShipmentEventData | WebhookNoticeData;

/** What a delivery carries as `data`: an event's fields, or nothing for a PING. */
export type DeliveryData = LoggedEventData | Record<string, never>;

/** The job of an event as the outbox row records it (committed at the row's creation). */
export function eventJobOf(
  row: Pick<OutboxRow, 'id' | 'evento' | 'empresa_id' | 'sucursal_id' | 'data' | 'created_at' | 'request_id' | 'secuencia' | 'modo'>,
): ShipmentEventJob {
  return {
    eventId: row.id,
    evento: row.evento,
    empresaId: row.empresa_id,
    sucursalId: row.sucursal_id,
    data: row.data,
    committedAt: row.created_at.toISOString(),
    requestId: row.request_id,
    ...(row.secuencia === null ? {} : { sequence: row.secuencia }),
    mode: row.modo,
    partitionAt: row.created_at.toISOString(),
  };
}

/** The job of one attempt of `event`'s delivery to one webhook: the event's fields, as the fan-out and the reconciler send them. */
export function deliveryJobOf(event: ShipmentEventJob, delivery: { deliveryId: string; attempt: number; webhookId: string }): DeliveryJob {
  return {
    deliveryId: delivery.deliveryId,
    empresaId: event.empresaId,
    attempt: delivery.attempt,
    webhookId: delivery.webhookId,
    eventId: event.eventId,
    evento: event.evento,
    data: event.data,
    committedAt: event.committedAt,
    requestId: event.requestId,
    ...(event.sequence === undefined ? {} : { sequence: event.sequence }),
    ...(event.mode === undefined ? {} : { mode: event.mode }),
    // An event's own delivery is kept in its event's day (docs/decisions/0009).
    ...(event.partitionAt === undefined ? {} : { partitionAt: event.partitionAt }),
  };
}

/** The columns of `outbox` that `eventJobOf` reads. */
export const EVENT_JOB_COLUMNS = ['id', 'evento', 'empresa_id', 'sucursal_id', 'data', 'created_at', 'request_id', 'secuencia', 'modo'] as const;

/**
 * Attempts of one delivery, the contract's 3 (docs/integrators.md): the bound of a delivery job's
 * `attempt`. The dispatcher's retry policy spaces them (services/dispatcher/src/retry-policy/).
 */
export const DELIVERY_MAX_ATTEMPTS = 3;

export interface JobContract<Payload> {
  queue: string;
  name: string;
  options: JobsOptions;
  /** The job id of a payload: adding the same work twice is a no-op. */
  jobId(payload: Payload): string;
  /** The company whose shard the payload's job goes to (`shardOf`); undefined: shard 0. */
  shardKey(payload: Payload): string | undefined;
  /** Throws VALIDATION_ERROR naming the first bad field. */
  validate: Validator<Payload>;
}

export type PayloadOf<C> = C extends JobContract<infer P> ? P : never;

const uuid = { type: 'string', format: 'uuid' } as const;
const eventData = {
  type: 'object',
  properties: {
    numeroGuia: { type: 'string', minLength: 1 },
    estado: { type: 'string', enum: [...ESTADOS] },
    fechaEntrega: { type: 'string' },
    motivo: { type: 'string' },
  },
  required: ['numeroGuia', 'estado'],
  additionalProperties: false,
} as const;
const noticeData = {
  type: 'object',
  properties: {
    webhook: {
      type: 'object',
      properties: { id: uuid, url: { type: 'string' }, descripcion: { type: ['string', 'null'] } },
      required: ['id', 'url', 'descripcion'],
      additionalProperties: false,
    },
    motivo: { type: ['string', 'null'], enum: [...AUTO_DISABLE_REASONS, null] },
    fallasConsecutivas: { type: 'integer', minimum: 0 },
    desde: { type: ['string', 'null'] },
  },
  required: ['webhook', 'motivo', 'fallasConsecutivas', 'desde'],
  additionalProperties: false,
} as const;
/** A notice carries its own data; a shipment event, the contract's fields. */
const dataOfEvent = {
  if: { properties: { evento: { enum: [...NOTICE_EVENTS] } }, required: ['evento'] },
  then: { properties: { data: noticeData } },
  else: { properties: { data: eventData } },
} as const;
const common = {
  eventId: uuid,
  evento: { type: 'string', enum: [...SHIPMENT_EVENTS, ...NOTICE_EVENTS] },
  data: { type: 'object' },
  committedAt: { type: 'string', format: 'date-time' },
  requestId: { type: ['string', 'null'] },
  // Optional: jobs queued before these existed are still well-formed.
  sequence: { type: 'integer', minimum: 1 },
  mode: { type: 'string', enum: ['live', 'test'] },
  partitionAt: { type: 'string', format: 'date-time' },
} as const;

export const JOBS = {
  shipmentEvent: {
    queue: 'shipment-events',
    name: 'shipment-event',
    options: {
      // The fan-out only touches Postgres and Redis; keep retrying through a short outage.
      attempts: 20,
      backoff: { type: 'exponential', delay: 500 },
      removeOnComplete: { age: 3600, count: 5000 },
      removeOnFail: { age: 7 * 24 * 3600 },
    },
    jobId: (p) => p.eventId,
    shardKey: (p) => p.empresaId,
    validate: compile<ShipmentEventJob>({
      type: 'object',
      properties: {
        ...common,
        empresaId: uuid,
        sucursalId: { type: ['string', 'null'], format: 'uuid' },
        webhooksVersion: { type: 'integer', minimum: 0 },
      },
      required: ['eventId', 'evento', 'empresaId', 'sucursalId', 'data', 'committedAt', 'requestId'],
      additionalProperties: false,
      ...dataOfEvent,
    }),
  } satisfies JobContract<ShipmentEventJob>,
  delivery: {
    queue: 'webhook-deliveries',
    name: 'webhook-delivery',
    options: {
      // A receiver's failure never fails the job: the worker records the attempt and queues the
      // next one itself (its retry policy). BullMQ's retries are for Postgres or Redis failing around
      // the send: 1 s doubling to about 4 min in all, spending none of the delivery's 3 attempts;
      // past them, the reconciler queues the delivery again from Postgres.
      attempts: 9,
      backoff: { type: 'exponential', delay: 1000 },
      removeOnComplete: { age: 3600, count: 10000 },
      removeOnFail: { age: 24 * 3600, count: 10000 },
    },
    // BullMQ refuses ':' in a custom id.
    jobId: (p) => `${p.deliveryId}.${p.attempt}`,
    shardKey: (p) => p.empresaId,
    validate: compile<DeliveryJob>({
      type: 'object',
      properties: {
        ...common,
        evento: { type: 'string', enum: [...SHIPMENT_EVENTS, ...NOTICE_EVENTS, 'PING'] },
        data: { type: 'object' },
        deliveryId: uuid,
        empresaId: uuid,
        attempt: { type: 'integer', minimum: 1, maximum: DELIVERY_MAX_ATTEMPTS },
        fresh: { type: 'boolean' },
        dueAt: { type: 'integer', minimum: 0 },
        webhookId: uuid,
      },
      required: ['deliveryId', 'attempt', 'webhookId', 'eventId', 'evento', 'data', 'committedAt', 'requestId'],
      additionalProperties: false,
      // A PING (resent) carries `{}`; a notice and a shipment event their own fields.
      if: { properties: { evento: { const: 'PING' } }, required: ['evento'] },
      then: { properties: { data: { type: 'object', maxProperties: 0 } } },
      else: dataOfEvent,
    }),
  } satisfies JobContract<DeliveryJob>,
} as const;

/**
 * The entries of one `addBulk`: each payload under the contract's name, options and job id;
 * `extra` adds options of this add only (a delay).
 */
export function bulkJobs<P>(contract: JobContract<P>, payloads: readonly P[], extra: Pick<JobsOptions, 'delay'> = {}) {
  return payloads.map((data) => ({
    name: contract.name,
    data,
    opts: { ...contract.options, ...extra, jobId: contract.jobId(data) },
  }));
}

/** The most queue shards a stack may have (QUEUE_SHARDS): each is two queues and a worker pair per dispatcher. */
export const MAX_QUEUE_SHARDS = 64;

/**
 * The queue shard of a company, 0..shards-1: FNV-1a (32 bits) of its id as written in lowercase,
 * modulo `shards`. Every producer of a company's jobs (the gateway's relays, the dispatcher's
 * retries, reconciler and scheduler) routes through this one function, so the company's events and
 * deliveries share a shard and keep their order. It is stored data in effect (jobs sit on the shard
 * it named): changing it is changing QUEUE_SHARDS (docs/operations.md).
 */
export function shardOf(empresaId: string | undefined, shards: number): number {
  if (shards <= 1 || empresaId === undefined) return 0;
  const text = empresaId.toLowerCase();
  let hash = FNV_OFFSET_BASIS;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash % shards;
}

/** FNV-1a's 32-bit parameters (the published ones). */
const FNV_OFFSET_BASIS = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
