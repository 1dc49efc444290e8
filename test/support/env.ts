/** Where tests find Postgres and Redis: the machine's own services (never mocks). */
export const TEST_DATABASE_BASE = (process.env.TEST_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
/**
 * `host:port,...` of a Redis Cluster the tests run against instead of TEST_REDIS_URL: the cluster
 * suite's global setup (`pnpm test:cluster`) starts one and sets it. Unset: one Redis.
 */
export const TEST_REDIS_CLUSTER_NODES = process.env.TEST_REDIS_CLUSTER_NODES || undefined;
/**
 * QUEUE_SHARDS of every service the tests start, when set: the cluster suite's global setup sets 6,
 * so its whole run has the queues split over the cluster's masters. Unset: the default, one shard.
 */
export const TEST_QUEUE_SHARDS = process.env.TEST_QUEUE_SHARDS || undefined;
export const TEMPLATE_ENV = 'SVC_TEST_TEMPLATE_DB';
export const adminUrl = (): string => `${TEST_DATABASE_BASE}/postgres`;

/** The Redis settings of a service under test: REDIS_URL, REDIS_CLUSTER_NODES on a cluster, and the suite's QUEUE_SHARDS. */
export function testRedisEnv(): Record<string, string> {
  return {
    REDIS_URL: TEST_REDIS_URL,
    ...(TEST_REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: TEST_REDIS_CLUSTER_NODES } : {}),
    ...(TEST_QUEUE_SHARDS ? { QUEUE_SHARDS: TEST_QUEUE_SHARDS } : {}),
  };
}

/** The prefix a service's keys are really under for REDIS_PREFIX=`prefix`: hash-tagged on a cluster. */
export function testKeyPrefix(prefix: string): string {
  return TEST_REDIS_CLUSTER_NODES ? `{${prefix}}` : prefix;
}
