// The baseline: a BullMQ worker that does nothing with each job, on the same Redis, with the
// dispatcher's concurrency. Saturation: the parent fills the queue first, then starts this process
// with NOOP_JOBS; it reports how fast it emptied the queue. Paced: started without NOOP_JOBS, it
// runs until told to exit and says, when asked, how many jobs it has finished.
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { performance } from 'node:perf_hooks';

const total = process.env.NOOP_JOBS === undefined ? Infinity : Number(process.env.NOOP_JOBS);
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
const exit = (): void => void worker.close().then(() => connection.quit()).then(() => process.exit(0));
worker.on('completed', () => {
  done++;
  if (done === total) {
    const seconds = (performance.now() - first) / 1000;
    process.send?.({ jobs: done, seconds });
    exit();
  }
});
process.on('message', (msg: { cmd?: string }) => {
  if (msg.cmd === 'count') process.send?.({ count: done });
  else if (msg.cmd === 'exit') exit();
});
