import { UnrecoverableError } from 'bullmq';
import { bulkJobs, JOBS, type DeliveryJob, type ShipmentEventJob } from '@svc/contracts';
import { validPayload } from '@svc/platform';

const event: ShipmentEventJob = {
  eventId: '0b6f2c1e-4a7d-4f0e-9c43-5d7b1e2a9f10',
  evento: 'GUIA_ENTREGADA',
  empresaId: '6a1d3b7e-2c4f-4e8a-b9d0-1f2e3a4b5c6d',
  sucursalId: null,
  data: { numeroGuia: 'SVC0000000001', estado: 'ENTREGADO', fechaEntrega: '2026-11-23T10:00:00.000Z' },
  committedAt: '2026-11-23T10:00:01.000Z',
  requestId: 'req-1',
};

const delivery: DeliveryJob = {
  deliveryId: '9d8c7b6a-5f4e-4d3c-8b2a-1a2b3c4d5e6f',
  attempt: 2,
  webhookId: '1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b',
  eventId: event.eventId,
  evento: event.evento,
  data: event.data,
  committedAt: event.committedAt,
  requestId: null,
};

describe('the job catalog', () => {
  it('builds bulk entries under the contract name, options and job id', () => {
    expect(bulkJobs(JOBS.shipmentEvent, [event])).toEqual([
      { name: 'shipment-event', data: event, opts: { ...JOBS.shipmentEvent.options, jobId: event.eventId } },
    ]);
    expect(bulkJobs(JOBS.delivery, [delivery])).toEqual([
      { name: 'webhook-delivery', data: delivery, opts: { ...JOBS.delivery.options, jobId: `${delivery.deliveryId}.2` } },
    ]);
  });

  it('keeps the stored queue and job names (they live in Redis: renaming one needs a migration)', () => {
    expect([JOBS.shipmentEvent.queue, JOBS.shipmentEvent.name]).toEqual(['shipment-events', 'shipment-event']);
    expect([JOBS.delivery.queue, JOBS.delivery.name]).toEqual(['webhook-deliveries', 'webhook-delivery']);
  });

  it('takes the sequence and mode of an event, and the resend of a PING; jobs queued before them stay well-formed', () => {
    const withHeaders: DeliveryJob = { ...delivery, sequence: 5, mode: 'live' };
    expect(validPayload(JOBS.delivery, { id: 'j1', data: withHeaders })).toBe(withHeaders);
    const ping: DeliveryJob = { ...delivery, evento: 'PING', data: {}, mode: 'test' };
    expect(validPayload(JOBS.delivery, { id: 'j2', data: ping })).toBe(ping);
    const eventWithHeaders: ShipmentEventJob = { ...event, sequence: 1, mode: 'live' };
    expect(validPayload(JOBS.shipmentEvent, { id: 'j3', data: eventWithHeaders })).toBe(eventWithHeaders);
    // `delivery` and `event` above have neither: the shape of jobs queued before this change.
    expect(validPayload(JOBS.delivery, { id: 'j4', data: delivery })).toBe(delivery);
  });

  it('hands a worker a well-formed payload as it is', () => {
    expect(validPayload(JOBS.shipmentEvent, { id: event.eventId, data: event })).toBe(event);
    expect(validPayload(JOBS.delivery, { id: delivery.deliveryId, data: delivery })).toBe(delivery);
  });

  it.each<[string, unknown, RegExp]>([
    ['no payload', undefined, /malformed webhook-delivery job j1/],
    ['a field missing', { ...delivery, webhookId: undefined }, /webhookId is required/],
    ['an unknown event', { ...delivery, evento: 'GUIA_PERDIDA' }, /evento must be one of/],
    ['a bad id', { ...delivery, deliveryId: 'not-a-uuid' }, /deliveryId/],
    ['a fourth attempt', { ...delivery, attempt: 4 }, /attempt/],
    ['an extra field', { ...delivery, secret: 'x' }, /secret is not an accepted field/],
    ['a bad status in data', { ...delivery, data: { numeroGuia: 'X', estado: 'PERDIDA' } }, /data.estado/],
    ['a shipment event without its data', { ...delivery, data: {} }, /data.numeroGuia is required/],
    ['a PING with data', { ...delivery, evento: 'PING', data: { numeroGuia: 'X', estado: 'CREADA' } }, /data/],
    ['a sequence of 0', { ...delivery, sequence: 0 }, /sequence/],
    ['an unknown mode', { ...delivery, mode: 'sandbox' }, /mode must be one of/],
  ])('fails a malformed delivery job for good (%s)', (_case, data, message) => {
    let thrown: unknown;
    try {
      validPayload(JOBS.delivery, { id: 'j1', data });
    } catch (err) {
      thrown = err;
    }
    // UnrecoverableError: BullMQ fails the job at once, without spending retries on it.
    expect(thrown).toBeInstanceOf(UnrecoverableError);
    expect((thrown as Error).message).toMatch(message);
  });
});
