import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port';

const run = promisify(execFile);

/**
 * A private Redis Cluster of `masters` masters (and optionally replicas of each) on loopback ports,
 * for the cluster suite (`pnpm test:cluster`), the chaos failover and `pnpm bench:scale`, never
 * touching the machine's shared Redis. Each node's
 * cluster config and log live in one temp dir; `stop()` kills them and removes it.
 *
 *   const cluster = await startRedisCluster();
 *   cluster.nodes        // '127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3' (REDIS_CLUSTER_NODES)
 *   await cluster.stop();
 */
export interface RedisCluster {
  /** Every node's port: the masters first (in `--cluster create` order), then their replicas. */
  ports: number[];
  /** `host:port,...`, as `REDIS_CLUSTER_NODES` takes it. */
  nodes: string;
  dir: string;
  /** SIGKILLs the node on `port`, resolved once it has exited (a failover's cause). */
  kill(port: number): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Replicas per master (`--cluster-replicas`). Default 0. */
  replicasPerMaster?: number;
  /** `cluster-node-timeout`: how long a node is unreachable before a failover. Default 5000 ms. */
  nodeTimeoutMs?: number;
  /**
   * The nodes' ports (masters and replicas, as many), instead of free ones: each node also listens
   * on its port + 10000 (the cluster bus), which a free port near the top of the range cannot.
   */
  ports?: number[];
}

export async function startRedisCluster(masters = 3, timeoutMs = 20_000, options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const replicas = options.replicasPerMaster ?? 0;
  const dir = mkdtempSync(join(tmpdir(), 'svc-redis-cluster-'));
  const children: ChildProcess[] = [];
  const byPort = new Map<number, ChildProcess>();
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
    const ports: number[] = [...(options.ports ?? [])];
    if (ports.length && ports.length !== masters * (1 + replicas)) throw new Error(`redis cluster: ${ports.length} ports for ${masters * (1 + replicas)} nodes`);
    while (ports.length < masters * (1 + replicas)) ports.push(await freePort());
    for (const port of ports) {
      const child = spawn(
        'redis-server',
        [
          '--port', String(port),
          '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes',
          '--cluster-config-file', join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 5000),
          '--appendonly', 'no',
          '--save', '',
          '--maxmemory-policy', 'noeviction',
          '--dir', dir,
          '--logfile', join(dir, `redis-${port}.log`),
        ],
        { stdio: 'ignore' },
      );
      children.push(child);
      byPort.set(port, child);
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
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes']);
    // Every node has to agree before a client's first CLUSTER SLOTS: a node still gossiping answers
    // with part of the map, or CLUSTERDOWN.
    for (const port of ports) {
      await until(`:${port} did not reach cluster_state:ok`, async () => (await cli(port, 'CLUSTER', 'INFO')).stdout.includes('cluster_state:ok'));
    }
    // A replica that has not finished its first sync cannot take over.
    for (const port of replicas ? ports : []) {
      await until(`:${port} did not finish its sync`, async () => {
        const info = (await cli(port, 'INFO', 'replication')).stdout;
        return info.includes('role:master') || info.includes('master_link_status:up');
      });
    }
    const kill = async (port: number): Promise<void> => {
      const child = byPort.get(port);
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await exited;
    };
    return { ports, nodes: addresses.join(','), dir, kill, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
