import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '../..');

/**
 * A service as a real child process (`node --import tsx services/<name>/src/main.ts`, as its start
 * script runs it) that a test can SIGKILL and start again with the same settings:
 *
 *   const d = serviceProcess({ name: 'dispatcher-1', entry: 'services/dispatcher/src/main.ts',
 *                              env, readyLine: '"dispatcher started"' });
 *   await d.start();        // resolves once a stdout line contains readyLine
 *   await d.kill();         // SIGKILL, resolved once it has exited
 *   await d.start();        // again, same env
 *   await d.stop();         // SIGTERM (SIGKILL after `stopTimeoutMs`); safe when already dead
 */
export interface ServiceProcessOptions {
  /** For messages and log files. */
  name: string;
  /** The main module, relative to the workspace root. */
  entry: string;
  /** Added to this process's environment. */
  env: Record<string, string>;
  /** A stdout line containing this means started (e.g. `"gateway listening"`). */
  readyLine: string;
  /** Default 30000 ms. */
  startTimeoutMs?: number;
  /** How long stop() waits after SIGTERM before SIGKILL. Default 15000 ms. */
  stopTimeoutMs?: number;
  /** Also appends every output line to this file (debugging a run). */
  logFile?: string;
  /** How many recent output lines are kept in memory. Default 400. */
  keepLines?: number;
  /** Hears every output line of every run as it comes (e.g. to count a log message). */
  onLine?: (line: string) => void;
}

export interface ServiceProcess {
  readonly name: string;
  readonly running: boolean;
  /** The running process's id; undefined before the first start. */
  readonly pid: number | undefined;
  /** How many times it was started. */
  readonly starts: number;
  /** The most recent output lines (stdout and stderr) of every run, oldest first. */
  recentLines(): string[];
  /** The ready line's JSON (pino), e.g. to read the port a gateway logged. */
  readonly readyRecord: Record<string, unknown> | undefined;
  start(): Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

export function serviceProcess(options: ServiceProcessOptions): ServiceProcess {
  const keep = options.keepLines ?? 400;
  const lines: string[] = [];
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let starts = 0;
  let readyRecord: Record<string, unknown> | undefined;
  const killOnExit = (): void => void child?.kill('SIGKILL');
  const alive = (): boolean => child !== undefined && child.exitCode === null && child.signalCode === null;

  const record = (line: string): void => {
    options.onLine?.(line);
    lines.push(line);
    if (lines.length > keep) lines.splice(0, lines.length - keep);
    if (options.logFile) appendFileSync(options.logFile, `${line}\n`);
  };

  const service: ServiceProcess = {
    name: options.name,
    get running() {
      return alive();
    },
    get pid() {
      return child?.pid;
    },
    get starts() {
      return starts;
    },
    get readyRecord() {
      return readyRecord;
    },
    recentLines: () => [...lines],
    async start() {
      if (alive()) throw new Error(`${options.name} is already running`);
      starts += 1;
      readyRecord = undefined;
      record(`--- ${options.name}: start #${starts} at ${new Date().toISOString()}`);
      const started = spawn(process.execPath, ['--import', 'tsx', options.entry], {
        cwd: ROOT,
        env: { ...process.env, ...options.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = started;
      if (starts === 1) process.on('exit', killOnExit);
      exited = new Promise<void>((resolve) => started.once('exit', () => resolve()));
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`${options.name} did not start within ${options.startTimeoutMs ?? 30_000} ms:\n${lines.slice(-20).join('\n')}`));
        }, options.startTimeoutMs ?? 30_000);
        const onExit = (code: number | null, signal: string | null): void => {
          clearTimeout(timer);
          reject(new Error(`${options.name} exited (${code ?? signal}) before it started:\n${lines.slice(-20).join('\n')}`));
        };
        started.once('exit', onExit);
        for (const stream of [started.stdout!, started.stderr!]) {
          let partial = '';
          stream.on('data', (b: Buffer) => {
            const parts = (partial + b.toString('utf8')).split('\n');
            partial = parts.pop() ?? '';
            for (const line of parts) {
              if (!line) continue;
              record(line);
              if (readyRecord === undefined && line.includes(options.readyLine)) {
                try {
                  readyRecord = JSON.parse(line) as Record<string, unknown>;
                } catch {
                  readyRecord = {};
                }
                clearTimeout(timer);
                started.off('exit', onExit);
                resolve();
              }
            }
          });
        }
      });
    },
    async kill(signal = 'SIGKILL') {
      if (!alive()) return;
      child!.kill(signal);
      await exited;
    },
    async stop() {
      if (alive()) {
        const hard = setTimeout(() => void child?.kill('SIGKILL'), options.stopTimeoutMs ?? 15_000);
        child!.kill('SIGTERM');
        await exited;
        clearTimeout(hard);
      }
      process.off('exit', killOnExit);
    },
  };
  return service;
}
