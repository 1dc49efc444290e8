import type { RedisClient, RedisKeys } from '@svc/platform';

/**
 * Counts one failure (INCR, and the window's expiry on the first) and returns { failures in the
 * window, ms left in it }. KEYS[1] = the address's counter.
 */
const FAILURE = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`;

/** { failures in the window (0 without one), ms left in it }. KEYS[1] = the address's counter. */
const STANDING = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
return {n, redis.call('PTTL', KEYS[1])}
`;

type Reply = [failures: number, ttlMs: number];
type RedisWithScripts = RedisClient & {
  svcAuthFailure(key: string, windowMs: number): Promise<Reply>;
  svcAuthStanding(key: string): Promise<Reply>;
};

export interface FailureStanding {
  /** The address has used up its failures in this window: refuse, whatever the token. */
  held: boolean;
  /** Failures in the window, this one included when it was one. */
  failures: number;
  /** Whole seconds until the window ends (at least 1). */
  retryAfterSeconds: number;
}

/**
 * Failed authentications per client address (`http/client-address.ts`: the TCP peer's, or the one
 * a trusted proxy forwarded), in Redis so that every gateway instance counts the same failures. A
 * failure is counted in one atomic step that also says whether the window is used up, so at most
 * `limit` failures per window are ever answered as such (concurrent ones included: each takes its
 * own count). `check` only reads the count. Keys: `keys.of(keyspace, address)` (under the address's
 * hash tag on a cluster).
 */
export class AuthFailureLimiter {
  private readonly redis: RedisWithScripts;

  constructor(
    redis: RedisClient,
    private readonly keys: RedisKeys,
    readonly limit: number,
    private readonly windowMs: number,
    private readonly keyspace: string,
  ) {
    if (!('svcAuthFailure' in redis)) {
      redis.defineCommand('svcAuthFailure', { numberOfKeys: 1, lua: FAILURE });
      redis.defineCommand('svcAuthStanding', { numberOfKeys: 1, lua: STANDING });
    }
    this.redis = redis as RedisWithScripts;
  }

  key(address: string): string {
    return this.keys.of(this.keyspace, address);
  }

  /** Counts a failure; held when it was one past the limit. */
  async failed(address: string): Promise<FailureStanding> {
    return this.standing(await this.redis.svcAuthFailure(this.key(address), this.windowMs), true);
  }

  /** Before a lookup: held when the window is already used up. */
  async check(address: string): Promise<FailureStanding> {
    return this.standing(await this.redis.svcAuthStanding(this.key(address)), false);
  }

  private standing([failures, ttlMs]: Reply, counted: boolean): FailureStanding {
    return {
      held: counted ? failures > this.limit : failures >= this.limit,
      failures,
      retryAfterSeconds: Math.max(1, Math.ceil((ttlMs > 0 ? ttlMs : this.windowMs) / 1000)),
    };
  }
}
