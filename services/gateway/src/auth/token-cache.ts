import type { RedisClient, RedisKeys } from '@svc/platform';
import type { ChainableCommander } from 'ioredis';
import type { Principal } from './principal';

export interface TokenCacheOptions {
  /** Lifetime of an entry (the contract's 60 s). */
  ttlMs?: number;
  /** Bound on memory of the valid entries: the oldest go first. */
  maxEntries?: number;
  /**
   * Bound on the entries of tokens known to be invalid, kept apart: any caller can make those by the
   * thousand (well-formed random tokens), and in one shared bound they would push valid ones out.
   */
  maxInvalidEntries?: number;
  now?: () => number;
}

/** How long a revoked hash stays marked in Redis: longer than any instance may cache it. */
export const REVOKED_TTL_SECONDS = 120;

interface Entry<T> {
  value: T;
  expiresAt: number;
}

/**
 * Token-hash → principal, per gateway instance, for 60 s. Rotation reaches every instance twice:
 * a pub/sub message drops the entry, and a short-lived `revoked` key in Redis is checked by the
 * rate-limit script on every request, so even an instance whose message is still in flight
 * refuses the old token on the very next request.
 */
export class TokenCache {
  private readonly entries = new Map<string, Entry<Principal>>();
  /** Hashes known to be invalid (a lookup found nothing), apart from the valid ones. */
  private readonly invalid = new Map<string, Entry<null>>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly maxInvalidEntries: number;
  private readonly now: () => number;
  /** Bumped on every invalidation: a lookup that started before one does not cache its result. */
  private epoch = 0;
  readonly channel: string;

  constructor(
    private readonly redis: RedisClient,
    private readonly subscriber: RedisClient,
    private readonly keys: RedisKeys,
    options: TokenCacheOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 100_000;
    this.maxInvalidEntries = options.maxInvalidEntries ?? 10_000;
    this.now = options.now ?? Date.now;
    this.channel = keys.shared('auth:invalidate');
  }

  /**
   * On a cluster the channel is sharded (SSUBSCRIBE/SPUBLISH): a message stays within the shard
   * that owns the channel's slot, where every gateway's subscriber listens, instead of PUBLISH's
   * broadcast over the cluster bus to every node. The channel is under the stack's hash tag, where
   * every gateway subscribes; the revoked marks are each under their token's tag, so that they
   * spread, and are set before the message is published. Should a failover drop a message, the
   * revoked key still refuses the token on its next request.
   */
  private get sharded(): boolean {
    return this.subscriber.isCluster;
  }

  async start(): Promise<void> {
    const hear = (channel: string, message: string): void => {
      if (channel === this.channel) this.onInvalidate(message);
    };
    if (this.sharded) {
      this.subscriber.on('smessage', hear);
      await this.subscriber.ssubscribe(this.channel);
    } else {
      this.subscriber.on('message', hear);
      await this.subscriber.subscribe(this.channel);
    }
  }

  async stop(): Promise<void> {
    await (this.sharded ? this.subscriber.sunsubscribe(this.channel) : this.subscriber.unsubscribe(this.channel));
  }

  /** A token's revocation mark: `<prefix>:auth:revoked:<hash>`, under the hash's tag on a cluster (the rate-limit window shares it). */
  revokedKey(hash: string): string {
    return this.keys.of('auth:revoked', hash);
  }

  currentEpoch(): number {
    return this.epoch;
  }

  /** undefined: not cached; null: cached as invalid. */
  get(hash: string): Principal | null | undefined {
    return fresh(this.entries, hash, this.now()) ?? fresh(this.invalid, hash, this.now());
  }

  /** Caches a lookup's result (null: no such token), unless an invalidation happened since it began. */
  set(hash: string, value: Principal | null, epochAtLookup: number): void {
    if (epochAtLookup !== this.epoch) return;
    const expiresAt = this.now() + this.ttlMs;
    if (value === null) put(this.invalid, this.maxInvalidEntries, hash, { value, expiresAt });
    else put(this.entries, this.maxEntries, hash, { value, expiresAt });
  }

  /** How many entries of each kind are held (what the bounds bound). */
  sizes(): { valid: number; invalid: number } {
    return { valid: this.entries.size, invalid: this.invalid.size };
  }

  delete(hash: string): void {
    this.entries.delete(hash);
    this.invalid.delete(hash);
    this.epoch++;
  }

  /** Called after the change is committed: marks the hashes revoked and tells every instance. */
  invalidate(hashes: string[], opts: { revoke: boolean }): Promise<void> {
    return this.broadcast(hashes, opts.revoke ? (multi, key) => void multi.set(key, '1', 'EX', REVOKED_TTL_SECONDS) : undefined);
  }

  /**
   * Called after the change is committed: lifts the revocation marks of hashes that work again (a
   * branch's tokens once branches are enabled again) and tells every instance to drop what it
   * cached of them, a failed lookup included.
   */
  restore(hashes: string[]): Promise<void> {
    return this.broadcast(hashes, (multi, key) => void multi.del(key));
  }

  /**
   * Each hash's revocation mark changed by `mark` (if any), then the hashes published to every
   * instance: on one Redis in one MULTI; on a cluster, where the marks are in their tokens' slots
   * and a MULTI stays within one, each mark in a MULTI of its own, all of them before the message.
   */
  private async broadcast(hashes: string[], mark: ((multi: ChainableCommander, key: string) => void) | undefined): Promise<void> {
    if (hashes.length === 0) return;
    const message = JSON.stringify(hashes);
    if (this.keys.cluster) {
      if (mark) {
        await Promise.all(
          hashes.map((h) => {
            const one = this.redis.multi();
            mark(one, this.revokedKey(h));
            return one.exec();
          }),
        );
      }
      await this.redis.spublish(this.channel, message);
    } else {
      const multi = this.redis.multi();
      if (mark) for (const h of hashes) mark(multi, this.revokedKey(h));
      multi.publish(this.channel, message);
      await multi.exec();
    }
    this.onInvalidate(message);
  }

  private onInvalidate(message: string): void {
    this.epoch++;
    try {
      const hashes: unknown = JSON.parse(message);
      if (Array.isArray(hashes)) {
        for (const h of hashes) {
          if (typeof h !== 'string') continue;
          this.entries.delete(h);
          this.invalid.delete(h);
        }
      }
    } catch {
      this.entries.clear();
      this.invalid.clear();
    }
  }
}

/** The entry's value while it lasts; an expired one is dropped. */
function fresh<T>(map: Map<string, Entry<T>>, hash: string, now: number): T | undefined {
  const entry = map.get(hash);
  if (!entry) return undefined;
  if (entry.expiresAt <= now) {
    map.delete(hash);
    return undefined;
  }
  return entry.value;
}

/** Sets the entry, making room first by dropping the map's oldest (insertion order) at its bound. */
function put<T>(map: Map<string, Entry<T>>, max: number, hash: string, entry: Entry<T>): void {
  if (!map.has(hash) && map.size >= max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
  map.set(hash, entry);
}
