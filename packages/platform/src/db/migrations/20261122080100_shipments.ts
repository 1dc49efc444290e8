import { sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('guias')
    // Identity order is the list order (newest first) and the opaque cursor.
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('numero_guia', 'text', (c) => c.notNull().unique())
    .addColumn('empresa_id', 'uuid', (c) => c.notNull().references('empresas.id').onDelete('cascade'))
    .addColumn('sucursal_id', 'uuid', (c) => c.references('sucursales.id').onDelete('set null'))
    .addColumn('modo', 'text', (c) => c.notNull().check(sql`modo in ('live', 'test')`))
    .addColumn('estado', 'text', (c) => c.notNull())
    .addColumn('destinatario', 'jsonb', (c) => c.notNull())
    .addColumn('paquete', 'jsonb', (c) => c.notNull())
    .addColumn('referencia', 'text')
    .addColumn('extra', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create index guias_empresa_list_idx on guias (empresa_id, modo, id desc)`.execute(db);
  await sql`create index guias_sucursal_list_idx on guias (sucursal_id, modo, id desc) where sucursal_id is not null`.execute(db);

  await db.schema
    .createTable('guia_historial')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('guia_id', 'bigint', (c) => c.notNull().references('guias.id').onDelete('cascade'))
    .addColumn('estado', 'text', (c) => c.notNull())
    .addColumn('evento', 'text', (c) => c.notNull())
    .addColumn('motivo', 'text')
    .addColumn('fecha_entrega', 'text')
    .addColumn('fecha', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .execute();
  await db.schema.createIndex('guia_historial_guia_idx').on('guia_historial').columns(['guia_id', 'id']).execute();

  // The transactional outbox: a row per shipment event, written with the change that causes it.
  await db.schema
    .createTable('outbox')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('empresa_id', 'uuid', (c) => c.notNull())
    .addColumn('sucursal_id', 'uuid')
    .addColumn('evento', 'text', (c) => c.notNull())
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .addColumn('request_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('enviado_en', 'timestamptz')
    .execute();
  await sql`create index outbox_pendientes_idx on outbox (created_at) where enviado_en is null`.execute(db);

  await db.schema
    .createTable('idempotencia')
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('clave', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('response', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('idempotencia_pk', ['scope', 'clave'])
    .execute();
  await db.schema.createIndex('idempotencia_created_idx').on('idempotencia').column('created_at').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('idempotencia').execute();
  await db.schema.dropTable('outbox').execute();
  await db.schema.dropTable('guia_historial').execute();
  await db.schema.dropTable('guias').execute();
}
