// Here rather than in @svc/schema: what these helpers add to a bare ioredis client is lifecycle (a
// connection made now, its undo on the StopStack) and health (the /readyz ping), both this
// package's concerns; schema keeps to data shapes and contracts.
import { Redis, type RedisOptions } from 'ioredis';
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

/**
 * A connected client for `role`; its undo (quit, or disconnect when Redis is already gone) is on
 * `undo` as `step` before the connection is tried, so a start that fails here still closes it.
 */
export async function connectRedis(url: string, role: RedisRole, undo: StopStack, step: string): Promise<Redis> {
  const client = new Redis(url, redisOptions(role));
  // Errors surface where they matter: in the command that fails and in /readyz. Unheard, an
  // 'error' event would crash the process.
  client.on('error', () => undefined);
  undo.push(step, () => client.quit().catch(() => client.disconnect()));
  await client.connect();
  return client;
}
