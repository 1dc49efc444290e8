import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { Logger } from './logger';

/**
 * What a service's start has built, to be undone in reverse order by one `stop()`: each step on
 * its own, so a failing step (Redis already gone, say) is logged and the rest still run.
 */
export interface StopStack {
  /** Registers the undo of what was just built. */
  push(name: string, step: () => Promise<unknown>): void;
  stop(): Promise<void>;
}

export function createStopStack(logger: Logger): StopStack {
  const steps: Array<[string, () => Promise<unknown>]> = [];
  let stopping: Promise<void> | undefined;
  const run = async (): Promise<void> => {
    for (let next = steps.pop(); next; next = steps.pop()) {
      const [name, step] = next;
      try {
        await step();
      } catch (err) {
        logger.warn({ step: name, err: (err as Error).message }, 'stop step failed');
      }
    }
  };
  return {
    push(name, step) {
      steps.push([name, step]);
    },
    // A second stop() (a signal arriving during the first) waits for the same run.
    stop() {
      stopping ??= run();
      return stopping;
    },
  };
}

/** Listens on `port` (0: any free port) and resolves with the port taken. */
export async function listen(server: Server, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/** Stops accepting connections; requests in flight finish, idle keep-alive sockets are closed. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    // Idle keep-alive sockets would hold close() open.
    server.closeIdleConnections();
  });
}

export interface RunOptions {
  /** What the stop log line says is being finished, e.g. `in-flight requests`. */
  finishing: string;
  /** Where the signals come from. Default `process`. */
  signals?: Pick<NodeJS.EventEmitter, 'on'>;
  /** Default `process.exit`. */
  exit?: (code: number) => void;
}

/**
 * Runs a service until the first SIGINT or SIGTERM, then stops it and exits (0 after a clean stop,
 * 1 otherwise). The handlers are in place before `start` begins: a signal that arrives while the
 * service is still starting lets the start finish, then stops what it built, instead of Node's
 * default of dying with connections half open. Resolves once started; rejects if `start` fails.
 */
export async function runUntilSignal(
  logger: Logger,
  start: () => Promise<{ stop(): Promise<void> }>,
  options: RunOptions,
): Promise<void> {
  const signals = options.signals ?? process;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const started = start();
  let stopping = false;
  const onSignal = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, `stopping: finishing ${options.finishing}`);
    started.then(
      (service) => service.stop().then(() => exit(0), () => exit(1)),
      () => undefined, // a failed start is reported by the caller
    );
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) signals.on(signal, () => onSignal(signal));
  await started;
}
