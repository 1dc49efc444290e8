import { sql, type Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was then, not today's types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('empresas')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('nombre', 'text', (c) => c.notNull())
    .addColumn('verificada', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('sucursales_habilitadas', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('limite_diario', 'integer', (c) => c.notNull().defaultTo(500).check(sql`limite_diario >= 0`))
    .addColumn('plan_activo', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('creditos', 'integer', (c) => c.notNull().defaultTo(0).check(sql`creditos >= 0`))
    .addColumn('plan_personalizado', 'text', (c) =>
      c.check(sql`plan_personalizado in ('PENDIENTE', 'APROBADA', 'RECHAZADA')`),
    )
    .addColumn('guias_hoy', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('guias_hoy_dia', 'date')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('sucursales')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('empresa_id', 'uuid', (c) => c.notNull().references('empresas.id').onDelete('cascade'))
    .addColumn('nombre', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('sucursales_empresa_idx').on('sucursales').column('empresa_id').execute();

  await db.schema
    .createTable('tokens')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('empresa_id', 'uuid', (c) => c.notNull().references('empresas.id').onDelete('cascade'))
    .addColumn('sucursal_id', 'uuid', (c) => c.references('sucursales.id').onDelete('cascade'))
    .addColumn('modo', 'text', (c) => c.notNull().check(sql`modo in ('live', 'test')`))
    .addColumn('hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // One live and one test token per owner (company, or branch).
  await sql`create unique index tokens_owner_modo_uq on tokens (empresa_id, sucursal_id, modo) nulls not distinct`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('tokens').execute();
  await db.schema.dropTable('sucursales').execute();
  await db.schema.dropTable('empresas').execute();
}
