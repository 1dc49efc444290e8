import { LISTEN_LEASE_MS, LISTEN_LEASE_RENEW_MS, listenKeys } from '@svc/contracts';
import type { Logger } from '@svc/observability';
import { createPeriodicTask, type Db, type PeriodicTask, type RedisClient } from '@svc/platform';
import { openSessionsOlderThan } from './listen.repository';
import { endSessions } from './listen.service';

/**
 * Ends the open sessions whose lease has lapsed: their gateway died without seeing the stream
 * close, or the tool never opened the stream. Every gateway runs it; ending a session twice is a
 * no-op. Sessions younger than a lease are spared (their lease was set as they opened).
 */
export function createListenSweeper(deps: { db: Db; redis: RedisClient; prefix: string; logger: Logger }): PeriodicTask {
  return createPeriodicTask({
    name: 'listening sessions sweep',
    logger: deps.logger,
    intervalMs: LISTEN_LEASE_RENEW_MS,
    run: async () => {
      const open = await openSessionsOlderThan(deps.db, LISTEN_LEASE_MS);
      if (open.length === 0) return;
      // One key at a time: on a cluster the sessions' keys live in different slots.
      const held = await Promise.all(open.map((id) => deps.redis.exists(listenKeys.lease(deps.prefix, id))));
      const lapsed = open.filter((_, i) => held[i] === 0);
      const ended = await endSessions(deps, lapsed);
      if (ended.length > 0) deps.logger.info({ escuchas: ended }, 'listening sessions ended: their lease lapsed');
    },
  });
}
