/**
 * Groups calls made close together into one call of `run`: items submitted in the same turn of
 * the event loop, or while earlier batches are running, go out together (and, with `linger`, those
 * a few milliseconds apart). Each caller awaits the result of its own item, so nothing is
 * acknowledged before its batch has committed.
 */
export interface MicroBatcher<I, O> {
  submit(item: I): Promise<O>;
  /** Resolves when every item submitted so far has been run. */
  drain(): Promise<void>;
}

export interface MicroBatchOptions {
  /** Largest batch. Default 500. */
  maxBatch?: number;
  /** Batches running at once; more items wait for one to end. Default 2. */
  maxInFlight?: number;
  /**
   * When no batch is running, the first item waits up to `ms` for the batch to reach `items`
   * before it runs; then it runs at once. Default: no wait. For callers that can afford the wait:
   * at a moderate rate, where nothing else makes batches, it makes them.
   */
  linger?: { ms: number; items: number };
}

interface Pending<I, O> {
  item: I;
  resolve(value: O): void;
  reject(err: unknown): void;
}

/** `run` returns one result per item, in the order given. */
export function createMicroBatcher<I, O>(run: (items: I[]) => Promise<O[]>, options: MicroBatchOptions = {}): MicroBatcher<I, O> {
  const maxBatch = options.maxBatch ?? 500;
  const maxInFlight = options.maxInFlight ?? 2;
  let queue: Pending<I, O>[] = [];
  let inFlight = 0;
  let scheduled = false;
  let lingering: NodeJS.Timeout | undefined;
  const idle: Array<() => void> = [];

  const settleIdle = (): void => {
    if (inFlight === 0 && queue.length === 0 && !scheduled) for (const done of idle.splice(0)) done();
  };

  const runBatch = async (batch: Pending<I, O>[]): Promise<void> => {
    try {
      const results = await run(batch.map((p) => p.item));
      batch.forEach((p, i) => p.resolve(results[i] as O));
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  };

  const pump = (): void => {
    while (queue.length > 0 && inFlight < maxInFlight) {
      const batch = queue.slice(0, maxBatch);
      queue = queue.slice(maxBatch);
      inFlight++;
      void runBatch(batch).finally(() => {
        inFlight--;
        runQueued();
      });
    }
  };

  const runQueued = (): void => {
    pump();
    settleIdle();
  };

  const stopLingering = (): void => {
    clearTimeout(lingering);
    lingering = undefined;
  };

  return {
    submit(item) {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        const { linger } = options;
        if (linger && inFlight === 0 && !scheduled) {
          if (queue.length < linger.items) {
            lingering ??= setTimeout(() => {
              lingering = undefined;
              runQueued();
            }, linger.ms);
            return;
          }
          stopLingering();
        }
        if (!scheduled && inFlight < maxInFlight) {
          scheduled = true;
          // Wait one turn so the calls made in this one join the same batch.
          setImmediate(() => {
            scheduled = false;
            runQueued();
          });
        }
      });
    },
    drain() {
      // Draining is stopping: what lingers runs now.
      if (lingering) {
        stopLingering();
        pump();
      }
      if (inFlight === 0 && queue.length === 0 && !scheduled) return Promise.resolve();
      return new Promise<void>((resolve) => idle.push(resolve));
    },
  };
}
