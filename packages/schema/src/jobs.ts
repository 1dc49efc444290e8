import { Queue, UnrecoverableError, type ConnectionOptions, type Job, type JobsOptions } from 'bullmq';
import { ESTADOS, SHIPMENT_EVENTS, type ShipmentEvent, type ShipmentEventData } from './events';
import { AppError } from './errors';
import { compile, type Validator } from './requests/validator';

/**
 * The job catalog: every kind of job by name, with its queue, payload, options and job id. The
 * pairing of a name with its payload and options lives here only; producers and workers go through
 * `bulkJobs`, `queueFor` and `validPayload`, so the compiler checks it. Queue and job names are
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

export interface JobContract<Payload> {
  queue: string;
  name: string;
  options: JobsOptions;
  /** The job id of a payload: adding the same work twice is a no-op. */
  jobId(payload: Payload): string;
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
const common = {
  eventId: uuid,
  evento: { type: 'string', enum: [...SHIPMENT_EVENTS] },
  data: eventData,
  committedAt: { type: 'string', format: 'date-time' },
  requestId: { type: ['string', 'null'] },
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
    validate: compile<ShipmentEventJob>({
      type: 'object',
      properties: { ...common, empresaId: uuid, sucursalId: { type: ['string', 'null'], format: 'uuid' } },
      required: ['eventId', 'evento', 'empresaId', 'sucursalId', 'data', 'committedAt', 'requestId'],
      additionalProperties: false,
    }),
  } satisfies JobContract<ShipmentEventJob>,
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
    jobId: (p) => p.deliveryId,
    validate: compile<DeliveryJob>({
      type: 'object',
      properties: { ...common, deliveryId: uuid, webhookId: uuid },
      required: ['deliveryId', 'webhookId', 'eventId', 'evento', 'data', 'committedAt', 'requestId'],
      additionalProperties: false,
    }),
  } satisfies JobContract<DeliveryJob>,
} as const;

/** The queue of a contract, with its options as every job's defaults. */
export function queueFor<P>(
  contract: JobContract<P>,
  settings: { connection: ConnectionOptions; prefix: string },
): Queue<P> {
  return new Queue<P>(contract.queue, { ...settings, defaultJobOptions: contract.options });
}

/** The entries of one `addBulk`: each payload under the contract's name, options and job id. */
export function bulkJobs<P>(contract: JobContract<P>, payloads: readonly P[]) {
  return payloads.map((data) => ({
    name: contract.name,
    data,
    opts: { ...contract.options, jobId: contract.jobId(data) },
  }));
}

/**
 * The payload of a job a worker has taken, checked against its contract. A malformed one (an old
 * shape, a hand-made job) fails at once and for good: BullMQ does not retry an UnrecoverableError,
 * and the worker goes on with the next job.
 */
export function validPayload<P>(contract: JobContract<P>, job: Pick<Job, 'id' | 'data'>): P {
  try {
    return contract.validate(job.data);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    throw new UnrecoverableError(`malformed ${contract.name} job ${job.id ?? '(no id)'}: ${err.message}`);
  }
}
