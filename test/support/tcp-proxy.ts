import { createServer, connect, type AddressInfo, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server (Redis, Postgres) that a test can break and mend,
 * so one service instance sees its dependency go away and come back while every other test keeps
 * using the real server directly.
 */
export interface TcpProxy {
  port: number;
  /** Closes every open connection and each new one at once: the server looks stopped. */
  cut(): void;
  /** Accepts new connections but forwards nothing: the server looks hung (only timeouts notice). */
  stall(): void;
  /** Forwards again; connections cut or stalled before stay closed, clients reconnect. */
  restore(): void;
  close(): Promise<void>;
  /** What it has done so far, so that a test can check that its fault took effect. */
  readonly stats: TcpProxyStats;
  /**
   * The local ports of its open connections to the server: the client ports the server sees for
   * what came through the proxy (Postgres's pg_stat_activity.client_port, Redis's CLIENT LIST addr).
   */
  upstreamPorts(): Set<number>;
}

export interface TcpProxyStats {
  /** Client connections forwarded to the server. */
  forwarded: number;
  /** Client connections open now (forwarded or held by a stall). */
  open: number;
  /** Client connections it closed on cut() or stall(). */
  dropped: number;
  /** Client connections closed on arrival while cut. */
  refused: number;
}

type Mode = 'forward' | 'cut' | 'stall';

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: Mode = 'forward';
  const open = new Set<Socket>();
  const clients = new Set<Socket>();
  const upstreams = new Set<Socket>();
  const stats = { forwarded: 0, dropped: 0, refused: 0 };
  const track = (s: Socket, kind?: Set<Socket>): void => {
    open.add(s);
    kind?.add(s);
    s.once('close', () => {
      open.delete(s);
      kind?.delete(s);
    });
    s.on('error', () => undefined);
  };
  const dropAll = (): void => {
    stats.dropped += clients.size;
    for (const s of open) s.destroy();
    open.clear();
    clients.clear();
    upstreams.clear();
  };

  const server = createServer((client) => {
    if (mode === 'cut') {
      stats.refused += 1;
      client.on('error', () => undefined);
      client.destroy();
      return;
    }
    track(client, clients);
    if (mode === 'stall') return; // held open, never answered
    stats.forwarded += 1;
    const upstream = connect(target);
    track(upstream, upstreams);
    client.pipe(upstream);
    upstream.pipe(client);
    const closeBoth = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.once('close', closeBoth);
    upstream.once('close', closeBoth);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });

  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      mode = 'cut';
      dropAll();
    },
    stall() {
      mode = 'stall';
      dropAll();
    },
    restore() {
      if (mode === 'stall') dropAll();
      mode = 'forward';
    },
    close() {
      dropAll();
      return new Promise((resolve) => server.close(() => resolve()));
    },
    get stats() {
      return { ...stats, open: clients.size };
    },
    upstreamPorts: () => new Set([...upstreams].flatMap((u) => (u.localPort === undefined ? [] : [u.localPort]))),
  };
}

/** The same URL with its host and port replaced by the proxy's. */
export function throughProxy(url: string, proxy: TcpProxy): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(proxy.port);
  return u.toString();
}

/** Host and port of a redis:// or postgres:// URL, with the protocol's default port. */
export function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  const defaults: Record<string, number> = { 'redis:': 6379, 'rediss:': 6379, 'postgres:': 5432, 'postgresql:': 5432 };
  return { host: u.hostname, port: u.port ? Number(u.port) : (defaults[u.protocol] ?? 0) };
}
