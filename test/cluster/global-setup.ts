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
 * every master is watched for scripts that touch more than one slot (checked by the teardown).
 */
export default async function globalSetup(): Promise<void> {
  await baseSetup();
  const cluster = await startRedisCluster(3);
  globalThis.svcTestRedisCluster = cluster;
  globalThis.svcTestSlotAudit = startSlotAudit(cluster.ports);
  process.env.TEST_REDIS_CLUSTER_NODES = cluster.nodes;
}
