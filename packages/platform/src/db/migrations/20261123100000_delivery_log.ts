import { sql, type Kysely } from 'kysely';

/**
 * The delivery log: every attempt of a delivery with its reason, and what a delivery's detail
 * names besides (its shipment, the delivery it resends).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table entregas add column numero_guia text, add column reenvio_de uuid references entregas (id) on delete set null`.execute(db);
  await sql`update entregas e set numero_guia = o.data ->> 'numeroGuia' from outbox o where o.id = e.evento_id`.execute(db);

  await db.schema
    .createTable('entrega_intentos')
    .addColumn('entrega_id', 'uuid', (c) => c.notNull().references('entregas.id').onDelete('cascade'))
    .addColumn('numero', 'integer', (c) => c.notNull().check(sql`numero between 1 and 3`))
    .addColumn('fecha', 'timestamptz', (c) => c.notNull())
    .addColumn('status_code', 'integer', (c) => c.notNull())
    .addColumn('duracion_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text', (c) =>
      c.check(sql`error in ('TIMEOUT', 'DNS', 'CONNECTION', 'TLS', 'BLOCKED_ADDRESS', 'HTTP_STATUS')`),
    )
    .addColumn('mensaje', 'text')
    .addColumn('respuesta', 'text')
    // One row per attempt: a run that repeats an attempt (a crash before its record) cannot add a second.
    .addPrimaryKeyConstraint('entrega_intentos_pk', ['entrega_id', 'numero'])
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('entrega_intentos').execute();
  await sql`alter table entregas drop column reenvio_de, drop column numero_guia`.execute(db);
}
