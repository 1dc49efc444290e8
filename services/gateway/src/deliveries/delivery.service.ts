import { AppError, isUuid, type DeliveryJob, type Modo, type RecoveryRequest, type Webhook } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import type { CompanyScope } from '../companies/company-scope';
import { eventFields } from '../outbox/outbox.repository';
import { recordActivity } from '../activity/activity.repository';
import { lockWebhook } from '../webhooks/webhook.repository';
import { requireWebhook } from '../webhooks/webhook.service';
import {
  attemptsOf,
  deliveriesOfShipment,
  findLoggedDelivery,
  hourlyDeliveries,
  countRecoverable,
  insertOmittedDeliveries,
  insertRecoveryResends,
  insertResend,
  listDeliveryLog,
  logReaderOf,
  pendingDeliveriesByMode,
  type LoggedDelivery,
  type RecoveryPosition,
  type RecoveryWindow,
  type Resent,
} from './delivery.repository';
import { encodeLogCursor, parseInstant, parseLogQuery } from './delivery-log.query';
import { presentDelivery, presentLogged } from './delivery.presenter';
import { resendWindowId } from './resend.limiter';

type Deps = Pick<GatewayDeps, 'db' | 'logger' | 'resendRelay' | 'resendLimiter'>;

/** The longest window of a recovery (docs/integrators.md). */
export const MAX_RECOVERY_MS = 14 * 24 * 3600 * 1000;

// ---- the delivery log ------------------------------------------------------------------------------

/** Every delivery of one webhook that the scope sees, newest first, filtered and paged. */
export async function deliveryLog(deps: Deps, scope: CompanyScope, id: string, query: Record<string, unknown>) {
  const { limit, after, filters } = parseLogQuery(query);
  const w = await requireWebhook(deps.db, scope, id);
  const rows = await listDeliveryLog(deps.db, w.id, filters, limit + 1, after, logReaderOf(scope, w));
  const page = rows.slice(0, limit);
  const attempts = await attemptsOf(
    deps.db,
    page.map((d) => d.id),
  );
  const last = page[page.length - 1];
  return {
    entregas: page.map((d) => presentLogged(d, attempts.get(d.id) ?? [])),
    nextCursor: rows.length > limit && last ? encodeLogCursor(last.position) : null,
  };
}

/** One delivery of the webhook that the scope sees, with its attempts. */
export async function deliveryDetail(deps: Deps, scope: CompanyScope, id: string, entregaId: string) {
  const w = await requireWebhook(deps.db, scope, id);
  const d = isUuid(entregaId) ? await findLoggedDelivery(deps.db, w.id, entregaId, logReaderOf(scope, w)) : undefined;
  if (!d) throw new AppError('NOT_FOUND', 'no such delivery of this webhook');
  const attempts = await attemptsOf(deps.db, [d.id]);
  return presentLogged(d, attempts.get(d.id) ?? []);
}

// ---- resending and recovery ------------------------------------------------------------------------

/** The first attempt of a resend: its event as the outbox keeps it, or for a PING `{}` in the webhook's mode. */
function firstAttempt(w: Webhook, d: Resent, requestId: string): DeliveryJob {
  const common = {
    deliveryId: d.id,
    empresaId: w.empresa_id,
    attempt: 1,
    webhookId: w.id,
    eventId: d.eventoId ?? d.id,
    committedAt: d.createdAt.toISOString(),
    requestId,
    partitionAt: d.partitionAt.toISOString(),
  };
  if (d.event === null) return { ...common, evento: 'PING', data: {}, mode: w.modo };
  return {
    ...common,
    evento: d.evento,
    data: d.event.data,
    ...(d.event.sequence === null ? {} : { sequence: d.event.sequence }),
    mode: d.event.modo,
  };
}

/**
 * The delivery to resend and its webhook, or the refusal, in the order the API gives them: checked
 * alike before the hour's count and under the lock.
 */
function resendable<W extends Pick<Webhook, 'activo'>>(webhook: W | undefined, original: LoggedDelivery | undefined): { webhook: W; original: LoggedDelivery } {
  if (!webhook || !original) throw new AppError('NOT_FOUND', 'no such delivery of this webhook');
  if (!webhook.activo) throw new AppError('WEBHOOK_INACTIVE', 'the webhook is inactive');
  if (original.estado === 'pendiente') throw new AppError('DELIVERY_PENDING', 'the delivery still has attempts left');
  return { webhook, original };
}

/**
 * Sends a delivery's event again to its webhook, now, with the webhook's current URL and secret: a
 * new delivery (new id) with the same event, `reenvioDe` = the original, and the usual attempts.
 * At most RESENDS_PER_HOUR of one event to one webhook per sliding hour (429 RESEND_LIMIT_EXCEEDED
 * with `Retry-After`), counted only for a resend that would be made (checked once before, so a
 * refused one costs none of the hour's). Written under the webhook's lock (so it sees `activo` as
 * it is, and a concurrent recovery sees it), with its entry in the activity log (`usuario`: who
 * asked), then its first attempt is queued.
 */
export async function resendDelivery(deps: Deps, scope: CompanyScope, id: string, entregaId: string, requestId: string, usuario: string) {
  const w = await requireWebhook(deps.db, scope, id);
  if (!isUuid(entregaId)) throw new AppError('NOT_FOUND', 'no such delivery of this webhook');
  const { original: seen } = resendable(w, await findLoggedDelivery(deps.db, w.id, entregaId));
  const hour = await deps.resendLimiter.take(resendWindowId(w.id, seen.eventoId ?? seen.id));
  if (!hour.allowed) {
    throw new AppError('RESEND_LIMIT_EXCEEDED', `this event was resent to this webhook ${hour.limit} times in the last hour`, {
      'Retry-After': String(hour.retryAfterSeconds),
    });
  }
  const resent = await deps.db.transaction().execute(async (trx) => {
    const { webhook: locked, original } = resendable(await lockWebhook(trx, scope.empresaId, w.id), await findLoggedDelivery(trx, w.id, entregaId));
    const made = await insertResend(trx, w.id, original.id, eventFields);
    if (!made) throw new AppError('NOT_FOUND', 'the event of this delivery is no longer kept');
    await recordActivity(trx, {
      empresaId: scope.empresaId,
      usuario,
      accion: 'delivery.resent',
      sucursalId: locked.sucursal_id,
      webhookId: w.id,
      detalle: { entregaId: made.id, reenvioDe: original.id, evento: made.evento },
    });
    return made;
  });
  await deps.resendRelay.enqueue([firstAttempt(w, resent, requestId)]);
  deps.logger.info({ webhook: w.id, deliveryId: resent.id, reenvioDe: resent.reenvioDe, evento: resent.evento, requestId }, 'delivery resent');
  return presentLogged(resent, []);
}

/** `{ desde, hasta? }` as a window: `hasta` defaults to now; at most 14 days; `desde` before `hasta`. */
export function recoveryWindow(body: RecoveryRequest, now: Date): RecoveryWindow {
  const desde = parseInstant('desde', body.desde);
  const hasta = body.hasta === undefined ? now : parseInstant('hasta', body.hasta);
  if (desde >= hasta) throw new AppError('VALIDATION_ERROR', 'desde must be before hasta');
  if (hasta.getTime() - desde.getTime() > MAX_RECOVERY_MS) throw new AppError('VALIDATION_ERROR', 'the window from desde to hasta must be at most 14 days');
  return { desde, hasta };
}

/**
 * Deliveries a recovery resends per statement, each batch in a transaction of its own: one batch
 * holds the webhook's lock for a few milliseconds (a resend by hand or another recovery waits no
 * longer), and its rows and jobs are a bounded piece of memory.
 */
export const RECOVERY_BATCH_SIZE = 500;
/**
 * Deliveries one `recuperar` call resends at most; the answer's `pendientes` says how many are left
 * for the next call. 2,000 keeps an answer within a second or so and the gateway's memory bounded
 * whatever the window holds (a 14-day outage may have left hundreds of thousands).
 */
export const RECOVERY_CALL_LIMIT = 2000;

/**
 * Resends the failed deliveries of the webhook created in the window that are not resends and have
 * none yet, oldest first, at most RECOVERY_CALL_LIMIT per call, in batches of RECOVERY_BATCH_SIZE.
 * Each batch is one statement in its own transaction under the webhook's lock: it is written whole
 * or not at all, and two recoveries of the same window, even at once, resend each delivery once.
 * Each batch's first attempts are queued behind its commit (`ResendRelay`) while the next is
 * written. The transaction of the call's last batch also counts what is left (`pendientes`) and
 * writes the recovery into the activity log (`usuario`: who asked) with its window and count; a
 * webhook deactivated between two batches ends the call there.
 */
export async function recoverDeliveries(deps: Deps, scope: CompanyScope, id: string, body: RecoveryRequest, now: Date, requestId: string, usuario: string) {
  const window = recoveryWindow(body, now);
  const w = await requireWebhook(deps.db, scope, id);
  const omitidas = body.omitidas === true ? await replayOmitted(deps, scope, w, window, requestId) : undefined;
  let reenviadas = 0;
  let after: RecoveryPosition | undefined;
  let pendientes: number | undefined;
  for (let batch = 0; pendientes === undefined; batch++) {
    const take = Math.min(RECOVERY_BATCH_SIZE, RECOVERY_CALL_LIMIT - reenviadas);
    const written = await deps.db.transaction().execute(async (trx) => {
      const locked = await lockWebhook(trx, scope.empresaId, w.id);
      if (!locked) throw new AppError('NOT_FOUND', 'no such webhook');
      if (!locked.activo && batch === 0) throw new AppError('WEBHOOK_INACTIVE', 'the webhook is inactive');
      const made = locked.activo ? await insertRecoveryResends(trx, w.id, window, eventFields, take, after) : { resends: [], last: undefined };
      const total = reenviadas + made.resends.length;
      // The call ends with this batch: the window is done, the call's share is, or the webhook was deactivated.
      if (made.resends.length === take && total < RECOVERY_CALL_LIMIT && locked.activo) return { made, left: undefined };
      const left = await countRecoverable(trx, w.id, window, eventFields);
      await recordActivity(trx, {
        empresaId: scope.empresaId,
        usuario,
        accion: 'deliveries.recovered',
        sucursalId: locked.sucursal_id,
        webhookId: w.id,
        detalle: { desde: window.desde.toISOString(), hasta: window.hasta.toISOString(), reenviadas: total, ...(omitidas === undefined ? {} : { omitidas }) },
      });
      return { made, left };
    });
    // Queued behind the commit, while the next batch is written; never rejects (see ResendRelay).
    if (written.made.resends.length > 0) void deps.resendRelay.enqueue(written.made.resends.map((d) => firstAttempt(w, d, requestId)));
    reenviadas += written.made.resends.length;
    after = written.made.last ?? after;
    pendientes = written.left;
  }
  deps.logger.info(
    { webhook: w.id, reenviadas, pendientes, desde: window.desde.toISOString(), hasta: window.hasta.toISOString(), requestId },
    'deliveries recovered',
  );
  return omitidas === undefined ? { reenviadas, pendientes } : { reenviadas, pendientes, omitidas };
}

/**
 * `omitidas: true`: the events the webhook missed while it was inactive (`insertOmittedDeliveries`),
 * oldest first, in batches of RECOVERY_BATCH_SIZE, each in its own transaction under the webhook's
 * lock, at most RECOVERY_CALL_LIMIT per call (a next call takes the rest: what this one made is no
 * longer missed). Each batch's first attempts are queued behind its commit. Returns how many it made.
 */
async function replayOmitted(deps: Deps, scope: CompanyScope, w: Webhook, window: RecoveryWindow, requestId: string): Promise<number> {
  let made = 0;
  for (;;) {
    const take = Math.min(RECOVERY_BATCH_SIZE, RECOVERY_CALL_LIMIT - made);
    const batch = await deps.db.transaction().execute(async (trx) => {
      const locked = await lockWebhook(trx, scope.empresaId, w.id);
      if (!locked) throw new AppError('NOT_FOUND', 'no such webhook');
      if (!locked.activo) {
        if (made === 0) throw new AppError('WEBHOOK_INACTIVE', 'the webhook is inactive');
        return [];
      }
      return insertOmittedDeliveries(trx, w.id, window, take);
    });
    if (batch.length > 0) void deps.resendRelay.enqueue(batch.map((d) => firstAttempt(w, d, requestId)));
    made += batch.length;
    if (batch.length < take || made >= RECOVERY_CALL_LIMIT) return made;
  }
}

// ---- the customer portal's views (docs/portal.md) ----------------------------------------------------

/** One hour of the portal's chart. */
export interface DeliveryHour {
  hora: string;
  exitosas: number;
  fallidas: number;
}

const HOUR_MS = 3600_000;

/**
 * The company's deliveries of the last `hours` hours (the current one included) per hour and mode,
 * by how they ended, every hour present; and how many have attempts left now, per mode.
 */
export async function deliverySummary(deps: Deps, empresaId: string, now: Date, hours = 24) {
  const first = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - (hours - 1) * HOUR_MS;
  const [rows, pendientes] = await Promise.all([hourlyDeliveries(deps.db, empresaId, new Date(first)), pendingDeliveriesByMode(deps.db, empresaId)]);
  const series = (modo: Modo): DeliveryHour[] =>
    Array.from({ length: hours }, (_, i) => {
      const at = first + i * HOUR_MS;
      const row = rows.find((r) => r.modo === modo && r.hora.getTime() === at);
      return { hora: new Date(at).toISOString(), exitosas: row?.exitosas ?? 0, fallidas: row?.fallidas ?? 0 };
    });
  return { porHora: { live: series('live'), test: series('test') }, pendientes };
}

/** The deliveries one shipment's events made to the company's webhooks of its mode, newest first. */
export async function shipmentDeliveryViews(deps: Deps, shipment: { empresaId: string; modo: Modo; numeroGuia: string; since: Date }, limit = 100) {
  const rows = await deliveriesOfShipment(deps.db, shipment, limit);
  return rows.map((d) => ({ ...presentDelivery(d), estado: d.estado, webhookId: d.webhookId, url: d.url, reenvioDe: d.reenvioDe }));
}
