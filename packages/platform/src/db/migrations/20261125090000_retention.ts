import { sql, type Kysely } from 'kysely';

/**
 * Retention (RETENTION_DAYS): what lets the removal of old rows walk an index in small batches
 * instead of scanning the tables. `entregas` and `outbox` had no index on `created_at` alone (their
 * indexes lead with the webhook, or cover only pending rows); a resend shares its original's
 * `evento_id` and is left out of the unique (evento_id, webhook_id) index, so "does any delivery
 * still name this event?" needs one more, small, index for resends. `idempotencia` already has
 * `idempotencia_created_idx`.
 *
 * Plain `create index`, not `concurrently`: kysely runs migrations in a transaction, where
 * `concurrently` is refused. The tables are small at this stage; on a large table, build the
 * index by hand with `create index concurrently ... ` first (this migration then skips it).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // (created_at, id): the removal walks it with a keyset cursor, so rows it leaves (pending, locked)
  // and the dead entries of the batches before are never scanned again within a pass.
  await sql`create index if not exists entregas_created_idx on entregas (created_at, id)`.execute(db);
  await sql`create index if not exists entregas_reenvio_evento_idx on entregas (evento_id) where es_reenvio`.execute(db);
  await sql`create index if not exists outbox_created_idx on outbox (created_at, id)`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists outbox_created_idx`.execute(db);
  await sql`drop index if exists entregas_reenvio_evento_idx`.execute(db);
  await sql`drop index if exists entregas_created_idx`.execute(db);
}
