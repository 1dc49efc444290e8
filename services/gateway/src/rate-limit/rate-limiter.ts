import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * Sliding 60-second log per token, in one Lua script (one round trip, atomic across instances).
 * Redis's own clock is the time source, so gateways with skewed clocks agree.
 * KEYS[1] = the token's window, KEYS[2] = the token's revocation mark.
 * Returns { allowed (1/0, or -1 when revoked), count in window, oldest entry (ms), now (ms) }.
 */
const SLIDING_WINDOW = `
if redis.call('EXISTS', KEYS[2]) == 1 then return {-1, 0, 0, 0} end
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  count = count + 1
  allowed = 1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local first = now
if oldest[2] then first = tonumber(oldest[2]) end
return {allowed, count, first, now}
`;

export interface RateDecision {
  revoked: boolean;
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds at which a slot frees. */
  resetSeconds: number;
  /** Whole seconds to wait before a slot frees (at least 1). */
  retryAfterSeconds: number;
}

type Reply = [number, number, number, number];

interface RedisWithScript extends Redis {
  svcSlidingWindow(windowKey: string, revokedKey: string, limit: number, windowMs: number, member: string): Promise<Reply>;
}

export class RateLimiter {
  private readonly redis: RedisWithScript;
  private seq = 0;
  private readonly instance = randomBytes(6).toString('base64url');

  constructor(
    redis: Redis,
    private readonly prefix: string,
    readonly limit: number,
    private readonly windowMs = 60_000,
  ) {
    if (!('svcSlidingWindow' in redis)) {
      redis.defineCommand('svcSlidingWindow', { numberOfKeys: 2, lua: SLIDING_WINDOW });
    }
    this.redis = redis as RedisWithScript;
  }

  async hit(tokenId: string, revokedKey: string): Promise<RateDecision> {
    // A unique member per request: two requests in the same millisecond are two entries.
    const member = `${this.instance}:${(this.seq = (this.seq + 1) % Number.MAX_SAFE_INTEGER)}`;
    const [allowed, count, first, now] = await this.redis.svcSlidingWindow(
      `${this.prefix}:rl:${tokenId}`,
      revokedKey,
      this.limit,
      this.windowMs,
      member,
    );
    if (allowed === -1) {
      return { revoked: true, allowed: false, limit: this.limit, remaining: 0, resetSeconds: 0, retryAfterSeconds: 0 };
    }
    const freesAt = first + this.windowMs;
    return {
      revoked: false,
      allowed: allowed === 1,
      limit: this.limit,
      remaining: Math.max(0, this.limit - count),
      resetSeconds: Math.ceil(freesAt / 1000),
      retryAfterSeconds: Math.max(1, Math.ceil((freesAt - now) / 1000)),
    };
  }
}
