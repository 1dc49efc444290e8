// `pnpm bench:retention`: what removing old rows costs the deliveries, in one run, real Postgres and
// Redis on loopback.
//  1. fill: BENCH_OLD_ROWS (1,000,000) ended deliveries 31-60 days old, an attempt each, and their
//     events, written with generate_series into the partitions of their days (then vacuum analyze,
//     as autovacuum would have);
//  2. the real dispatcher (child process, services/dispatcher/src/main.ts) delivers a steady stream
//     over HTTPS to the keep-alive receiver (child process), its queue kept fed from this process;
//  3. rate A: deliveries per second over BENCH_WINDOW seconds with no removal;
//     rate B: the same while the retention (the dispatcher's own code, createRetention, on a pool
//     of its own in this process, as a second dispatcher's pass would be) drops every old day's
//     partitions; over the whole removal;
//     rate C: BENCH_WINDOW seconds after it, to bracket the machine's drift.
// The dispatcher under test runs with RETENTION_DAYS=36500, so its own pass never competes.
// Method and figures: bench/README.md (retention section).
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import { createDayPartition, createDb, createPool, dayOf, queueFor, type Db } from '@svc/platform';
import { JOBS, type ShipmentEventJob } from '@svc/contracts';
import { createLogger } from '@svc/observability';
import { createRetention, type RemovedRows } from '../../services/dispatcher/src/retention/retention.task';
import { endRun, freshDatabase, stopChild } from '../support/bench-process';
import { addEvents, ask, benchWebhooks, child, eventJob, now, sleep, waitDelivered } from '../support/dispatcher-bench';

const ROOT = join(__dirname, '..', '..');
const PG_BASE = (process.env.BENCH_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB_NAME = process.env.BENCH_DB_NAME ?? 'svc_bench_retention';
const PREFIX = `svcbench:ret:${randomBytes(4).toString('hex')}`;
const OLD_ROWS = Number(process.env.BENCH_OLD_ROWS ?? 1_000_000);
const WINDOW_S = Number(process.env.BENCH_WINDOW ?? 20);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 100);
const RECEIVER_PORT = Number(process.env.BENCH_RECEIVER_PORT ?? 3953);
const METRICS_PORT = Number(process.env.BENCH_METRICS_PORT ?? 3954);
/** The feeder keeps at least this many events waiting, so the dispatcher never runs dry. */
const BACKLOG = 4000;

/** Deliveries the dispatcher has counted finished so far (its /metrics: no load on Postgres). */
async function delivered(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${METRICS_PORT}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^svc_webhook_deliveries_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
  return n;
}

/** Deliveries per second from now until `until` resolves. */
async function rateWhile(until: Promise<unknown>): Promise<{ rate: number; seconds: number; deliveries: number }> {
  const [n0, t0] = [await delivered(), now()];
  await until;
  const [n1, t1] = [await delivered(), now()];
  const seconds = (t1 - t0) / 1000;
  return { rate: (n1 - n0) / seconds, seconds, deliveries: n1 - n0 };
}

async function fill(check: pg.Client, db: Db, empresaId: string, webhookId: string): Promise<void> {
  const started = now();
  // The partitions of those days, as the upkeep made them then.
  const today = dayOf(new Date());
  await db.transaction().execute(async (trx) => {
    for (let back = 30; back <= 61; back++) {
      for (const table of ['outbox', 'entregas', 'entrega_intentos'] as const) await createDayPartition(trx, table, new Date(today.getTime() - back * 86_400_000));
    }
  });
  // Spread over 29 days, from 31 to 60 days ago; ids derived from g so the three tables agree.
  const age = `now() - interval '31 days' - (g % 2505600) * interval '1 second'`;
  await check.query(
    `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en, secuencia)
     select md5('ev' || g)::uuid, $1, 'GUIA_CREADA', jsonb_build_object('numeroGuia', 'SVCOLD' || lpad(g::text, 8, '0'), 'estado', 'CREADA'),
            ${age}, ${age}, ${age}, 1
     from generate_series(1, $2::int) g`,
    [empresaId, OLD_ROWS],
  );
  await check.query(
    `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, numero_guia, created_at, particion_en)
     select md5('de' || g)::uuid, $1, md5('ev' || g)::uuid, 'GUIA_CREADA', case when g % 50 = 0 then 'fallida' else 'exitosa' end,
            g % 50 <> 0, case when g % 50 = 0 then 500 else 200 end, 1, ${age}, 'SVCOLD' || lpad(g::text, 8, '0'), ${age}, ${age}
     from generate_series(1, $2::int) g`,
    [webhookId, OLD_ROWS],
  );
  await check.query(
    `insert into entrega_intentos (entrega_id, numero, fecha, status_code, duracion_ms, error, respuesta, particion_en)
     select md5('de' || g)::uuid, 1, ${age}, case when g % 50 = 0 then 500 else 200 end, 12,
            case when g % 50 = 0 then 'HTTP_STATUS' end, '{"ok":true}', ${age}
     from generate_series(1, $1::int) g`,
    [OLD_ROWS],
  );
  await check.query('vacuum analyze outbox, entregas, entrega_intentos');
  const size = await check.query<{ s: string }>(
    // A partitioned table holds nothing itself: its partitions do.
    `select pg_size_pretty(sum(pg_total_relation_size(i.inhrelid))) s from pg_inherits i
     where i.inhparent in ('entregas'::regclass, 'entrega_intentos'::regclass, 'outbox'::regclass)`,
  );
  console.log(
    `  fill: ${OLD_ROWS} old deliveries + ${OLD_ROWS} attempts + ${OLD_ROWS} events in ${((now() - started) / 1000).toFixed(1)} s ` +
      `(tables and indexes: ${size.rows[0]!.s})`,
  );
}

async function main(): Promise<void> {
  execFileSync(process.execPath, ['scripts/test-certs.mjs'], { cwd: ROOT, stdio: 'inherit' });
  console.log(
    `bench:retention: ${OLD_ROWS} old deliveries, windows of ${WINDOW_S} s, concurrency ${CONCURRENCY}, days dropped whole; ` +
      `load average before: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  const databaseUrl = await freshDatabase(PG_BASE, DB_NAME);
  const check = new pg.Client({ connectionString: databaseUrl });
  await check.connect();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const eventsQueue = queueFor(JOBS.shipmentEvent, { connection: redis, prefix: PREFIX });
  const removalPool = createPool({ connectionString: databaseUrl, max: 2 });
  const removalDb = createDb(removalPool);

  const receiver = child('receiver', 'bench/dispatcher/receiver.ts', { RECEIVER_PORT: String(RECEIVER_PORT) }, true);
  let dispatcher: ChildProcess | undefined;
  let feeding = true;
  let feeder: Promise<void> = Promise.resolve();
  try {
    await ask(receiver, {}, 'listening');
    const { empresaId, webhookIds } = await benchWebhooks(check, { nombre: 'Bench', receiverPort: RECEIVER_PORT });
    const webhookId = webhookIds[0]!;
    await fill(check, removalDb, empresaId, webhookId);

    dispatcher = child('dispatcher', 'services/dispatcher/src/main.ts', {
      DATABASE_URL: databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: PREFIX,
      DISPATCHER_METRICS_PORT: String(METRICS_PORT),
      DISPATCHER_CONCURRENCY: String(CONCURRENCY),
      DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
      DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: join(ROOT, '.test-certs', 'ca.pem'),
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      RETENTION_DAYS: '36500',
    }, false);

    // The feeder: events are made and queued from this process, in both phases alike.
    let next = 0;
    const batchOf = (n: number): ShipmentEventJob[] => Array.from({ length: n }, () => eventJob(empresaId, next++, new Date().toISOString()));
    feeder = (async () => {
      while (feeding) {
        const waiting = await eventsQueue.getWaitingCount();
        if (waiting < BACKLOG) await addEvents(eventsQueue, batchOf(2000));
        else await sleep(50);
      }
    })();
    await waitDelivered(METRICS_PORT, 5000, 120_000);
    console.log('  warm-up: 5000 deliveries recorded');

    const a = await rateWhile(sleep(WINDOW_S * 1000));
    console.log(`  A, no removal: ${a.deliveries} deliveries in ${a.seconds.toFixed(1)} s = ${Math.round(a.rate)} deliveries/s`);

    const removedBy: RemovedRows = { entregas: 0, entrega_intentos: 0, outbox: 0 };
    const retention = createRetention({
      db: removalDb,
      logger: createLogger('bench-retention', 'warn'),
      retentionDays: 30,
      removed: (table, n) => (removedBy[table] += n),
    });
    const removal = retention.runOnce();
    const b = await rateWhile(removal);
    const rows = removedBy.entregas + removedBy.entrega_intentos + removedBy.outbox;
    console.log(
      `  B, during the removal: ${b.deliveries} deliveries in ${b.seconds.toFixed(1)} s = ${Math.round(b.rate)} deliveries/s; ` +
        `removed ${removedBy.entregas} deliveries, ${removedBy.entrega_intentos} attempts, ${removedBy.outbox} events ` +
        `(${Math.round(rows / b.seconds)} rows/s, ${Math.round(removedBy.entregas / b.seconds)} deliveries/s)`,
    );

    const c = await rateWhile(sleep(WINDOW_S * 1000));
    console.log(`  C, after the removal: ${c.deliveries} deliveries in ${c.seconds.toFixed(1)} s = ${Math.round(c.rate)} deliveries/s`);

    const left = await check.query<{ d: string; o: string }>(
      `select (select count(*) from entregas where numero_guia like 'SVCOLD%') d, (select count(*) from outbox where data ->> 'numeroGuia' like 'SVCOLD%') o`,
    );
    const failed = await check.query<{ n: string }>(`select count(*) n from entregas where estado = 'fallida' and numero_guia not like 'SVCOLD%'`);
    console.log(`  old rows left: ${left.rows[0]!.d} deliveries, ${left.rows[0]!.o} events; stream deliveries failed: ${failed.rows[0]!.n}`);
    console.log(
      `  ratio B/A ${((b.rate / a.rate) * 100).toFixed(1)}%, B/C ${((b.rate / c.rate) * 100).toFixed(1)}%, ` +
        `B against the mean of A and C ${((b.rate / ((a.rate + c.rate) / 2)) * 100).toFixed(1)}%`,
    );
    console.log(`  load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    feeding = false;
    await feeder.catch(() => undefined);
    if (dispatcher) await stopChild(dispatcher);
    await endRun({ receiver, queues: [eventsQueue], redis, prefix: PREFIX });
    await removalDb.destroy();
    await check.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
