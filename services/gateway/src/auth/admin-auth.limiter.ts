import type { RedisClient } from '@svc/platform';

/**
 * Failed admin authentications a client address may make per window before it is refused (429)
 * until the window ends. An operator mistypes a few times; a guesser needs millions: 10 a minute
 * leaves the first alone and holds the second to 14,400 guesses a day per address.
 */
export const ADMIN_AUTH_FAILURES_PER_WINDOW = 10;
/** The window of that count, from an address's first failure. */
export const ADMIN_AUTH_WINDOW_MS = 60_000;

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
  svcAdminFailure(key: string, windowMs: number): Promise<Reply>;
  svcAdminStanding(key: string): Promise<Reply>;
};

export interface AdminStanding {
  /** The address has used up its failures in this window: refuse, whatever the token. */
  held: boolean;
  /** Failures in the window, this one included when it was one. */
  failures: number;
  /** Whole seconds until the window ends (at least 1). */
  retryAfterSeconds: number;
}

/**
 * Failed authentications against `/internal/v1` per client address, in Redis so that every gateway
 * instance counts the same failures. The address is the TCP peer's: no `X-Forwarded-For` is
 * believed, so a client cannot choose its own.
 *
 * The token is compared first; then a wrong one is counted in one atomic step that also says
 * whether the window is used up, and a right one only reads the count. So at most `limit` wrong
 * guesses per window are ever answered 401 (concurrent ones included: each takes its own count), a
 * held address learns nothing (a right token gets the same 429), and right tokens, however many at
 * once, never use the window up.
 */
export class AdminAuthLimiter {
  private readonly redis: RedisWithScripts;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
    readonly limit = ADMIN_AUTH_FAILURES_PER_WINDOW,
    private readonly windowMs = ADMIN_AUTH_WINDOW_MS,
  ) {
    if (!('svcAdminFailure' in redis)) {
      redis.defineCommand('svcAdminFailure', { numberOfKeys: 1, lua: FAILURE });
      redis.defineCommand('svcAdminStanding', { numberOfKeys: 1, lua: STANDING });
    }
    this.redis = redis as RedisWithScripts;
  }

  key(address: string): string {
    return `${this.prefix}:admin:auth:${address}`;
  }

  /** Counts a wrong token; held when it was one past the limit. */
  async failed(address: string): Promise<AdminStanding> {
    return this.standing(await this.redis.svcAdminFailure(this.key(address), this.windowMs), true);
  }

  /** Before a right token is let through: held when the window is already used up. */
  async check(address: string): Promise<AdminStanding> {
    return this.standing(await this.redis.svcAdminStanding(this.key(address)), false);
  }

  private standing([failures, ttlMs]: Reply, counted: boolean): AdminStanding {
    return {
      held: counted ? failures > this.limit : failures >= this.limit,
      failures,
      retryAfterSeconds: Math.max(1, Math.ceil((ttlMs > 0 ? ttlMs : this.windowMs) / 1000)),
    };
  }
}
