import { sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('webhooks')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('empresa_id', 'uuid', (c) => c.notNull().references('empresas.id').onDelete('cascade'))
    .addColumn('sucursal_id', 'uuid', (c) => c.references('sucursales.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('eventos', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'::text[]`))
    .addColumn('descripcion', 'text')
    .addColumn('activo', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create index webhooks_routing_idx on webhooks (empresa_id, sucursal_id) where activo`.execute(db);

  await db.schema
    .createTable('entregas')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('webhook_id', 'uuid', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
    .addColumn('evento_id', 'uuid')
    .addColumn('evento', 'text', (c) => c.notNull())
    .addColumn('estado', 'text', (c) =>
      c.notNull().defaultTo('pendiente').check(sql`estado in ('pendiente', 'exitosa', 'fallida')`),
    )
    .addColumn('exitoso', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('status_code', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('intentos', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('ultimo_intento_en', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .execute();
  await sql`create index entregas_webhook_idx on entregas (webhook_id, created_at desc, id desc)`.execute(db);
  // A fan-out that runs twice (a stalled job) finds its deliveries instead of doubling them.
  await sql`create unique index entregas_evento_webhook_uq on entregas (evento_id, webhook_id) where evento_id is not null`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('entregas').execute();
  await db.schema.dropTable('webhooks').execute();
}
