// The baseline: a BullMQ worker that does nothing with each job, on the same Redis, with the
// dispatcher's concurrency. The parent fills the queue first, then starts this process; it reports
// how fast it emptied the queue.
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { performance } from 'node:perf_hooks';

const total = Number(process.env.NOOP_JOBS);
const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
let done = 0;
let first = 0;
const worker = new Worker(
  process.env.NOOP_QUEUE!,
  async () => {
    if (first === 0) first = performance.now();
  },
  { connection, prefix: process.env.REDIS_PREFIX, concurrency: Number(process.env.NOOP_CONCURRENCY ?? 50) },
);
worker.on('completed', () => {
  done++;
  if (done === total) {
    const seconds = (performance.now() - first) / 1000;
    process.send?.({ jobs: done, seconds });
    void worker.close().then(() => connection.quit()).then(() => process.exit(0));
  }
});
