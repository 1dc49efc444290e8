import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { createLogger, type Logger } from '@svc/observability';

/**
 * What a service's start has built, to be undone in reverse order by one `stop()`: each step on
 * its own, so a failing step (Redis already gone, say) is logged and the rest still run.
 */
export interface StopStack {
  /** Registers the undo of what was just built. */
  push(name: string, step: () => Promise<unknown>): void;
  /** Rejects with a `StopTimeoutError` when the stop outlasts its `timeoutMs`. */
  stop(): Promise<void>;
}

export interface StopStackOptions {
  /**
   * How long the whole stop may take (SHUTDOWN_TIMEOUT_MS): past it the step still running is
   * logged at error level and `stop()` rejects, so the process can exit instead of waiting on a
   * request or a delivery that never ends. Default: no limit.
   */
  timeoutMs?: number;
}

export class StopTimeoutError extends Error {
  constructor(
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(`stop step "${step}" still running after ${timeoutMs} ms`);
    this.name = 'StopTimeoutError';
  }
}

export function createStopStack(logger: Logger, options: StopStackOptions = {}): StopStack {
  const steps: Array<[string, () => Promise<unknown>]> = [];
  let running = '';
  let stopping: Promise<void> | undefined;
  const run = async (): Promise<void> => {
    for (let next = steps.pop(); next; next = steps.pop()) {
      const [name, step] = next;
      running = name;
      try {
        await step();
      } catch (err) {
        logger.warn({ step: name, err: (err as Error).message }, 'stop step failed');
      }
    }
  };
  // The deadline bounds the whole run, not each step: SHUTDOWN_TIMEOUT_MS is what an operator gives
  // the process as a whole. The stuck step is left pending; the caller exits.
  const withDeadline = (timeoutMs: number): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        logger.error({ step: running, timeoutMs }, 'stop deadline passed; giving up on the step still running');
        reject(new StopTimeoutError(running, timeoutMs));
      }, timeoutMs);
    });
    return Promise.race([run(), late]).finally(() => clearTimeout(timer));
  };
  return {
    push(name, step) {
      steps.push([name, step]);
    },
    // A second stop() (a signal arriving during the first) waits for the same run.
    stop() {
      stopping ??= options.timeoutMs === undefined ? run() : withDeadline(options.timeoutMs);
      return stopping;
    },
  };
}

/**
 * Listens on `port` (0: any free port), on `host` when given (else every address), and resolves with the port taken.
 * `setting` names what chose the port, e.g. `PORT (gateway)`, so that a port another process holds
 * fails with the variable to change rather than Node's bare `EADDRINUSE`.
 */
export async function listen(server: Server, port: number, host?: string, setting?: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException): void => reject(setting === undefined ? err : portError(err, port, host, setting));
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/** A taken or forbidden port as a one-line reason that names its setting; any other error as it came. */
function portError(err: NodeJS.ErrnoException, port: number, host: string | undefined, setting: string): Error {
  const where = host === undefined ? `port ${port}` : `port ${port} on ${host}`;
  if (err.code === 'EADDRINUSE') return new Error(`${where} is taken: set ${setting} to a free port`, { cause: err });
  if (err.code === 'EACCES') return new Error(`${where} is not allowed to this user: set ${setting} to a port above 1023`, { cause: err });
  return err;
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

/** What runService reads of a config: its log level, and what its start must say about it. */
export interface RunnableConfig {
  logLevel: string;
  /** Logged at warn level at every start, before anything is built (e.g. a test-only setting left set). */
  startWarnings?: ReadonlyArray<{ setting: string; message: string }>;
}

export interface ServiceDefinition<Config extends RunnableConfig> {
  /** The `service` field of every log line, and the name a failed start's message begins with. */
  name: string;
  /** Reads every setting once; throws one error listing every problem. */
  loadConfig: () => Config;
  /** Builds every dependency and starts serving; resolves with what undoes it. */
  start: (config: Config, options: { logger: Logger }) => Promise<{ stop(): Promise<void> }>;
  /** What the stop log line says is being finished, e.g. `in-flight requests`. */
  finishing: string;
  /** Tests: where the signals come from. Default `process`. */
  signals?: RunOptions['signals'];
  /** Tests. Default `process.exit`. */
  exit?: (code: number) => void;
}

/**
 * The body of every service's main.ts: settings once and fail fast (exit 2, nothing started, every
 * bad setting listed on stderr), then the logger at the configured level and the settings' warnings
 * at warn level, then `start` under
 * `runUntilSignal`; a start that fails exits 1. Reading `.env` is the caller's (`loadDotEnv`),
 * before this.
 */
export async function runService<Config extends RunnableConfig>(service: ServiceDefinition<Config>): Promise<void> {
  const exit = service.exit ?? ((code: number) => process.exit(code));
  let config: Config;
  try {
    config = service.loadConfig();
  } catch (err) {
    console.error((err as Error).message);
    exit(2);
    return;
  }
  const logger = createLogger(service.name, config.logLevel);
  for (const { setting, message } of config.startWarnings ?? []) logger.warn({ setting }, message);
  try {
    await runUntilSignal(logger, () => service.start(config, { logger }), { finishing: service.finishing, signals: service.signals, exit });
  } catch (err) {
    console.error(`${service.name} failed to start: ${(err as Error).message}`);
    exit(1);
  }
}
