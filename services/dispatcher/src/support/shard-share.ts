/**
 * How a process's job slots are shared between the queue shards it consumes, for one worker kind:
 * each shard's worker may take whatever the others leave unused, and never fewer than an equal part.
 * So one busy shard (one busy company) may fill the whole pool while the others idle, and when all
 * are busy each keeps its equal part: the total a process runs stays near `limit`, as with one
 * queue, and the fair share and the governor keep their meaning. The over-commit while the shares
 * move is bounded by the other shards' equal parts.
 */
export interface ShardShare {
  /** A job of shard `index` started (+1) or ended (-1); the shards' concurrencies follow. */
  change(index: number, delta: 1 | -1): void;
  /** The limit of the whole process changed (the governor). */
  resize(limit: number): void;
  /** Shard `index`'s share now. */
  concurrency(index: number): number;
  running(): number;
}

export function createShardShare(shards: number, initialLimit: number, apply: (index: number, concurrency: number) => void): ShardShare {
  const running: number[] = Array.from({ length: shards }, () => 0);
  const applied: number[] = Array.from({ length: shards }, () => 0);
  let limit = initialLimit;
  let total = 0;

  const share = (index: number): number => {
    const equal = Math.ceil(limit / shards);
    return Math.max(1, equal, limit - (total - running[index]!));
  };
  const update = (): void => {
    for (let i = 0; i < shards; i++) {
      const next = share(i);
      if (next !== applied[i]) {
        applied[i] = next;
        apply(i, next);
      }
    }
  };
  update();
  return {
    change(index, delta) {
      running[index] = running[index]! + delta;
      total += delta;
      // One shard alone needs no sharing: its worker's concurrency is the limit, as before shards.
      if (shards > 1) update();
    },
    resize(next) {
      limit = next;
      update();
    },
    concurrency: (index) => applied[index]!,
    running: () => total,
  };
}
