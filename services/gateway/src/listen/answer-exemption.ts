import type { Request } from 'express';
import { listenKeys } from '@svc/contracts';
import type { RedisClient } from '@svc/platform';
import type { UncountedRequest } from '../rate-limit/rate-limit.middleware';

/** An answer to one attempt, as the API's router sees its path (under /api/v1): the session, then the attempt. */
const ANSWER_PATH = /^\/escuchas\/([0-9a-fA-F-]{36})\/respuestas\/([A-Za-z0-9._-]{1,200})$/;

/**
 * `svc listen`'s answer to an attempt a dispatcher is waiting for is owed to the platform's own
 * delivery, not an integrator's request: it is left out of the token's rate limit, or a busy
 * sandbox would see its local receiver's 200s refused with 429 and its events sent three times.
 * The dispatcher marks each attempt it waits for (`listenKeys.waiting`); the first answer takes the
 * mark, so the uncounted requests are at most the platform's attempts, one each. Any other request
 * (a second answer, a late one, a wrong id) is counted as usual.
 */
export function waitingAnswer(redis: Pick<RedisClient, 'del'>, prefix: string): UncountedRequest {
  return async (req: Request) => {
    if (req.method !== 'POST') return false;
    const m = ANSWER_PATH.exec(req.path);
    if (!m) return false;
    return (await redis.del(listenKeys.waiting(prefix, m[1]!.toLowerCase(), m[2]!))) === 1;
  };
}
