import type { RedisClient } from '@svc/observability';

/**
 * Failed admin authentications a client address may make per window before it is refused (429)
 * until the window ends. An operator mistypes a few times; a guesser needs millions: 10 a minute
 * leaves the first alone and holds the second to 14,400 guesses a day per address.
 */
export const ADMIN_AUTH_FAILURES_PER_WINDOW = 10;
/** The window of that count, from an address's first failure. */
export const ADMIN_AUTH_WINDOW_MS = 60_000;

/**
 * Counts the attempt before the token is compared (INCR, and the window's expiry on the first), so
 * concurrent guesses cannot all pass a check made before any of them failed. Returns { attempts
 * in the window, ms left in it }. KEYS[1] = the address's counter.
 */
const ATTEMPT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`;

type RedisWithScript = RedisClient & { svcAdminAttempt(key: string, windowMs: number): Promise<[number, number]> };

export interface AdminAttempt {
  /** False: the address has used up its failures in this window; refuse without comparing. */
  allowed: boolean;
  /** Whole seconds until the window ends (at least 1). */
  retryAfterSeconds: number;
  /** Call when the token was wrong: how many failures the address has in the window. */
  failed(): number;
  /** Call when the token was right: the attempt is not counted against the address. */
  succeeded(): Promise<void>;
}

/**
 * Failed authentications against `/internal/v1` per client address, in Redis so that every gateway
 * instance counts the same failures. The address is the TCP peer's: no `X-Forwarded-For` is
 * believed, so a client cannot choose its own.
 */
export class AdminAuthLimiter {
  private readonly redis: RedisWithScript;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
    readonly limit = ADMIN_AUTH_FAILURES_PER_WINDOW,
    private readonly windowMs = ADMIN_AUTH_WINDOW_MS,
  ) {
    if (!('svcAdminAttempt' in redis)) redis.defineCommand('svcAdminAttempt', { numberOfKeys: 1, lua: ATTEMPT });
    this.redis = redis as RedisWithScript;
  }

  key(address: string): string {
    return `${this.prefix}:admin:auth:${address}`;
  }

  async attempt(address: string): Promise<AdminAttempt> {
    const key = this.key(address);
    const [attempts, ttlMs] = await this.redis.svcAdminAttempt(key, this.windowMs);
    return {
      // The attempts before this one that failed are at most attempts - 1 (successes are taken back).
      allowed: attempts <= this.limit,
      retryAfterSeconds: Math.max(1, Math.ceil(ttlMs / 1000)),
      failed: () => attempts,
      succeeded: async () => {
        await this.redis.decr(key);
      },
    };
  }
}
