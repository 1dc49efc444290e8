import { Queue } from 'bullmq';
import { JOBS } from '@svc/contracts';
import { dueDelayedJobs } from '@svc/platform';
import { eventually } from '../../../test/support/eventually';
import { parseExposition, sampleSum } from '../../../test/support/prometheus-text';
import { dropPrefix, testRedisClient, uniquePrefix } from '../../../test/support/redis-prefix';
import { testKeyPrefix } from '../../../test/support/env';
import { createDispatcherMetrics } from '../src/observability/dispatcher-metrics';

/**
 * svc_queue_delayed_due_jobs: delayed jobs whose due time has passed, the part of the queue depth
 * (infra/kubernetes' KEDA trigger) that `svc_queue_jobs{state="delayed"}` cannot tell from jobs
 * due later. Real BullMQ jobs in a real Redis, with no worker, so nothing moves them to waiting.
 */
describe('svc_queue_delayed_due_jobs', () => {
  const prefix = uniquePrefix('due');
  const redis = testRedisClient();
  // BullMQ leaves a connection it was given open at close: the test disconnects it.
  const queueConnection = testRedisClient();
  const queue = new Queue(JOBS.delivery.queue, { connection: queueConnection, prefix: testKeyPrefix(prefix) });
  queue.on('error', () => undefined);

  afterAll(async () => {
    await queue.close();
    queueConnection.disconnect();
    redis.disconnect();
    await dropPrefix(prefix);
  });

  it('counts delayed jobs already due, not those due later nor those waiting', async () => {
    await queue.add('later', {}, { delay: 3_600_000 });
    await queue.add('soon-a', {}, { delay: 1 });
    await queue.add('soon-b', {}, { delay: 1 });
    await queue.add('now', {});
    const added = Date.now();
    // Nothing consumes the queue: the two short delays stay in the delayed set once due.
    expect(await queue.getJobCounts('waiting', 'delayed')).toEqual(expect.objectContaining({ waiting: 1, delayed: 3 }));
    await eventually(async () => Date.now() > added + 5, 1000, 'the short delays to pass');
    expect(await dueDelayedJobs(redis, queue)).toBe(2);
    // Before any was due, none; an hour on, all three.
    expect(await dueDelayedJobs(redis, queue, added - 60_000)).toBe(0);
    expect(await dueDelayedJobs(redis, queue, added + 3_600_001)).toBe(3);
  });

  it('is a gauge per queue on the dispatcher registry, read at scrape time', async () => {
    const metrics = createDispatcherMetrics({
      dueCounts: async () => ({ [JOBS.delivery.queue]: await dueDelayedJobs(redis, queue) }),
    });
    let families = parseExposition(await metrics.registry.metrics());
    expect(families.get('svc_queue_delayed_due_jobs')?.type).toBe('gauge');
    expect(sampleSum(families, 'svc_queue_delayed_due_jobs', { queue: JOBS.delivery.queue })).toBe(2);
    // One more due job is seen by the next scrape.
    await queue.add('soon-c', {}, { delay: 1 });
    await eventually(async () => {
      families = parseExposition(await metrics.registry.metrics());
      return sampleSum(families, 'svc_queue_delayed_due_jobs', { queue: JOBS.delivery.queue }) === 3;
    }, 2000, 'the third due job in the gauge');
  });
});
