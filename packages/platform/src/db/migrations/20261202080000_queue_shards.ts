import { sql, type Kysely } from 'kysely';

/**
 * The stack's own settings that every process must share and Redis cannot be trusted to keep
 * (issue 38): `ajustes_pila`, one row per setting. `QUEUE_SHARDS` names the shards the queues' keys
 * are split into; a process started with another value refuses to start (`checkQueueShards`).
 * A database that already holds a company belongs to a stack that ran before shards existed, whose
 * queued jobs are under the one-shard names: it is recorded as 1. A new one is recorded by its
 * first start.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create table ajustes_pila (
    clave text primary key,
    valor integer not null,
    cambiado_en timestamptz not null default now()
  )`.execute(db);
  await sql`insert into ajustes_pila (clave, valor) select 'QUEUE_SHARDS', 1 where exists (select 1 from empresas)`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table ajustes_pila`.execute(db);
}
