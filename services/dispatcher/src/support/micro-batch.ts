/**
 * Groups calls made close together into one call of `run`: items submitted in the same turn of
 * the event loop, or while earlier batches are running, go out together. Each caller awaits the
 * result of its own item, so nothing is acknowledged before its batch has committed.
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
        pump();
        settleIdle();
      });
    }
  };

  return {
    submit(item) {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        if (!scheduled && inFlight < maxInFlight) {
          scheduled = true;
          // Wait one turn so the calls made in this one join the same batch.
          setImmediate(() => {
            scheduled = false;
            pump();
            settleIdle();
          });
        }
      });
    },
    drain() {
      if (inFlight === 0 && queue.length === 0 && !scheduled) return Promise.resolve();
      return new Promise<void>((resolve) => idle.push(resolve));
    },
  };
}
