import type { Redis } from 'ioredis';
import { JOBS } from '@svc/contracts';
import type { Chaos } from './harness';

/** BullMQ's lists and sets of jobs not yet finished, per queue. */
const UNFINISHED = { lists: ['wait', 'active'], sets: ['delayed', 'prioritized'] } as const;
/** Jobs completed at least this long ago are in the append-only file (fsync everysec). */
const SYNCED_AFTER_MS = 2000;
const SAMPLE = 50;

/** What the side Redis held at one moment: which server it was, and the work in it. */
export interface RedisWork {
  /** INFO's run_id: a new one for each start of the server. */
  runId: string;
  /** Jobs of both queues waiting, running, delayed or prioritized. */
  unfinished: number;
  /** Ids of shipment-event jobs completed over SYNCED_AFTER_MS ago (up to SAMPLE). */
  completed: string[];
}

const queues = [JOBS.shipmentEvent.queue, JOBS.delivery.queue];

async function runId(redis: Redis): Promise<string> {
  return /run_id:(\w+)/.exec(await redis.info('server'))?.[1] ?? '';
}

export function redisWork(h: Chaos): Promise<RedisWork> {
  return h.withRedis(async (redis, prefix) => {
    let unfinished = 0;
    for (const q of queues) {
      for (const l of UNFINISHED.lists) unfinished += await redis.llen(`${prefix}:${q}:${l}`);
      for (const z of UNFINISHED.sets) unfinished += await redis.zcard(`${prefix}:${q}:${z}`);
    }
    const completed = await redis.zrangebyscore(`${prefix}:${JOBS.shipmentEvent.queue}:completed`, '-inf', Date.now() - SYNCED_AFTER_MS, 'LIMIT', 0, SAMPLE);
    return { runId: await runId(redis), unfinished, completed };
  });
}

/** The server's run_id now, and how many of `completed` it still holds. */
export function redisNow(h: Chaos, completed: string[]): Promise<{ runId: string; found: number }> {
  return h.withRedis(async (redis, prefix) => {
    const scores = completed.length ? await redis.zmscore(`${prefix}:${JOBS.shipmentEvent.queue}:completed`, ...completed) : [];
    return { runId: await runId(redis), found: scores.filter((s) => s !== null).length };
  });
}
