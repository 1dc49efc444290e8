import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { TEST_REDIS_CLUSTER_NODES, TEST_REDIS_URL, testKeyPrefix } from './env';

export function uniquePrefix(label = 't'): string {
  return `svctest:${label}:${randomBytes(5).toString('hex')}`;
}

/** A client of the Redis the tests run against: a cluster client when TEST_REDIS_CLUSTER_NODES is set. */
export function testRedisClient(): Redis | Cluster {
  if (!TEST_REDIS_CLUSTER_NODES) return new Redis(TEST_REDIS_URL);
  const nodes = TEST_REDIS_CLUSTER_NODES.split(',').map((n) => {
    const [host, port] = n.split(':');
    return { host: host!, port: Number(port) };
  });
  const cluster = new Cluster(nodes);
  // A cluster client reports connection trouble as 'error' events besides rejecting the commands;
  // with no listener, one that comes after disconnect() (a slots refresh the client had delayed
  // finds it ended: "Cluster is ended") is an unhandled error that fails the whole suite. The
  // commands' rejections already fail the test that used them.
  cluster.on('error', () => undefined);
  return cluster;
}

/** Deletes every key under `prefix:` with the given connection. */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
}

/** Deletes every key under `prefix:` on one master of a cluster, each on its own (they may be of several slots). */
async function deleteSpread(node: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) {
      const pipeline = node.pipeline();
      for (const key of keys) pipeline.unlink(key);
      await pipeline.exec();
    }
  } while (cursor !== '0');
}

/** Deletes every key under the prefix (a test file's whole Redis footprint), on every master of a cluster. */
export async function dropPrefix(prefix: string): Promise<void> {
  const redis = testRedisClient();
  try {
    // On a cluster the prefix is a hash tag: every key is in one slot, so one DEL per page still works.
    // The keys with tags of their own (queue shards) are under the untagged prefix, over many slots.
    if (redis instanceof Cluster) {
      if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
      for (const node of redis.nodes('master')) {
        await deletePrefix(node, testKeyPrefix(prefix));
        await deleteSpread(node, prefix);
      }
    } else {
      await deletePrefix(redis, prefix);
    }
  } finally {
    redis.disconnect();
  }
}
