// The cluster suite (issue 15): `pnpm test:cluster`. The global setup starts a private 3-master
// Redis Cluster on free ports and sets TEST_REDIS_CLUSTER_NODES, so every service these tests start
// runs with REDIS_CLUSTER_NODES (cluster clients, hash-tagged keys) instead of REDIS_URL, and with
// QUEUE_SHARDS=6 (TEST_QUEUE_SHARDS: the queues spread over the masters): the end-to-end journey,
// the rate-limit tests, token revocation across two gateways, the queue shards' spread and the chaos
// scenario of a dispatcher killed mid-stream.
import base from '../../jest.config.js';

/** @type {import('jest').Config} */
export default {
  ...base,
  rootDir: '../..',
  testMatch: [
    '<rootDir>/test/e2e/journey.test.ts',
    '<rootDir>/services/gateway/test/rate-limit.test.ts',
    // Rate-limit calls of one event-loop turn pipelined: one slot per batch (the prefix's hash tag).
    '<rootDir>/services/gateway/test/rate-limit-batch.test.ts',
    // Revocation across two gateways: the revoked mark and the sharded pub/sub.
    '<rootDir>/services/gateway/test/auth.test.ts',
    '<rootDir>/test/cluster/**/*.cluster.ts',
    '<rootDir>/test/chaos/dispatcher-kill.chaos.ts',
  ],
  globalSetup: '<rootDir>/test/cluster/global-setup.ts',
  globalTeardown: '<rootDir>/test/cluster/global-teardown.ts',
  maxWorkers: 1,
  testTimeout: 360000,
};
