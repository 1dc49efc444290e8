// cluster-key-slot ships no types; its declaration travels with this file, since the portal's
// browser tests compile it without the rest of src/ (an import cannot name an ambient declaration).
// eslint-disable-next-line @typescript-eslint/triple-slash-reference
/// <reference path="./types/cluster-key-slot.d.ts" />
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import type { Writable } from 'node:stream';
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

/** The streams `coalesceWrites` has already wrapped: a reconnect's `connect` must not wrap twice. */
const coalesced = new WeakSet<Writable>();

/** Corks `stream` at its first write of an event-loop turn and uncorks it once the turn's callbacks have run. */
function corkPerTurn(stream: Writable): void {
  if (coalesced.has(stream)) return;
  coalesced.add(stream);
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    stream.uncork();
  };
  stream.write = ((...args: unknown[]): boolean => {
    if (!corked) {
      corked = true;
      stream.cork();
      // After the callbacks (and their promise jobs) already queued: a batch's completions, made as
      // its callers resume, all join the one write.
      process.nextTick(uncork);
    }
    return write(...args);
  }) as Writable['write'];
}

/**
 * Makes the commands a client sends in one turn of the event loop leave in one socket write (a
 * `writev`) rather than one write each; each command still gets its own reply, in order, as
 * before. ioredis writes every command as it is called. On this kind of machine a write that wakes
 * Redis costs the sender tens of microseconds inside the system call, and a BullMQ worker completes
 * each job with a command of its own: a batch of jobs finishing together paid one write per job.
 * ioredis's auto-pipelining does the same with a Pipeline per turn and `setImmediate`: dearer at
 * a moderate rate (bench/README.md).
 *
 * Every connection the client makes is covered: a reconnect's new socket, and on a cluster each
 * node's socket.
 */
export function coalesceWrites(client: RedisClient): void {
  if (client instanceof Cluster) {
    for (const node of client.nodes()) coalesceWrites(node);
    client.on('+node', (node: Redis) => coalesceWrites(node));
    return;
  }
  const wrap = (): void => {
    // ioredis creates `stream` on connect; a client not connected yet has none.
    const stream = (client as { stream?: Writable }).stream;
    if (stream) corkPerTurn(stream);
  };
  wrap();
  client.on('connect', wrap);
}

/** What names a key of a process's own: the prefix, the untagged namespace, and whether Redis is a cluster. */
export type KeyNaming = { redisPrefix: string; redisNamespace: string; redisClusterNodes?: readonly RedisNode[] | undefined };

/**
 * The names of the gateway's own keys (rate-limit windows, revocation marks, failure counts): each
 * under the hash tag of what it is about (a token, a portal session, an address) on a cluster, so
 * that they spread over the slots and the masters; on one Redis the names they always had
 * (`<prefix>:<keyspace>:<id>`), since there a tag buys nothing and the keys' names are kept.
 * A script's keys must share a slot: give each the same `tag`.
 */
export class RedisKeys {
  readonly cluster: boolean;
  constructor(private readonly naming: KeyNaming) {
    this.cluster = (naming.redisClusterNodes?.length ?? 0) > 0;
  }

  /** `<prefix>:<keyspace>:<id>` on one Redis; on a cluster `<namespace>:<keyspace>:{<id>}`, or `...:<id>:{<tag>}` with another tag. */
  of(keyspace: string, id: string, tag: string = id): string {
    if (!this.cluster) return `${this.naming.redisPrefix}:${keyspace}:${id}`;
    return tag === id ? `${this.naming.redisNamespace}:${keyspace}:{${id}}` : `${this.naming.redisNamespace}:${keyspace}:${id}:{${tag}}`;
  }

  /** A key under the stack's one tag (`{svc}` on a cluster): what must share a slot with every instance, a pub/sub channel. */
  shared(name: string): string {
    return `${this.naming.redisPrefix}:${name}`;
  }
}

/** The hash slot of a key (ioredis's own function), to group a cluster pipeline's commands by slot. */
export function keySlot(key: string): number {
  return calculateSlot(key);
}
