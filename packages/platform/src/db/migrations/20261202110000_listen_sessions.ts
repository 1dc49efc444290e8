import { sql, type Kysely } from 'kysely';

/**
 * Listening sessions of `svc listen` (issue 40): a session is a `webhooks` row of the company's test
 * mode with `tipo = 'escucha'`, so the fan-out's routing by branch and `eventos`, the retries, the
 * signing with a sealed secret and the delivery log apply to it unchanged; only the send differs
 * (through the session's stream). The webhook operations, lists and limits see `tipo = 'webhook'`
 * only. `tipo` never changes, so it is not among the columns the `webhook_versions` trigger watches
 * (an insert already counts).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table webhooks add column tipo text not null default 'webhook' check (tipo in ('webhook', 'escucha'))`.execute(db);
  // The open sessions: counted per company at each opening, and swept for lapsed leases.
  await sql`create index webhooks_escuchas_idx on webhooks (empresa_id) where tipo = 'escucha' and activo`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists webhooks_escuchas_idx`.execute(db);
  await sql`alter table webhooks drop column if exists tipo`.execute(db);
}
