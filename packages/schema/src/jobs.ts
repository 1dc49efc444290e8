import type { JobsOptions } from 'bullmq';
import type { ShipmentEvent, ShipmentEventData } from './events';

/**
 * The job catalog: every queue, its job name, payload and options. Queue and job names are
 * stored data (they live in Redis keys and in queued jobs): never rename one without a migration.
 */

/** A committed shipment event, relayed from the outbox. Job id = event id, so a re-add is harmless. */
export interface ShipmentEventJob {
  eventId: string;
  evento: ShipmentEvent;
  empresaId: string;
  /** Branch that generated the event (created with a branch token), or null for the company. */
  sucursalId: string | null;
  data: ShipmentEventData;
  /** ISO time the event's transaction committed (measured just before commit). */
  committedAt: string;
  requestId: string | null;
}

/** One delivery of one event to one webhook. Job id = delivery id; retries are the queue's. */
export interface DeliveryJob {
  deliveryId: string;
  webhookId: string;
  eventId: string;
  evento: ShipmentEvent;
  data: ShipmentEventData;
  committedAt: string;
  requestId: string | null;
}

export const DELIVERY_MAX_ATTEMPTS = 3;

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
  },
  delivery: {
    queue: 'webhook-deliveries',
    name: 'webhook-delivery',
    options: {
      // Attempt 1 at once, attempt 2 one second after attempt 1 ends, attempt 3 two seconds after
      // attempt 2 ends: exponential backoff of 1000 ms gives exactly 1000 * 2^(n-1).
      attempts: DELIVERY_MAX_ATTEMPTS,
      backoff: { type: 'exponential', delay: 1000 },
      removeOnComplete: { age: 3600, count: 10000 },
      removeOnFail: { age: 24 * 3600, count: 10000 },
    },
  },
} as const satisfies Record<string, { queue: string; name: string; options: JobsOptions }>;

export interface JobPayloads {
  'shipment-event': ShipmentEventJob;
  'webhook-delivery': DeliveryJob;
}
