import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { closeServer, listen, type StopStack } from './lifecycle';

export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

/**
 * `/metrics` (Prometheus text), `/healthz` (the process is alive) and `/readyz` (Postgres and Redis
 * answer) on their own port: scrapes and probes stay off the public API and its rate limits.
 */
export function createMetricsServer(registry: Registry, checks: ReadinessCheck[], timeoutMs = 2000, readyMaxAgeMs = READINESS_MAX_AGE_MS): Server {
  const ready = cachedReadiness(checks, timeoutMs, readyMaxAgeMs);
  // The timeouts (boundMetricsTimeouts) are checked this often: Node's 30 s would make 5 s into 35.
  const server = createServer({ connectionsCheckingInterval: METRICS_TIMEOUTS.checkIntervalMs }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ status: 'ok' }));
      return;
    }
    if (path === '/readyz') {
      void ready().then((result) => {
        res
          .writeHead(result.ok ? 200 : 503, { 'Content-Type': 'application/json' })
          .end(JSON.stringify({ status: result.ok ? 'ready' : 'unavailable', checks: result.checks }));
      });
      return;
    }
    res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ status: 'not found' }));
  });
  boundMetricsTimeouts(server);
  return server;
}

/**
 * How long one `/readyz` probe of Postgres and Redis answers every hit: probes from several
 * orchestrators and scrapers (or anyone who reaches the port) cost one query each per second at
 * most, and an answer is at most this stale.
 */
export const READINESS_MAX_AGE_MS = 1000;

/** `readiness`, run once for every caller within `maxAgeMs` of its start (in flight included). */
function cachedReadiness(checks: ReadinessCheck[], timeoutMs: number, maxAgeMs: number): () => ReturnType<typeof readiness> {
  let last: { at: number; result: ReturnType<typeof readiness> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= maxAgeMs) last = { at: now, result: readiness(checks, timeoutMs) };
    return last.result;
  };
}

/**
 * The metrics port's bounds on slow clients: its requests are one line and a few headers (a
 * scrape, a probe), so a client gets 5 s for its headers and 10 s for its request, and an idle
 * connection 5 s, checked every second (Node's defaults are 60 s, 300 s and a 30 s check).
 */
export const METRICS_TIMEOUTS = { headersMs: 5_000, requestMs: 10_000, keepAliveMs: 5_000, checkIntervalMs: 1_000, maxConnections: 200 } as const;

function boundMetricsTimeouts(server: Server): void {
  server.headersTimeout = METRICS_TIMEOUTS.headersMs;
  server.requestTimeout = METRICS_TIMEOUTS.requestMs;
  server.keepAliveTimeout = METRICS_TIMEOUTS.keepAliveMs;
  server.maxConnections = METRICS_TIMEOUTS.maxConnections;
}

async function readiness(
  checks: ReadinessCheck[],
  timeoutMs: number,
): Promise<{ ok: boolean; checks: Record<string, 'up' | 'down'> }> {
  const results = await Promise.all(
    checks.map(async (c) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          c.check(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
          }),
        ]);
        return [c.name, 'up'] as const;
      } catch {
        return [c.name, 'down'] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return { ok: results.every(([, s]) => s === 'up'), checks: Object.fromEntries(results) };
}

/** What `/readyz` asks: Postgres (`select 1` on the pool) and Redis (`PING` on a commands client). */
export interface ReadinessTargets {
  postgres: { query(sql: string): Promise<unknown> };
  redis: { ping(): Promise<unknown> };
}

/**
 * A service's metrics port: `createMetricsServer` with the `postgres` and `redis` checks, listening
 * on `host` (METRICS_HOST) and `port` (0: any free port), its close on
 * `undo`. Resolves with the server and the port taken. `setting` names the variable that chose the
 * port (e.g. `DISPATCHER_METRICS_PORT (dispatcher)`), for the error a taken port gives.
 */
export async function serveMetrics(
  registry: Registry,
  port: number,
  targets: ReadinessTargets,
  undo: StopStack,
  setting?: string,
  host = '127.0.0.1',
): Promise<{ server: Server; port: number }> {
  const server = createMetricsServer(registry, [
    { name: 'postgres', check: async () => void (await targets.postgres.query('select 1')) },
    { name: 'redis', check: async () => void (await targets.redis.ping()) },
  ]);
  const taken = await listen(server, port, host, setting);
  undo.push('metrics server', () => closeServer(server));
  return { server, port: taken };
}
