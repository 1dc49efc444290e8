import { randomBytes } from 'node:crypto';
import type { ChainableCommander } from 'ioredis';
import { keySlot, type RedisClient, type RedisKeys } from '@svc/platform';

/**
 * Sliding 60-second log per token, in one Lua script (one round trip, atomic across instances).
 * Redis's own clock is the time source, so gateways with skewed clocks agree.
 * KEYS[1] = the token's window, KEYS[2] = the token's revocation mark: on a cluster both under the
 * token's hash tag (`RedisKeys`), so they share a slot as a script's keys must.
 * ARGV[4] = 'peek': the window is read, not added to (a request the limit does not count).
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
if ARGV[4] == 'peek' then
  allowed = 1
elseif count < limit then
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

type RedisWithScript = RedisClient & {
  svcSlidingWindow(windowKey: string, revokedKey: string, limit: number, windowMs: number, member: string, mode: HitMode): Promise<Reply>;
};

type PipelineWithScript = ChainableCommander & {
  svcSlidingWindow(windowKey: string, revokedKey: string, limit: number, windowMs: number, member: string, mode: HitMode): PipelineWithScript;
};

/** `count`: the request takes a place in the window (or is refused); `peek`: it is let through, uncounted, with the window as it stands. */
export type HitMode = 'count' | 'peek';

/** A hit waiting for the next write to Redis. */
interface Waiting {
  windowKey: string;
  revokedKey: string;
  member: string;
  mode: HitMode;
  resolve(reply: Reply): void;
  reject(err: unknown): void;
}

/** The contract's limit is per minute. */
const WINDOW_MS = 60_000;

export class RateLimiter {
  private readonly redis: RedisWithScript;
  private seq = 0;
  private readonly instance = randomBytes(6).toString('base64url');
  private waiting: Waiting[] = [];

  /**
   * `keyspace` names the windows' keys, `keys.of(keyspace, id, tag)`: `rl` (a token's or a portal
   * session's requests; on one Redis `<prefix>:rl:<id>` as always) unless a limiter of other things
   * says its own.
   */
  constructor(
    redis: RedisClient,
    readonly keys: RedisKeys,
    readonly limit: number,
    private readonly windowMs = WINDOW_MS,
    private readonly keyspace = 'rl',
  ) {
    if (!('svcSlidingWindow' in redis)) {
      redis.defineCommand('svcSlidingWindow', { numberOfKeys: 2, lua: SLIDING_WINDOW });
    }
    this.redis = redis as RedisWithScript;
  }

  /**
   * Counts one hit in `id`'s window, unless `revokedKey` (a token's revocation mark) exists. `tag`:
   * the hash tag `revokedKey` is under on a cluster (the token's hash), which the window shares.
   */
  async hit(id: string, revokedKey: string, tag: string = id, mode: HitMode = 'count'): Promise<RateDecision> {
    // A unique member per request: two requests in the same millisecond are two entries.
    const member = `${this.instance}:${(this.seq = (this.seq + 1) % Number.MAX_SAFE_INTEGER)}`;
    const [allowed, count, first, now] = await this.run(this.keys.of(this.keyspace, id, tag), revokedKey, member, mode);
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

  /**
   * Counts one hit in `id`'s window, which no revocation ends: the script's revocation key is one
   * that nothing writes (`<prefix>:<keyspace>:-`; on a cluster under the window's tag).
   */
  take(id: string): Promise<RateDecision> {
    return this.hit(id, this.keys.of(this.keyspace, '-', id));
  }

  /**
   * The hits of one turn of the event loop go to Redis in one pipeline, one write and one read for
   * all of them, the largest saving on the read path (bench/README.md). Each script still runs
   * atomically. On a cluster a pipeline must stay within one slot, and each token's keys are under
   * its own tag: the batch goes as one pipeline per slot, each to its master.
   */
  private run(windowKey: string, revokedKey: string, member: string, mode: HitMode): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      if (this.waiting.push({ windowKey, revokedKey, member, mode, resolve, reject }) === 1) setImmediate(this.send);
    });
  }

  private readonly send = (): void => {
    const batch = this.waiting;
    this.waiting = [];
    if (!this.keys.cluster) return this.sendBatch(batch);
    const bySlot = new Map<number, Waiting[]>();
    for (const w of batch) {
      const slot = keySlot(w.windowKey);
      const group = bySlot.get(slot);
      if (group) group.push(w);
      else bySlot.set(slot, [w]);
    }
    for (const group of bySlot.values()) this.sendBatch(group);
  };

  private sendBatch(batch: Waiting[]): void {
    // One hit, or a client that is not ready: each on its own, failing as a lone call fails (a
    // cluster client's pipeline would wait for slots an ended client never gets).
    if (batch.length === 1 || this.redis.status !== 'ready') {
      for (const w of batch) this.redis.svcSlidingWindow(w.windowKey, w.revokedKey, this.limit, this.windowMs, w.member, w.mode).then(w.resolve, w.reject);
      return;
    }
    const pipeline = this.redis.pipeline() as PipelineWithScript;
    for (const w of batch) pipeline.svcSlidingWindow(w.windowKey, w.revokedKey, this.limit, this.windowMs, w.member, w.mode);
    pipeline.exec().then(
      (replies) => {
        batch.forEach((w, i) => {
          const [err, reply] = replies?.[i] ?? [new Error('no reply from the rate-limit pipeline'), null];
          if (err) w.reject(err);
          else w.resolve(reply as Reply);
        });
      },
      (err: unknown) => {
        for (const w of batch) w.reject(err);
      },
    );
  }
}
