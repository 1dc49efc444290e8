/**
 * What a test fixture built, undone newest first by one `run()`. Every step runs even when an
 * earlier one fails (the first failure is thrown once all have run), and a second `run()` waits for
 * the first instead of undoing anything twice: so a fixture can undo a start that failed halfway,
 * and a test may stop an instance itself before the fixture stops everything.
 */
export interface Teardown {
  /** Registers the undo of what was just built. */
  push(step: () => unknown): void;
  run(): Promise<void>;
}

export function createTeardown(): Teardown {
  const steps: Array<() => unknown> = [];
  let running: Promise<void> | undefined;
  const runAll = async (): Promise<void> => {
    const failures: unknown[] = [];
    for (let step = steps.pop(); step; step = steps.pop()) {
      try {
        await step();
      } catch (err) {
        failures.push(err);
      }
    }
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) throw new AggregateError(failures, `teardown: ${failures.length} steps failed`);
  };
  return {
    push(step) {
      steps.push(step);
    },
    run() {
      running ??= runAll();
      return running;
    },
  };
}
