import type { Cluster } from 'ioredis';
import { coalesceWrites } from '@svc/platform';
import { testRedisClient, uniquePrefix } from '../support/redis-prefix';
import { countSocketWrites } from '../support/socket-writes';

// The dispatcher's workers send their commands through coalesceWrites (issue 16); on a cluster the
// sockets are the nodes', made after the client is: each must be covered as it comes.
describe('coalesceWrites on a Redis Cluster', () => {
  it("sends one turn's commands to a node in one write, on nodes that joined after the call", async () => {
    const cluster = testRedisClient() as Cluster;
    // Called before the client knows any node: every node socket comes later ('+node', 'connect').
    coalesceWrites(cluster);
    try {
      await cluster.ping();
      const prefix = `{${uniquePrefix('coalesce')}}`;
      // Every key under one hash tag: one slot, one node.
      const keys = Array.from({ length: 20 }, (_, i) => `${prefix}:k${i}`);
      await cluster.set(keys[0]!, 'warm');
      const counts = { writes: 0, chunks: 0 };
      for (const node of cluster.nodes('master')) if (node.status === 'ready') countSocketWrites(node, counts);
      await Promise.all(keys.map((k, i) => cluster.set(k, `v${i}`)));
      expect(await Promise.all(keys.map((k) => cluster.get(k)))).toEqual(keys.map((_, i) => `v${i}`));
      // The 20 SETs in one write and the 20 GETs in another (without it: 40 writes).
      expect(counts).toEqual({ writes: 2, chunks: 40 });
      await cluster.del(...keys);
    } finally {
      cluster.disconnect();
    }
  });
});
