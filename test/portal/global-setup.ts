import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TEST_DATABASE_BASE, testRedisEnv } from '../support/env';
import { freePort } from '../support/free-port';
import { uniquePrefix } from '../support/redis-prefix';
import { STATE_FILE, type StackInfo } from './stack';

const ROOT = join(__dirname, '../..');
/** Short enough that the expired-link journey waits it out; the others use their links at once. */
const LINK_TTL_SECONDS = 6;

/**
 * The real stack, as `pnpm start` starts it: a database of its own (created and migrated by the start),
 * its own Redis prefix, free ports, and the settings that let it deliver to an HTTPS receiver on loopback.
 */
export default async function globalSetup(): Promise<void> {
  mkdirSync(join(ROOT, 'test/portal/results'), { recursive: true });
  const database = `svc_portal_e2e_${randomBytes(5).toString('hex')}`;
  const [port, adminPort, gatewayMetrics, dispatcherMetrics] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const adminToken = `portal-e2e-admin-${randomBytes(16).toString('hex')}`;
  const redisPrefix = uniquePrefix('portal-e2e');
  const log = openSync(join(ROOT, 'test/portal/results/stack.log'), 'w');
  const stack = spawn('pnpm', ['start'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: `${TEST_DATABASE_BASE}/${database}`,
      ...testRedisEnv(),
      REDIS_PREFIX: redisPrefix,
      PORT: String(port),
      // As compose runs it: the operator's routes (the portal's links among them) on a port of their
      // own, so the links the journeys open prove they point at the public port.
      ADMIN_PORT: String(adminPort),
      GATEWAY_METRICS_PORT: String(gatewayMetrics),
      DISPATCHER_METRICS_PORT: String(dispatcherMetrics),
      ADMIN_TOKEN: adminToken,
      DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
      DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: join(ROOT, '.test-certs/ca.pem'),
      PORTAL_LINK_TTL_SECONDS: String(LINK_TTL_SECONDS),
      FORCE_COLOR: '0',
    },
    stdio: ['ignore', log, log],
    // Its own process group, so the teardown stops pnpm, concurrently and both services together.
    detached: true,
  });
  stack.unref();
  const info: StackInfo = {
    baseUrl: `http://localhost:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    adminToken,
    database,
    databaseUrl: `${TEST_DATABASE_BASE}/${database}`,
    redisPrefix,
    pid: stack.pid!,
    linkTtlSeconds: LINK_TTL_SECONDS,
  };
  writeFileSync(STATE_FILE, JSON.stringify(info));
  const until = Date.now() + 120_000;
  for (;;) {
    if (stack.exitCode !== null) throw new Error(`pnpm start exited ${stack.exitCode}: see test/portal/results/stack.log`);
    const ready = await Promise.all(
      [gatewayMetrics, dispatcherMetrics].map((p) =>
        fetch(`http://127.0.0.1:${p}/readyz`).then(
          (r) => r.status === 200,
          () => false,
        ),
      ),
    );
    if (ready.every(Boolean)) break;
    if (Date.now() > until) throw new Error('the stack was not ready within 120 s: see test/portal/results/stack.log');
    await new Promise((r) => setTimeout(r, 250));
  }
}
