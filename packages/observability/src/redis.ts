// Here rather than in @svc/schema: what these helpers add to a bare ioredis client is lifecycle (a
// connection made now, its undo on the StopStack) and health (the /readyz ping), both this
// package's concerns; schema keeps to data shapes and contracts.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { StopStack } from './lifecycle';

/**
 * What a client is for, which decides how it behaves while Redis is away:
 * - `commands`: request-path commands, queue adds, counts, readiness. Fail fast (a 503, a retry
 *   later) instead of queueing in memory while Redis is away.
 * - `blocking`: BullMQ workers, which block on Redis and must ride out an outage; BullMQ requires
 *   `maxRetriesPerRequest: null` for them.
 * - `subscriber`: pub/sub; ioredis's defaults (reconnects and resubscribes by itself).
 */
export type RedisRole = 'commands' | 'blocking' | 'subscriber';

const ROLE_OPTIONS: Record<RedisRole, RedisOptions> = {
  commands: { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000 },
  blocking: { maxRetriesPerRequest: null },
  subscriber: {},
};

/** The ioredis options of a role, for a client this module does not connect itself. */
export function redisOptions(role: RedisRole): RedisOptions {
  return { ...ROLE_OPTIONS[role], lazyConnect: true };
}

/** A node of a Redis Cluster, as `REDIS_CLUSTER_NODES` lists them. */
export interface RedisNode {
  host: string;
  port: number;
}

/** Where the services' Redis is: one server (`REDIS_URL`), or a cluster when its nodes are given. */
export interface RedisTarget {
  redisUrl: string;
  redisClusterNodes?: readonly RedisNode[];
}

/** Either kind of client: the code paths are the same, keys are hash-tagged on a cluster. */
export type RedisClient = Redis | Cluster;

/**
 * The cluster options of a role: the per-node options of `redisOptions(role)`, and fail-fast on
 * the cluster itself for `commands`. The subscriber's sharded subscribers keep one connection per
 * master, which SSUBSCRIBE needs (a channel lives on the shard that owns its slot).
 */
export function clusterOptions(role: RedisRole): ClusterOptions {
  const { lazyConnect, enableOfflineQueue, ...perNode } = redisOptions(role);
  return {
    lazyConnect,
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
    ...(role === 'subscriber' ? { shardedSubscribers: true } : {}),
    redisOptions: perNode,
  };
}

/** An unconnected client of `role` for `target`: a cluster client when its nodes are given. */
export function createRedisClient(target: RedisTarget, role: RedisRole): RedisClient {
  return target.redisClusterNodes?.length
    ? new Cluster([...target.redisClusterNodes], clusterOptions(role))
    : new Redis(target.redisUrl, redisOptions(role));
}

/**
 * A connected client for `role`; its undo (quit, or disconnect when Redis is already gone) is on
 * `undo` as `step` before the connection is tried, so a start that fails here still closes it.
 * With cluster nodes in `target` it is a cluster client and the URL is not used.
 */
export async function connectRedis(target: RedisTarget, role: RedisRole, undo: StopStack, step: string): Promise<RedisClient> {
  const client = createRedisClient(target, role);
  // Errors surface where they matter: in the command that fails and in /readyz. Unheard, an
  // 'error' event would crash the process.
  client.on('error', () => undefined);
  undo.push(step, () => client.quit().catch(() => client.disconnect()));
  await client.connect();
  return client;
}
