import { sql, type Kysely } from 'kysely';

/**
 * What lets Postgres alone say which work is owed, so the reconciler can rebuild Redis's work list:
 * when each pending delivery's next attempt is due, and which events have been fanned out.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table entregas add column proximo_intento_en timestamptz`.execute(db);
  await sql`update entregas set proximo_intento_en = coalesce(ultimo_intento_en, created_at) where estado = 'pendiente'`.execute(db);
  await sql`create index entregas_vencidas_idx on entregas (proximo_intento_en) where estado = 'pendiente'`.execute(db);

  await sql`alter table outbox add column repartido_en timestamptz`.execute(db);
  // Events relayed before this migration went through the fan-out of their day.
  await sql`update outbox set repartido_en = enviado_en where enviado_en is not null`.execute(db);
  await sql`create index outbox_sin_repartir_idx on outbox (created_at) where repartido_en is null`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index outbox_sin_repartir_idx`.execute(db);
  await sql`alter table outbox drop column repartido_en`.execute(db);
  await sql`drop index entregas_vencidas_idx`.execute(db);
  await sql`alter table entregas drop column proximo_intento_en`.execute(db);
}
