// The stack's QUEUE_SHARDS as Postgres records it (`ajustes_pila`, this module's table): Redis may be
// emptied, the record is not, so every process checks its own value against it before it queues.
import { sql } from 'kysely';
import type { Db } from './database';

const KEY = 'QUEUE_SHARDS';

/** The stack's recorded QUEUE_SHARDS; undefined before its first start. */
export async function recordedQueueShards(db: Db): Promise<number | undefined> {
  const row = await db.selectFrom('ajustes_pila').select('valor').where('clave', '=', KEY).executeTakeFirst();
  return row?.valor;
}

/**
 * Records `configured` as the stack's QUEUE_SHARDS if none is recorded yet (a new stack's first
 * start), then throws unless the record and `configured` agree: a process on other shards would
 * queue jobs no dispatcher takes, or take only part of them.
 */
export async function checkQueueShards(db: Db, configured: number): Promise<void> {
  await db.insertInto('ajustes_pila').values({ clave: KEY, valor: configured }).onConflict((oc) => oc.column('clave').doNothing()).execute();
  const recorded = await recordedQueueShards(db);
  if (recorded !== undefined && recorded !== configured) {
    throw new Error(
      `QUEUE_SHARDS=${configured}, but this stack's queues are split into ${recorded} shards (recorded in Postgres): ` +
        `start every process with QUEUE_SHARDS=${recorded}, or change the stack's value as docs/operations.md says (pnpm migrate --queue-shards ${configured})`,
    );
  }
}

/** Records `shards` as the stack's QUEUE_SHARDS, whatever it was: the operator's change (docs/operations.md). Returns the previous value. */
export async function setQueueShards(db: Db, shards: number): Promise<number | undefined> {
  return db.transaction().execute(async (trx) => {
    const previous = await trx.selectFrom('ajustes_pila').select('valor').where('clave', '=', KEY).forUpdate().executeTakeFirst();
    await trx
      .insertInto('ajustes_pila')
      .values({ clave: KEY, valor: shards })
      .onConflict((oc) => oc.column('clave').doUpdateSet({ valor: shards, cambiado_en: sql`now()` }))
      .execute();
    return previous?.valor;
  });
}
