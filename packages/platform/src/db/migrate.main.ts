// `pnpm migrate`: applies pending migrations to DATABASE_URL, creating the database if it is missing.
// `pnpm migrate --queue-shards N` (in an image, `node dist/migrate.js --queue-shards N`) then records
// N as the stack's QUEUE_SHARDS: the step of changing it (docs/operations.md), with every process stopped.
import { MAX_QUEUE_SHARDS } from '@svc/contracts';
import { createDb, createPool } from './database';
import { ensureDatabase } from './ensure-database';
import { migrateToLatest } from './migrate';
import { setQueueShards } from './queue-shards';
import { loadDotEnv } from '../settings';

/** The value of `--queue-shards N` (or `--queue-shards=N`); undefined without it. Throws on a bad one. */
function queueShardsArgument(argv: readonly string[]): number | undefined {
  const i = argv.findIndex((a) => a === '--queue-shards' || a.startsWith('--queue-shards='));
  if (i === -1) return undefined;
  const raw = argv[i]!.includes('=') ? argv[i]!.slice('--queue-shards='.length) : argv[i + 1];
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_QUEUE_SHARDS) throw new Error(`--queue-shards must be an integer from 1 to ${MAX_QUEUE_SHARDS} (got ${JSON.stringify(raw ?? '')})`);
  return n;
}

async function main(): Promise<void> {
  const shards = queueShardsArgument(process.argv.slice(2));
  loadDotEnv();
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc';
  await ensureDatabase(url);
  // No statement_timeout (DB_STATEMENT_TIMEOUT_MS is the services'): a migration may rewrite or
  // index a whole table, which takes as long as the table is large.
  const pool = createPool({ connectionString: url, max: 1, statementTimeoutMs: 0 });
  const db = createDb(pool);
  try {
    const applied = await migrateToLatest(db);
    console.log(applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: up to date');
    if (shards !== undefined) {
      const previous = await setQueueShards(db, shards);
      console.log(`QUEUE_SHARDS recorded: ${shards} (was ${previous ?? 'unrecorded'}); start every process with QUEUE_SHARDS=${shards}`);
    }
  } finally {
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
