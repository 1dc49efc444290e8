import { sql, type Kysely } from 'kysely';

/**
 * The delivery log's filters served by indexes (issue 28). The log reads one webhook's deliveries
 * newest first, `(created_at, id)` descending, LIMIT a page; `entregas_webhook_idx` serves it with no
 * filter, with `desde`/`hasta` and the cursor, and with the filters most rows pass (`estado=exitosa`,
 * `exitoso=true`). A filter few rows pass walked that index row by row (a PING's, a rare event's, or
 * `estado=pendiente` on a webhook with thousands of failures: tens of thousands of rows for one
 * page), or the planner sorted a sequential scan. So, each in the log's own order:
 *
 * - `evento`: (webhook_id, evento, created_at, id), every row: events have no common value.
 * - `estado=pendiente|fallida`: (webhook_id, estado, created_at, id) of the rows not `exitosa` only.
 *   The fan-out writes a delivery already `exitosa` when its first attempt succeeds, so the
 *   successful majority never enters this index and pays nothing for it. It also serves a recovery's
 *   walk of a window's failed deliveries.
 * - `exitoso=false`: (webhook_id, created_at, id) where not exitoso, as small, since the estado index
 *   would give pendiente and fallida rows apart, out of the log's order.
 *
 * Plain `create index` as in 20261125090000_retention: kysely runs a migration in a transaction,
 * where `concurrently` is refused. On a large table, build each with `create index concurrently`
 * under the same name first; this migration then skips it.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index if not exists entregas_webhook_evento_idx on entregas (webhook_id, evento, created_at desc, id desc)`.execute(db);
  await sql`create index if not exists entregas_webhook_estado_idx on entregas (webhook_id, estado, created_at desc, id desc) where estado <> 'exitosa'`.execute(db);
  await sql`create index if not exists entregas_webhook_sin_exito_idx on entregas (webhook_id, created_at desc, id desc) where not exitoso`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists entregas_webhook_sin_exito_idx`.execute(db);
  await sql`drop index if exists entregas_webhook_estado_idx`.execute(db);
  await sql`drop index if exists entregas_webhook_evento_idx`.execute(db);
}
