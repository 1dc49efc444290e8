import type { Logger } from '@svc/observability';

export interface PeriodicTask {
  /** The first pass after `firstDelayMs`, then one `intervalMs` after each pass ends. */
  start(): void;
  /** True once `stop()` was called: a long pass checks it between its batches. */
  stopped(): boolean;
  /** No new pass starts; waits for the one in progress. */
  stop(): Promise<void>;
}

/**
 * A background pass run again and again (the reconciler, the retentions): never two at once, a
 * failed pass logged and tried again at the next interval, timers that do not keep the process
 * alive, and a stop that waits for the pass in progress.
 */
export function createPeriodicTask(options: {
  /** Names the task in the warning of a failed pass. */
  name: string;
  logger: Logger;
  intervalMs: number;
  /** Before the first pass. Default `intervalMs`. */
  firstDelayMs?: number;
  run: () => Promise<unknown>;
}): PeriodicTask {
  const { name, logger, intervalMs, run } = options;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  let stopped = false;

  const schedule = (delayMs: number): void => {
    timer = setTimeout(() => {
      running = run()
        .catch((err: unknown) => logger.warn({ err: (err as Error).message }, `${name} pass failed; will retry`))
        .finally(() => {
          running = undefined;
          if (!stopped) schedule(intervalMs);
        });
    }, delayMs);
    timer.unref();
  };

  return {
    start: () => schedule(options.firstDelayMs ?? intervalMs),
    stopped: () => stopped,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
