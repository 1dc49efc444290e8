import { sql, type Kysely } from 'kysely';

/**
 * Deferred attempts wait in Postgres, not in Redis (issue 28): `diferida` marks a pending delivery
 * whose next attempt was put off for want of a slot and has no job in Redis; the dispatcher's
 * deferral scheduler takes those that are due, along the partial index, and clears the mark as it
 * queues them. Rows of earlier versions start unmarked: their deferred jobs are still in Redis.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table entregas add column diferida boolean not null default false`.execute(db);
  await sql`create index entregas_diferidas_idx on entregas (proximo_intento_en) where estado = 'pendiente' and diferida`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index entregas_diferidas_idx`.execute(db);
  await sql`alter table entregas drop column diferida`.execute(db);
}
