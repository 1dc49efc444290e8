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
}

type Mode = 'forward' | 'cut' | 'stall';

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: Mode = 'forward';
  const open = new Set<Socket>();
  const track = (s: Socket): void => {
    open.add(s);
    s.once('close', () => open.delete(s));
    s.on('error', () => undefined);
  };
  const dropAll = (): void => {
    for (const s of open) s.destroy();
    open.clear();
  };

  const server = createServer((client) => {
    track(client);
    if (mode === 'cut') {
      client.destroy();
      return;
    }
    if (mode === 'stall') return; // held open, never answered
    const upstream = connect(target);
    track(upstream);
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
