import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port';

const run = promisify(execFile);

/**
 * A private Redis Cluster of `masters` masters (no replicas) on free loopback ports, for the
 * cluster suite (`pnpm test:cluster`), never touching the machine's shared Redis. Each node's
 * cluster config and log live in one temp dir; `stop()` kills them and removes it.
 *
 *   const cluster = await startRedisCluster();
 *   cluster.nodes        // '127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3' (REDIS_CLUSTER_NODES)
 *   await cluster.stop();
 */
export interface RedisCluster {
  ports: number[];
  /** `host:port,...`, as `REDIS_CLUSTER_NODES` takes it. */
  nodes: string;
  dir: string;
  stop(): Promise<void>;
}

export async function startRedisCluster(masters = 3, timeoutMs = 20_000): Promise<RedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-redis-cluster-'));
  const children: ChildProcess[] = [];
  const killAll = (): void => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  // Should the test process die first, the servers must not outlive it.
  process.on('exit', killAll);
  const stop = async (): Promise<void> => {
    const exits = children
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map((c) => new Promise<void>((resolve) => c.once('exit', () => resolve())));
    killAll();
    await Promise.all(exits);
    process.off('exit', killAll);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const ports: number[] = [];
    for (let i = 0; i < masters; i++) ports.push(await freePort());
    for (const port of ports) {
      const child = spawn(
        'redis-server',
        [
          '--port', String(port),
          '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes',
          '--cluster-config-file', join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout', '5000',
          '--appendonly', 'no',
          '--save', '',
          '--maxmemory-policy', 'noeviction',
          '--dir', dir,
          '--logfile', join(dir, `redis-${port}.log`),
        ],
        { stdio: 'ignore' },
      );
      children.push(child);
    }
    const cli = (port: number, ...args: string[]) => run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]);
    const end = Date.now() + timeoutMs;
    const until = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
      while (!(await ok().catch(() => false))) {
        if (Date.now() > end) throw new Error(`redis cluster: ${what} within ${timeoutMs} ms (logs in ${dir})`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    for (const port of ports) await until(`:${port} did not answer PONG`, async () => (await cli(port, 'PING')).stdout.trim() === 'PONG');
    const addresses = ports.map((p) => `127.0.0.1:${p}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes']);
    // Every node has to agree before a client's first CLUSTER SLOTS: a node still gossiping answers
    // with part of the map, or CLUSTERDOWN.
    for (const port of ports) {
      await until(`:${port} did not reach cluster_state:ok`, async () => (await cli(port, 'CLUSTER', 'INFO')).stdout.includes('cluster_state:ok'));
    }
    return { ports, nodes: addresses.join(','), dir, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
