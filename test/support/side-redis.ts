import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';

/**
 * A private `redis-server` on a free loopback port, for tests that break Redis itself (kill it,
 * restart it with its append-only file, restart it empty) without touching the machine's shared
 * Redis. Its data lives in a temp dir of its own; `stop()` kills it and removes the dir.
 *
 *   const redis = await startSideRedis({ appendonly: true });
 *   redis.url                                // redis://127.0.0.1:<port>
 *   await redis.kill();                      // SIGKILL: the clients see the server vanish
 *   await redis.start();                     // same port, same dir: replays the append-only file
 *   await redis.kill(); redis.wipe(); await redis.start();   // back empty
 *   await redis.stop();
 */
export interface SideRedisOptions {
  /** `--appendonly yes` (fsync everysec, as docker-compose.yml runs it) or no. Default false. */
  appendonly?: boolean;
  /** Further `redis-server` arguments. */
  args?: string[];
  /** How long a start may take to answer PONG (AOF replay included). Default 10000 ms. */
  startTimeoutMs?: number;
}

export interface SideRedis {
  port: number;
  /** `redis://127.0.0.1:<port>`. */
  url: string;
  /** Its working directory (append-only file, logs). */
  dir: string;
  /** Whether the server process is alive. */
  readonly running: boolean;
  /** Starts it again on the same port and dir; resolves once it answers PONG (not LOADING). */
  start(): Promise<void>;
  /** SIGKILL, resolved once the process has exited. No-op when it is not running. */
  kill(): Promise<void>;
  /** Deletes its data (append-only file, dumps) while it is stopped: the next start is empty. */
  wipe(): void;
  /** Kills it and removes its dir; safe to call twice. */
  stop(): Promise<void>;
}

/** One PING over a raw connection: true on +PONG, false on anything else (refused, -LOADING). */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let answer = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (b: Buffer) => {
      answer += b.toString('utf8');
      if (answer.includes('\r\n')) done(answer.startsWith('+PONG'));
    });
  });
}

export async function startSideRedis(options: SideRedisOptions = {}): Promise<SideRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'svc-side-redis-'));
  const startTimeoutMs = options.startTimeoutMs ?? 10_000;
  const args = [
    '--port', String(port),
    '--bind', '127.0.0.1',
    '--save', '',
    '--appendonly', options.appendonly ? 'yes' : 'no',
    '--appendfsync', 'everysec',
    '--maxmemory-policy', 'noeviction',
    '--dir', dir,
    '--logfile', join(dir, 'redis.log'),
    ...(options.args ?? []),
  ];
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let removed = false;
  // Should the test process die first, the server must not outlive it.
  const killOnExit = (): void => void child?.kill('SIGKILL');
  process.on('exit', killOnExit);

  const alive = (): boolean => child !== undefined && child.exitCode === null && child.signalCode === null;

  const redis: SideRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get running() {
      return alive();
    },
    async start() {
      if (alive()) throw new Error(`side redis :${port} is already running`);
      const started = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      started.stderr!.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
      child = started;
      exited = new Promise<void>((resolve) => started.once('exit', () => resolve()));
      const end = Date.now() + startTimeoutMs;
      while (!(await ping(port))) {
        if (started.exitCode !== null) throw new Error(`redis-server :${port} exited with ${started.exitCode}: ${stderr}`);
        if (Date.now() > end) throw new Error(`redis-server :${port} did not answer PONG within ${startTimeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async kill() {
      if (!alive()) return;
      child!.kill('SIGKILL');
      await exited;
    },
    wipe() {
      if (alive()) throw new Error('wipe() needs the server stopped');
      for (const entry of readdirSync(dir)) if (entry !== 'redis.log') rmSync(join(dir, entry), { recursive: true, force: true });
    },
    async stop() {
      await redis.kill();
      process.off('exit', killOnExit);
      if (!removed) rmSync(dir, { recursive: true, force: true });
      removed = true;
    },
  };
  try {
    await redis.start();
  } catch (err) {
    await redis.stop();
    throw err;
  }
  return redis;
}
