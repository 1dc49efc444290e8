import { sql } from 'kysely';
import type { Db, Transaction } from '@svc/platform';
import type { Webhook } from '@svc/contracts';
import type { CompanyScope } from '../companies/company-scope';

/*
 * The gateway's reads of listening sessions: the `webhooks` rows with `tipo = 'escucha'`, which
 * no webhook operation sees (webhooks/webhook.repository.ts reads `tipo = 'webhook'` only). Their
 * writes are the table module's (@svc/platform, tables/webhooks.table.ts).
 */

/** Open sessions of the company, its branches' included, counted under the company's lock (`lockCompany`). */
export async function countOpenSessions(trx: Transaction, empresaId: string): Promise<number> {
  const row = await trx
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('empresa_id', '=', empresaId)
    .where('tipo', '=', 'escucha')
    .where('activo', '=', true)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * A session of the scope, open or not: a company token's are all the company's, a branch token's
 * only its own. Undefined for anything else (another company's, a webhook's id).
 */
export async function findSession(db: Db, scope: CompanyScope, id: string): Promise<Webhook | undefined> {
  let q = db.selectFrom('webhooks').selectAll().where('id', '=', id).where('empresa_id', '=', scope.empresaId).where('modo', '=', 'test').where('tipo', '=', 'escucha');
  if (scope.sucursalId !== null) q = q.where('sucursal_id', '=', scope.sucursalId);
  return q.executeTakeFirst();
}

/** The open sessions of a scope, newest first (the portal's Sandbox page, `GET /api/v1/escuchas`). */
export async function listOpenSessions(db: Db, scope: Pick<CompanyScope, 'empresaId' | 'sucursalId'>): Promise<Webhook[]> {
  let q = db.selectFrom('webhooks').selectAll().where('empresa_id', '=', scope.empresaId).where('tipo', '=', 'escucha').where('activo', '=', true);
  if (scope.sucursalId !== null) q = q.where('sucursal_id', '=', scope.sucursalId);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
}

/** Every open session older than `ageMs` by Postgres's clock, of every company (the sweep of lapsed leases). */
export async function openSessionsOlderThan(db: Db, ageMs: number): Promise<string[]> {
  const rows = await db
    .selectFrom('webhooks')
    .select('id')
    .where('tipo', '=', 'escucha')
    .where('activo', '=', true)
    .where('created_at', '<', sql<Date>`now() - make_interval(secs => ${ageMs / 1000})`)
    .execute();
  return rows.map((r) => r.id);
}
