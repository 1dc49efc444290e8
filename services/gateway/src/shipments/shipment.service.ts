import {
  AppError,
  secondsToGuatemalaMidnight,
  type Estado,
  type GuiaCreate,
  type GuiaEventoRequest,
  type ShipmentEventData,
  validateGuiaEvento,
  type SuccessEnvelope,
} from '@svc/contracts';
import { insertEvents, type PendingJob } from '@svc/platform';
import type { GatewayDeps } from '../deps';
import { shipmentEvent } from '../outbox/outbox.repository';
import { recordActivity } from '../activity/activity.repository';
import { idempotent, type IdempotencyRequest, type IdempotentAnswer } from '../idempotency/idempotency';
import { readAllowance } from '../companies/company.repository';
import { pageParams } from '../http/query-params';
import { generateNumeroGuia, isPlausibleNumeroGuia } from './numero-guia';
import { nextEstado } from './shipment-state';
import {
  findShipment,
  insertShipments,
  isNumeroGuiaTaken,
  listShipments,
  listHistory,
  lockShipment,
  recordTransition,
} from './shipment.repository';
import type { CompanyScope } from '../companies/company-scope';

type Deps = Pick<GatewayDeps, 'db' | 'clock' | 'metrics' | 'outboxRelay' | 'config'>;

/** A shipment as the API shows it (creation, listing). */
export interface ShipmentView {
  numeroGuia: string;
  estado: Estado;
  sucursalId: string | null;
  createdAt: string;
  destinatario: Record<string, unknown>;
  paquete: Record<string, unknown>;
  referencia: string | null;
  observaciones?: string;
}

function view(g: {
  numeroGuia: string;
  estado: Estado;
  sucursalId: string | null;
  createdAt: Date;
  destinatario: Record<string, unknown>;
  paquete: Record<string, unknown>;
  referencia: string | null;
  extra: Record<string, unknown> | null;
}): ShipmentView {
  const out: ShipmentView = {
    numeroGuia: g.numeroGuia,
    estado: g.estado,
    sucursalId: g.sucursalId,
    createdAt: g.createdAt.toISOString(),
    destinatario: g.destinatario,
    paquete: g.paquete,
    referencia: g.referencia,
  };
  const observaciones = g.extra?.observaciones;
  if (typeof observaciones === 'string') out.observaciones = observaciones;
  return out;
}

export type CreateAnswer = IdempotentAnswer;

/** A rare collision of generated numbers is retried with new ones, the whole transaction again. */
const MAX_ATTEMPTS = 4;

/**
 * Creates the shipments, all or none: the charge of the daily allowance and the credits (for a
 * sandbox owner, of the sandbox cap only), the rows and their GUIA_CREADA events in one statement;
 * with an Idempotency-Key, the idempotency protocol runs that statement at most once per key and
 * body (`idempotent`). The events' jobs go to the relay once the statement has committed.
 */
export async function createShipments(
  deps: Deps,
  /** `owner`: who the shipments are for (the caller's scope: a test one's are the sandbox's). */
  ctx: { owner: CompanyScope; requestId: string; idempotency: IdempotencyRequest | undefined },
  items: GuiaCreate[],
  shape: 'single' | 'batch',
  /** Where numbers come from; a test passes one that collides to see the retry. */
  newNumero: () => string = generateNumeroGuia,
): Promise<CreateAnswer> {
  const { db, metrics } = deps;
  const { owner, idempotency: idem } = ctx;

  for (let attempt = 1; ; attempt++) {
    const fresh = items.map((item) => ({
      numeroGuia: newNumero(),
      destinatario: item.destinatario,
      paquete: item.paquete,
      referencia: item.referencia ?? null,
      extra: item.observaciones === undefined ? null : { observaciones: item.observaciones },
    }));
    let jobs: PendingJob[] = [];
    const insert = async (trx: Deps['db']): Promise<SuccessEnvelope<unknown>> => {
      const created = await insertShipments(trx, owner, fresh, {
        requestId: ctx.requestId,
        sandboxDailyLimit: deps.config.sandboxDailyLimit,
      });
      if (!created) throw await refusal(deps, trx, owner, items.length);
      jobs = created.jobs;
      const views = fresh.map((g, i) => view({ ...g, estado: 'CREADA', sucursalId: owner.sucursalId, createdAt: created.createdAt[i]! }));
      return { success: true, data: shape === 'single' ? views[0] : { guias: views } };
    };
    try {
      const answer = await idempotent(db, idem, async (q) => ({ status: 201, body: await insert(q) }));
      if (!answer.replayed) {
        metrics.shipmentsCreated.inc({ modo: owner.modo }, items.length);
        deps.outboxRelay.notify(jobs);
        metrics.outboxWritten.inc({ evento: 'GUIA_CREADA' }, items.length);
      }
      return answer;
    } catch (err) {
      if (attempt < MAX_ATTEMPTS && isNumeroGuiaTaken(err)) continue;
      throw err;
    }
  }
}

/** Says which limit refused a charge: the daily allowance (a sandbox owner's: the sandbox cap) first, then the credits. */
async function refusal(deps: Deps, trx: Deps['db'], owner: CompanyScope, n: number): Promise<AppError> {
  const a = await readAllowance(trx, owner.empresaId);
  if (!a) return new AppError('NOT_FOUND', 'no such company');
  if (owner.modo === 'test') {
    // Not in svc_shipment_refusals_total: its reasons (daily_limit, credits) are the live refusals alerts watch.
    const limit = deps.config.sandboxDailyLimit;
    const left = Math.max(0, limit - a.sandboxUsedToday);
    return new AppError(
      'DAILY_GUIDE_LIMIT',
      `daily sandbox shipment limit of ${limit} reached: ${left} left today, ${n} requested; it resets at midnight (UTC-6)`,
      { 'Retry-After': String(secondsToGuatemalaMidnight(deps.clock.now())) },
    );
  }
  if (a.usedToday + n > a.limiteDiario) {
    deps.metrics.quotaRefusals.inc({ reason: 'daily_limit' });
    const left = Math.max(0, a.limiteDiario - a.usedToday);
    // Every 429 carries Retry-After; for this one, the wait is until the reset.
    return new AppError(
      'DAILY_GUIDE_LIMIT',
      `daily shipment limit of ${a.limiteDiario} reached: ${left} left today, ${n} requested; it resets at midnight (UTC-6)`,
      { 'Retry-After': String(secondsToGuatemalaMidnight(deps.clock.now())) },
    );
  }
  deps.metrics.quotaRefusals.inc({ reason: 'credits' });
  return new AppError(
    'PAYMENT_REQUIRED',
    a.planActivo ? `not enough credits: ${a.creditos} available, ${n} required` : 'no active plan: credits are required to create shipments',
  );
}

// ---- listing and tracking -------------------------------------------------------------------------

/** `?limit=` 1..100 (default 50) and the opaque `?cursor=` of the previous page. */
export function parseListQuery(query: Record<string, unknown>): { limit: number; beforeId: string | undefined } {
  const { limit, after } = pageParams(query, decodeCursor);
  return { limit, beforeId: after };
}

const MAX_BIGINT = 9223372036854775807n;

// The cursor is the last shipment's id, encoded so that callers treat it as opaque.
export const encodeCursor = (id: string): string => Buffer.from(id, 'utf8').toString('base64url');

function decodeCursor(cursor: string): string {
  const id = /^[A-Za-z0-9_-]{1,32}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  if (!/^[1-9][0-9]{0,18}$/.test(id) || BigInt(id) > MAX_BIGINT || encodeCursor(id) !== cursor) {
    throw new AppError('VALIDATION_ERROR', 'cursor is not a cursor returned by this listing');
  }
  return id;
}

export async function listPage(
  deps: Pick<Deps, 'db'>,
  scope: CompanyScope,
  query: Record<string, unknown>,
): Promise<{ guias: ShipmentView[]; nextCursor: string | null }> {
  const { limit, beforeId } = parseListQuery(query);
  const rows = await listShipments(deps.db, scope, limit + 1, beforeId);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    guias: page.map((r) =>
      view({
        numeroGuia: r.numero_guia,
        estado: r.estado,
        sucursalId: r.sucursal_id,
        createdAt: r.created_at,
        destinatario: r.destinatario,
        paquete: r.paquete,
        referencia: r.referencia,
        extra: r.extra,
      }),
    ),
    nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null,
  };
}

export interface TrackingView {
  numeroGuia: string;
  estado: Estado;
  historial: Array<{ estado: Estado; evento: string; fecha: string; motivo?: string }>;
}

export async function tracking(deps: Pick<Deps, 'db'>, scope: CompanyScope, numeroGuia: string): Promise<TrackingView> {
  const guia = isPlausibleNumeroGuia(numeroGuia) ? await findShipment(deps.db, scope, numeroGuia) : undefined;
  if (!guia) throw new AppError('NOT_FOUND', 'no such shipment');
  const history = await listHistory(deps.db, guia.id);
  return {
    numeroGuia: guia.numero_guia,
    estado: guia.estado,
    // Exactly the fields of a history entry (estado, evento, fecha, motivo?); the delivery time a GUIA_ENTREGADA carried
    // stays stored with the entry, not shown (its `fecha` is when it was recorded).
    historial: history.map((h) => ({
      estado: h.estado,
      evento: h.evento,
      fecha: h.fecha.toISOString(),
      ...(h.motivo !== null ? { motivo: h.motivo } : {}),
    })),
  };
}

// ---- transitions ----------------------------------------------------------------------------------

/**
 * Moves a shipment on (the courier's operations, and `simular`): locks it, checks the state machine,
 * records the status and history and its event in the outbox, in the shipment's mode, all in one
 * transaction. With a scope, a shipment outside it is not found.
 */
export async function transitionShipment(
  deps: Deps,
  numeroGuia: string,
  req: GuiaEventoRequest,
  requestId: string,
  scope?: CompanyScope,
  /** Who moved it, for the activity log (the courier's internal route: OPERATOR); none: not logged. */
  usuario?: string,
): Promise<{ numeroGuia: string; estado: Estado }> {
  if (req.fechaEntrega !== undefined && req.evento !== 'GUIA_ENTREGADA') {
    throw new AppError('VALIDATION_ERROR', 'fechaEntrega is accepted only with GUIA_ENTREGADA');
  }
  // ajv's date-time admits a leap second (23:59:60), which Date cannot represent.
  if (req.fechaEntrega !== undefined && Number.isNaN(Date.parse(req.fechaEntrega))) {
    throw new AppError('VALIDATION_ERROR', 'fechaEntrega is not a representable instant');
  }
  if (!isPlausibleNumeroGuia(numeroGuia)) throw new AppError('NOT_FOUND', 'no such shipment');
  const result = await deps.db.transaction().execute(async (trx) => {
    const guia = await lockShipment(trx, numeroGuia, scope);
    if (!guia) throw new AppError('NOT_FOUND', 'no such shipment');
    const estado = nextEstado(guia.estado, req.evento);
    if (!estado) {
      throw new AppError('INVALID_TRANSITION', `${req.evento} is not allowed for a shipment in status ${guia.estado}`);
    }
    const fechaEntrega =
      req.evento === 'GUIA_ENTREGADA' ? new Date(req.fechaEntrega ?? deps.clock.now()).toISOString() : null;
    const sequence = await recordTransition(trx, guia.id, { estado, evento: req.evento, motivo: req.motivo ?? null, fechaEntrega });

    const data: ShipmentEventData = { numeroGuia: guia.numero_guia, estado };
    if (fechaEntrega !== null) data.fechaEntrega = fechaEntrega;
    if (req.evento === 'GUIA_DEVOLUCION' && req.motivo !== undefined) data.motivo = req.motivo;
    // A sandbox shipment's event is a test event: the dispatcher routes it to test webhooks only.
    const owner = { empresaId: guia.empresa_id, sucursalId: guia.sucursal_id, modo: guia.modo };
    const jobs = await insertEvents(trx, [shipmentEvent(owner, requestId, { evento: req.evento, data, sequence })]);
    if (usuario !== undefined) {
      await recordActivity(trx, {
        empresaId: guia.empresa_id,
        usuario,
        accion: 'shipment.event',
        sucursalId: guia.sucursal_id,
        detalle: { numeroGuia: guia.numero_guia, evento: req.evento, estado },
      });
    }
    return { numeroGuia: guia.numero_guia, estado, jobs };
  });
  deps.outboxRelay.notify(result.jobs);
  deps.metrics.outboxWritten.inc({ evento: req.evento });
  return { numeroGuia: result.numeroGuia, estado: result.estado };
}

/**
 * `simular`: the courier's transition, for a caller in the sandbox, of one of its own sandbox
 * shipments (a branch's: its branch's), emitting the event to the test webhooks (docs/integrators.md).
 */
export function simulateTransition(
  deps: Deps,
  scope: CompanyScope,
  numeroGuia: string,
  body: unknown,
  requestId: string,
): Promise<{ numeroGuia: string; estado: Estado }> {
  // Refused before the body is read: a live token has nothing to simulate.
  if (scope.modo !== 'test') throw new AppError('FORBIDDEN', 'simular moves sandbox shipments: use a test token');
  return transitionShipment(deps, numeroGuia, validateGuiaEvento(body), requestId, scope);
}
