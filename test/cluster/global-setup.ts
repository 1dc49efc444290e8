import baseSetup from '../support/global-setup';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster';
import { startSlotAudit } from './slot-audit';

declare global {
  // Read by global-teardown.ts: jest keeps the globals of the global setup for its teardown.
  var svcTestRedisCluster: RedisCluster | undefined;
  var svcTestSlotAudit: ReturnType<typeof startSlotAudit> | undefined;
}

/**
 * The root global setup (the migrated template database), then a private 3-master Redis Cluster:
 * its nodes go to TEST_REDIS_CLUSTER_NODES, which the fixtures pass on as REDIS_CLUSTER_NODES, and
 * every master is watched for scripts that touch more than one slot (checked by the teardown), and
 * every service runs with QUEUE_SHARDS=6 (TEST_QUEUE_SHARDS).
 */
export default async function globalSetup(): Promise<void> {
  await baseSetup();
  const cluster = await startRedisCluster(3);
  globalThis.svcTestRedisCluster = cluster;
  globalThis.svcTestSlotAudit = startSlotAudit(cluster.ports);
  process.env.TEST_REDIS_CLUSTER_NODES = cluster.nodes;
  // The queues split in 6 shards, 2 per master (docs/decisions/0008-queue-shards.md): the whole
  // suite runs on them, and queue-shards.cluster.ts checks that their keys spread.
  process.env.TEST_QUEUE_SHARDS ??= '6';
}
