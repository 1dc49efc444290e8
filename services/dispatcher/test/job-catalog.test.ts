import { Redis } from 'ioredis';
import { JOBS } from '@svc/contracts';
import { queueFor } from '@svc/platform';
import { TEST_REDIS_URL } from '../../../test/support/env';
import { eventually } from '../../../test/support/eventually';
import { guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';

describe('jobs checked against the catalog when a worker takes them', () => {
  let fx: DispatcherFixture;
  let redis: Redis;

  beforeAll(async () => {
    fx = await startDispatcherFixture('catalog');
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    redis?.disconnect();
    await fx?.stop();
  });

  it('fails a malformed job once, for good, at error level, and the workers go on', async () => {
    const deliveries = queueFor(JOBS.delivery, { connection: redis, prefix: fx.prefix });
    const events = queueFor(JOBS.shipmentEvent, { connection: redis, prefix: fx.prefix });
    try {
      // As an old producer, or a hand-made job, could leave them in Redis.
      await deliveries.add(JOBS.delivery.name, { deliveryId: 'not-a-uuid' } as never, { jobId: 'malformed-delivery' });
      await events.add(JOBS.shipmentEvent.name, { eventId: 42 } as never, { jobId: 'malformed-event' });

      for (const [queue, id] of [
        [deliveries, 'malformed-delivery'],
        [events, 'malformed-event'],
      ] as const) {
        await eventually(async () => (await queue.getJobState(id)) === 'failed', 10_000, `${id} failed`);
        const job = await queue.getJob(id);
        // One run, no retry spent on it (the delivery contract allows 3, the fan-out 20).
        expect(job?.attemptsMade).toBe(1);
        expect(job?.failedReason).toMatch(/^malformed /);
      }
      const errors = fx.dispatcher.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'malformed job failed');
      expect(errors.map((l) => [l.level, l.jobId]).sort()).toEqual([
        [50, 'malformed-delivery'], // pino's error level
        [50, 'malformed-event'],
      ]);

      // The same workers still deliver.
      const c = await createCompany(fx.gw, { planActivo: true, creditos: 10 });
      const hook = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: fx.receiver.url('/after') });
      expect(hook.status).toBe(201);
      const created = await fx.gw.http.post('/api/v1/guias').set('Authorization', bearer(c.live)).send(guia(1));
      expect(created.status).toBe(201);
      await fx.receiver.waitFor(1, 10_000);
      expect(JSON.parse(fx.receiver.requests[0]!.rawBody.toString('utf8'))).toMatchObject({
        event: 'GUIA_CREADA',
        data: { numeroGuia: (created.body as { data: { numeroGuia: string } }).data.numeroGuia, estado: 'CREADA' },
      });
    } finally {
      await deliveries.close();
      await events.close();
    }
  }, 30_000);
});
