// `pnpm start` asks this first: are Postgres and Redis answering where the settings say?
// If not, it says exactly what is missing and how to get it, instead of a stack trace.
import { existsSync } from 'node:fs';
import net from 'node:net';

if (existsSync('.env')) process.loadEnvFile('.env');
const db = new URL(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/svc');
const redis = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');

const reach = (host, port) =>
  new Promise((resolve) => {
    const s = net.connect({ host: host.replace(/^\[|\]$/g, ''), port, timeout: 1500 });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
    s.once('timeout', () => (s.destroy(), resolve(false)));
  });

const missing = [];
if (!(await reach(db.hostname, Number(db.port || 5432)))) missing.push(`PostgreSQL at ${db.hostname}:${db.port || 5432} (DATABASE_URL)`);
if (!(await reach(redis.hostname, Number(redis.port || 6379)))) missing.push(`Redis at ${redis.hostname}:${redis.port || 6379} (REDIS_URL)`);

if (missing.length) {
  console.error(`Cannot start: nothing answers for\n  - ${missing.join('\n  - ')}\n`);
  console.error('On this machine, `pnpm services` starts them (installing them with apt-get when absent).');
  console.error('Elsewhere, point DATABASE_URL and REDIS_URL at running servers (a .env file at the root is read),');
  console.error('or run the whole stack with `docker compose up`.');
  process.exit(1);
}
