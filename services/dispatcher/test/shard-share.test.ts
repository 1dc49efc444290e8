import { createShardShare } from '../src/support/shard-share';

describe('the shards of a process share its limit', () => {
  function share(shards: number, limit: number) {
    const applied = new Map<number, number>();
    const s = createShardShare(shards, limit, (i, n) => applied.set(i, n));
    return { s, applied };
  }

  it('one shard: its worker has the whole limit, as before shards', () => {
    const { s, applied } = share(1, 50);
    expect(applied.get(0)).toBe(50);
    for (let i = 0; i < 30; i++) s.change(0, 1);
    expect(s.concurrency(0)).toBe(50);
    s.resize(80);
    expect(applied.get(0)).toBe(80);
  });

  it('idle shards leave a busy one the whole limit; as they fill, each keeps at least an equal part', () => {
    const { s } = share(3, 60);
    // Nothing running: each may take all 60.
    expect([0, 1, 2].map((i) => s.concurrency(i))).toEqual([60, 60, 60]);
    for (let i = 0; i < 60; i++) s.change(0, 1);
    // Shard 0 holds everything: the others keep their equal part (20), shard 0 its 60.
    expect([0, 1, 2].map((i) => s.concurrency(i))).toEqual([60, 20, 20]);
    for (let i = 0; i < 20; i++) s.change(1, 1);
    // Shard 1 took its part: shard 0 may run 40 from now on, shard 2 still 20.
    expect([0, 1, 2].map((i) => s.concurrency(i))).toEqual([40, 20, 20]);
    for (let i = 0; i < 40; i++) s.change(0, -1);
    expect(s.running()).toBe(40);
    expect([0, 1, 2].map((i) => s.concurrency(i))).toEqual([40, 40, 20]);
  });

  it('follows the governor: a larger limit raises every share', () => {
    const { s, applied } = share(2, 10);
    for (let i = 0; i < 10; i++) s.change(1, 1);
    expect([applied.get(0), applied.get(1)]).toEqual([5, 10]);
    s.resize(40);
    expect([applied.get(0), applied.get(1)]).toEqual([30, 40]);
  });
});
