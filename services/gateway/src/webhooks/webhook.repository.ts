import type { Db, Transaction } from '@svc/platform';
import type { Modo, Webhook } from '@svc/contracts';
import type { CompanyScope } from '../companies/company-scope';

/*
 * Every read here is of integrators' webhooks (`tipo = 'webhook'`): a listening session of
 * `svc listen` is a hidden row, read by listen/listen.repository.ts alone.
 *
 * The gateway's reads of `webhooks`; its writes (creation, changes, rotation) are the table
 * module's (@svc/platform, tables/webhooks.table.ts). A scope sees the webhooks of its mode (a test
 * token's are apart from live ones): all of the company's, or (a branch's scope) the company's own
 * and that branch's.
 */

/**
 * Active webhooks of one mode of the company, its branches' included (the limit counts them all,
 * each mode apart). Counted in the transaction that holds the company's lock (`lockCompany`), so
 * the count stays true until the insert.
 */
export async function countActive(trx: Transaction, empresaId: string, modo: Modo): Promise<number> {
  const row = await trx
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('empresa_id', '=', empresaId)
    .where('modo', '=', modo)
    .where('tipo', '=', 'webhook')
    .where('activo', '=', true)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** A webhook visible in the scope, active or not; undefined otherwise. */
export async function findWebhook(db: Db, scope: CompanyScope, id: string): Promise<Webhook | undefined> {
  let q = db
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', id)
    .where('empresa_id', '=', scope.empresaId)
    .where('modo', '=', scope.modo)
    .where('tipo', '=', 'webhook');
  if (scope.sucursalId !== null) {
    const sucursalId = scope.sucursalId;
    q = q.where((eb) => eb.or([eb('sucursal_id', 'is', null), eb('sucursal_id', '=', sucursalId)]));
  }
  return q.executeTakeFirst();
}

/** Active webhooks visible in the scope, oldest first. */
export async function listActiveWebhooks(db: Db, scope: CompanyScope): Promise<Webhook[]> {
  let q = db
    .selectFrom('webhooks')
    .selectAll()
    .where('empresa_id', '=', scope.empresaId)
    .where('modo', '=', scope.modo)
    .where('tipo', '=', 'webhook')
    .where('activo', '=', true);
  if (scope.sucursalId !== null) {
    const sucursalId = scope.sucursalId;
    q = q.where((eb) => eb.or([eb('sucursal_id', 'is', null), eb('sucursal_id', '=', sucursalId)]));
  }
  return q.orderBy('created_at').orderBy('id').execute();
}

/**
 * Every webhook of one mode of a company, active or not, oldest first (the portal's tables, which
 * reactivate too): the company's own (`sucursalId` null) or one branch's.
 */
export async function listOwnerWebhooks(db: Db, owner: { empresaId: string; modo: Modo; sucursalId: string | null }): Promise<Webhook[]> {
  let q = db.selectFrom('webhooks').selectAll().where('empresa_id', '=', owner.empresaId).where('modo', '=', owner.modo).where('tipo', '=', 'webhook');
  q = owner.sucursalId === null ? q.where('sucursal_id', 'is', null) : q.where('sucursal_id', '=', owner.sucursalId);
  return q.orderBy('created_at').orderBy('id').execute();
}

/**
 * The company's webhooks (both modes, its branches' included) that are failing (a run of failures
 * since their last success) or that the platform deactivated: the portal's Webhooks con problemas.
 */
export async function listTroubledWebhooks(db: Db, empresaId: string): Promise<Webhook[]> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('empresa_id', '=', empresaId)
    .where('tipo', '=', 'webhook')
    .where((eb) =>
      eb.or([
        eb.and([eb('activo', '=', true), eb('salud_fallas', '>', 0)]),
        eb.and([eb('activo', '=', false), eb('desactivado_por', '=', 'sistema')]),
      ]),
    )
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** Active webhooks of a company per mode, its branches' included (the portal's summary). */
export async function countActiveByMode(db: Db, empresaId: string): Promise<Record<Modo, number>> {
  const rows = await db
    .selectFrom('webhooks')
    .select(['modo', (eb) => eb.fn.countAll<string>().as('n')])
    .where('empresa_id', '=', empresaId)
    .where('tipo', '=', 'webhook')
    .where('activo', '=', true)
    .groupBy('modo')
    .execute();
  const out: Record<Modo, number> = { live: 0, test: 0 };
  for (const r of rows) out[r.modo] = Number(r.n);
  return out;
}

/**
 * The company's webhook, locked until the transaction ends: resends and recoveries of one webhook run
 * one after another, and see its `activo` as it is.
 */
export async function lockWebhook(trx: Transaction, empresaId: string, id: string): Promise<Webhook | undefined> {
  return trx
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', id)
    .where('empresa_id', '=', empresaId)
    .where('tipo', '=', 'webhook')
    .forUpdate()
    .executeTakeFirst();
}
