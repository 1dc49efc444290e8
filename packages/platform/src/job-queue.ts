// The BullMQ side of the job catalog (jobs.ts in @svc/contracts): what makes a queue or fails a job
// through BullMQ lives here, so that the catalog's names, payloads, options and ids do no I/O.
import { Queue, UnrecoverableError, type ConnectionOptions, type Job, type JobType } from 'bullmq';
import calculateSlot from 'cluster-key-slot';
import { AppError, shardOf, type JobContract } from '@svc/contracts';
import type { CommonSettings } from './settings';

/** The queue of a contract, with its options as every job's defaults. */
export function queueFor<P>(
  contract: JobContract<P>,
  settings: { connection: ConnectionOptions; prefix: string },
): Queue<P> {
  return new Queue<P>(contract.queue, { ...settings, defaultJobOptions: contract.options });
}

/** Redis Cluster's hash slots. */
const CLUSTER_SLOTS = 16384;

/**
 * The hash tag of queue shard `shard` of `shards`: the first of `q<shard>`, `q<shard>.1`,
 * `q<shard>.2`... whose slot lies in the shard's slice of the 16384 slots, the slices being equal
 * and rounded to whole slots as `redis-cli --cluster create` splits them between masters. So shards
 * spread over masters as evenly as their counts allow (6 shards: 2 on each of 3 masters) on a
 * cluster made with the default split (docs/decisions/0008-queue-shards.md).
 */
export function shardTag(shard: number, shards: number): string {
  const from = Math.round((shard * CLUSTER_SLOTS) / shards);
  const to = Math.round(((shard + 1) * CLUSTER_SLOTS) / shards);
  for (let j = 0; ; j++) {
    const tag = j === 0 ? `q${shard}` : `q${shard}.${j}`;
    const slot = calculateSlot(tag);
    if (slot >= from && slot < to) return tag;
  }
}

/** What names the queues' keys: the prefix, the untagged namespace and the shard count. */
export type QueueLayout = Pick<CommonSettings, 'redisPrefix' | 'redisNamespace' | 'queueShards'>;

/**
 * The BullMQ prefix of each queue shard (index = shard). QUEUE_SHARDS=1 keeps the one prefix the
 * queues had before shards existed (`svc`, `{svc}` on a cluster): their keys are stored data, and
 * jobs queued before an upgrade are still consumed. Past one shard, shard k is under
 * `<REDIS_PREFIX>:{<shardTag(k)>}`, on one Redis as on a cluster, so that its event and delivery
 * queues share one slot and different shards have different slots.
 */
export function queueShardPrefixes(layout: QueueLayout): string[] {
  if (layout.queueShards <= 1) return [layout.redisPrefix];
  return Array.from({ length: layout.queueShards }, (_, k) => `${layout.redisNamespace}:{${shardTag(k, layout.queueShards)}}`);
}

type BulkEntry<P> = Parameters<Queue<P>['addBulk']>[0][number];

/**
 * One contract's queue split into shards: a job goes to its company's shard (`shardOf` of the
 * contract's `shardKey`), the one place a shard is chosen. With one shard it is today's one queue.
 */
export interface ShardedQueue<P> {
  readonly contract: JobContract<P>;
  /** Each shard's queue, index = shard. */
  readonly shards: readonly Queue<P>[];
  /** The shard a payload's job goes to. */
  shardOf(payload: P): number;
  /** The queue of a payload's shard. */
  queueOf(payload: P): Queue<P>;
  /** Adds each entry to its payload's shard: one `addBulk` per shard the entries name. Its jobs, in no particular order. */
  addBulk(entries: BulkEntry<P>[]): ReturnType<Queue<P>['addBulk']>;
  /** The counts of every shard, summed. */
  getJobCounts(...types: JobType[]): Promise<Record<string, number>>;
  /** Each shard's counts, index = shard. */
  getShardJobCounts(...types: JobType[]): Promise<Array<Record<string, number>>>;
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
}

/** A contract's queue over the shards of `layout`, with its options as every job's defaults. */
export function shardedQueueFor<P>(contract: JobContract<P>, settings: { connection: ConnectionOptions; layout: QueueLayout }): ShardedQueue<P> {
  const shards = queueShardPrefixes(settings.layout).map((prefix) => {
    const queue = queueFor(contract, { connection: settings.connection, prefix });
    // Errors surface in the commands that fail; unheard, an 'error' event would crash the process.
    queue.on('error', () => undefined);
    return queue;
  });
  const shardOfPayload = (payload: P): number => shardOf(contract.shardKey(payload), shards.length);
  const countsPerShard = (types: JobType[]): Promise<Array<Record<string, number>>> => Promise.all(shards.map((q) => q.getJobCounts(...types)));
  return {
    contract,
    shards,
    shardOf: shardOfPayload,
    queueOf: (payload) => shards[shardOfPayload(payload)]!,
    async addBulk(entries) {
      if (shards.length === 1) return shards[0]!.addBulk(entries);
      const byShard = new Map<number, BulkEntry<P>[]>();
      for (const entry of entries) {
        // BullMQ types the data ExtractDataType<P, P>, which is P for a plain payload.
        const k = shardOfPayload(entry.data as P);
        const group = byShard.get(k);
        if (group) group.push(entry);
        else byShard.set(k, [entry]);
      }
      return (await Promise.all([...byShard].map(([k, group]) => shards[k]!.addBulk(group)))).flat();
    },
    getShardJobCounts: (...types) => countsPerShard(types),
    async getJobCounts(...types) {
      const sum: Record<string, number> = {};
      for (const counts of await countsPerShard(types)) {
        for (const [state, n] of Object.entries(counts)) sum[state] = (sum[state] ?? 0) + n;
      }
      return sum;
    },
    waitUntilReady: () => Promise.all(shards.map((q) => q.waitUntilReady())),
    close: async () => {
      await Promise.all(shards.map((q) => q.close()));
    },
  };
}

/**
 * DISPATCHER_SHARDS as the shards it names, ascending: `0-3,7` style, each below `shards`. Unset or
 * empty: every shard. A bad value returns a reason for the settings' report instead.
 */
export function parseShardList(raw: string | undefined, shards: number): number[] | { problem: string } {
  if (raw === undefined || raw.trim() === '') return Array.from({ length: shards }, (_, k) => k);
  const chosen = new Set<number>();
  for (const part of raw.split(',')) {
    const item = part.trim();
    const m = /^(\d{1,4})(?:-(\d{1,4}))?$/.exec(item);
    if (!m) return { problem: `"${item}" is not a shard number or a range like 0-3` };
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) return { problem: `"${item}" is a range that ends before it starts` };
    if (to >= shards) return { problem: `"${item}" names shard ${to}, but QUEUE_SHARDS=${shards} has shards 0 to ${shards - 1}` };
    for (let k = from; k <= to; k++) chosen.add(k);
  }
  return [...chosen].sort((a, b) => a - b);
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
