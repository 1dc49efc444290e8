import { performance } from 'node:perf_hooks';
import { createMicroBatcher, type MicroBatchOptions } from '../src/support/micro-batch';
import { sleep } from '../../../test/support/eventually';

/** A batcher whose `run` records each batch it was given and answers each item doubled. */
function recording(options: MicroBatchOptions) {
  const batches: Array<{ items: number[]; at: number }> = [];
  const started = performance.now();
  const batcher = createMicroBatcher<number, number>(async (items) => {
    batches.push({ items, at: performance.now() - started });
    await sleep(1);
    return items.map((i) => i * 2);
  }, options);
  return { batcher, batches };
}

describe('micro-batcher', () => {
  it('runs the items of one turn as one batch, and each caller gets its own result', async () => {
    const { batcher, batches } = recording({});
    const results = await Promise.all([1, 2, 3].map((i) => batcher.submit(i)));
    expect(results).toEqual([2, 4, 6]);
    expect(batches.map((b) => b.items)).toEqual([[1, 2, 3]]);
  });

  it('without linger, an item submitted after the last batch ended runs alone', async () => {
    const { batcher, batches } = recording({});
    await batcher.submit(1);
    await sleep(5);
    await batcher.submit(2);
    expect(batches.map((b) => b.items)).toEqual([[1], [2]]);
  });

  it('with linger, items a few milliseconds apart share a batch, which runs as soon as it is full', async () => {
    const { batcher, batches } = recording({ linger: { ms: 5000, items: 3 } });
    const first = batcher.submit(1);
    await sleep(5);
    const second = batcher.submit(2);
    await sleep(5);
    const third = batcher.submit(3);
    expect(await Promise.all([first, second, third])).toEqual([2, 4, 6]);
    expect(batches.map((b) => b.items)).toEqual([[1, 2, 3]]);
    // Full: it did not wait for the 5 s.
    expect(batches[0]!.at).toBeLessThan(2500);
  });

  it('with linger, a lone item runs once the linger is over', async () => {
    const { batcher, batches } = recording({ linger: { ms: 60, items: 3 } });
    expect(await batcher.submit(7)).toBe(14);
    expect(batches.map((b) => b.items)).toEqual([[7]]);
    expect(batches[0]!.at).toBeGreaterThanOrEqual(55);
  });

  it('does not linger while a batch is running: the items that came meanwhile run next, together', async () => {
    const gate: Array<() => void> = [];
    const batches: number[][] = [];
    const batcher = createMicroBatcher<number, number>(
      async (items) => {
        batches.push(items);
        if (batches.length === 1) await new Promise<void>((r) => gate.push(r));
        return items;
      },
      { maxInFlight: 1, linger: { ms: 5000, items: 10 } },
    );
    const first = batcher.submit(1);
    // The first waits for company; drain makes it run now, and the batch holds.
    const drained = batcher.drain();
    await sleep(5);
    expect(batches).toEqual([[1]]);
    const later = [batcher.submit(2), batcher.submit(3)];
    await sleep(5);
    gate.shift()!();
    await Promise.all([first, ...later, drained]);
    expect(batches).toEqual([[1], [2, 3]]);
  });

  it('drain runs a lingering batch at once', async () => {
    const { batcher, batches } = recording({ linger: { ms: 60_000, items: 5 } });
    const result = batcher.submit(4);
    const started = performance.now();
    await batcher.drain();
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(await result).toBe(8);
    expect(batches.map((b) => b.items)).toEqual([[4]]);
  });

  it('rejects every caller of a batch that fails, and the next batch runs', async () => {
    let fail = true;
    const batcher = createMicroBatcher<number, number>(
      async (items) => {
        if (fail) throw new Error('boom');
        return items;
      },
      { linger: { ms: 20, items: 2 } },
    );
    const failed = await Promise.allSettled([batcher.submit(1), batcher.submit(2)]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await batcher.submit(3)).toBe(3);
  });
});
