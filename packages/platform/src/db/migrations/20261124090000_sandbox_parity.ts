import { sql, type Kysely } from 'kysely';

/**
 * Sandbox parity (docs/integrators.md, The sandbox): sandbox shipments have a daily cap of their own, counted per
 * company like the live allowance but apart from it; webhooks are routed, counted and listed per
 * mode, so the routing index leads with the mode as every query of it does.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table empresas
      add column guias_sandbox_hoy integer not null default 0 check (guias_sandbox_hoy >= 0),
      add column guias_sandbox_hoy_dia date
  `.execute(db);
  await sql`drop index webhooks_routing_idx`.execute(db);
  await sql`create index webhooks_routing_idx on webhooks (empresa_id, modo, sucursal_id) where activo`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index webhooks_routing_idx`.execute(db);
  await sql`create index webhooks_routing_idx on webhooks (empresa_id, sucursal_id) where activo`.execute(db);
  await sql`alter table empresas drop column guias_sandbox_hoy_dia, drop column guias_sandbox_hoy`.execute(db);
}
