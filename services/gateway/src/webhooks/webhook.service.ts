import { randomBytes, randomUUID } from 'node:crypto';
import {
  AppError,
  DEFAULT_OVERLAP_HOURS,
  isUuid,
  type DeliveryJob,
  type Modo,
  type RecoveryRequest,
  type SecretRotation,
  type Webhook,
  type WebhookCreate,
  type WebhookPatch,
} from '@svc/schema';
import { attemptDelivery, checkWebhookUrl, type AttemptInput } from '@svc/webhook-sender';
import type { GatewayDeps } from '../deps';
import type { Principal } from '../auth/principal';
import { lockCompany } from '../companies/company.repository';
import { recordActivity } from '../activity/activity.repository';
import { eventFields } from '../outbox/outbox.repository';
import {
  attemptsOf,
  findLoggedDelivery,
  insertPingDelivery,
  insertRecoveryResends,
  insertResend,
  lastAttemptPerWebhook,
  latestDeliveries,
  listDeliveryLog,
  type AttemptLog,
  type Delivery,
  type LastAttempt,
  type LoggedDelivery,
  type Resent,
} from './delivery.repository';
import { parseLogQuery, encodeLogCursor, parseInstant } from './delivery-log.query';
import {
  countActive,
  deactivateWebhook,
  findWebhook,
  insertWebhook,
  listActiveWebhooks,
  lockWebhook,
  rotateSecret,
  updateWebhook,
  type WebhookScope,
} from './webhook.repository';

type Deps = Pick<GatewayDeps, 'db' | 'sender' | 'logger' | 'resendRelay'>;

/** Active webhooks per company and mode, its branches' included: the contract's limit. */
export const MAX_ACTIVE_WEBHOOKS = 10;
/** The detail's window of deliveries. */
export const DETAIL_DELIVERIES = 20;

export const NOTA_SECRET =
  'Guarde este secreto en un lugar seguro: no se volverá a mostrar ni se puede recuperar. ' +
  'Úselo para verificar la firma X-SVC-Signature de cada entrega.';

const NOTA_ROTATED =
  'Guarde este secreto en un lugar seguro: no se volverá a mostrar ni se puede recuperar. ' +
  'Desde ahora X-SVC-Signature y webhook-signature usan este secreto';
const NOTA_OVERLAP =
  '; hasta secretoAnteriorExpiraEn cada entrega lleva además X-SVC-Signature-Anterior y una segunda firma en webhook-signature, calculadas con el secreto anterior.';

/** The longest window of a recovery (extensions.md). */
export const MAX_RECOVERY_MS = 14 * 24 * 3600 * 1000;

/**
 * `whsec_` + the base64 of 32 random bytes (the Standard Webhooks form): `X-SVC-Signature` is keyed
 * with the whole string, `webhook-signature` with the 32 bytes. Webhooks created before this form
 * keep their `whsec_` + URL-safe base64 secrets until they rotate (see @svc/webhook-signature).
 */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The secret before the last rotation, while its overlap lasts (the sender checks the time again). */
export function previousSecretOf(w: Webhook): AttemptInput['previousSecret'] {
  return w.secreto_anterior !== null && w.secreto_anterior_expira_en !== null
    ? { secret: w.secreto_anterior, expiresAt: w.secreto_anterior_expira_en }
    : null;
}

/** A token's webhooks: those of its own mode (extensions.md, Sandbox parity); another mode's are not found. */
export function scopeOf(p: Principal): WebhookScope {
  return { empresaId: p.empresa.id, modo: p.modo, sucursalId: p.sucursal?.id ?? null };
}

/**
 * Creating, updating, deactivating, testing, resending to and rotating the secret of webhooks belong
 * to the head account: a branch token gets 403.
 */
export function requireHead(p: Principal): void {
  if (p.sucursal) throw new AppError('FORBIDDEN', 'a branch token cannot manage webhooks; use the company token');
}

// ---- what each operation answers: exactly the contract's fields -----------------------------------

export function presentCreated(w: Webhook, secret: string) {
  return {
    id: w.id,
    url: w.url,
    secret,
    eventos: w.eventos,
    descripcion: w.descripcion,
    createdAt: w.created_at.toISOString(),
    nota: NOTA_SECRET,
  };
}

function presentLast(last: LastAttempt | undefined) {
  return last ? { exitoso: last.exitoso, statusCode: last.statusCode, fecha: last.fecha.toISOString() } : null;
}

function presentDelivery(d: Delivery) {
  return {
    id: d.id,
    evento: d.evento,
    exitoso: d.exitoso,
    statusCode: d.statusCode,
    intentos: d.intentos,
    ultimoIntentoEn: d.ultimoIntentoEn ? d.ultimoIntentoEn.toISOString() : null,
    createdAt: d.createdAt.toISOString(),
  };
}

export function presentUpdated(w: Webhook) {
  return {
    id: w.id,
    url: w.url,
    eventos: w.eventos,
    descripcion: w.descripcion,
    activo: w.activo,
    createdAt: w.created_at.toISOString(),
  };
}

/** The URL as it is stored and sent to, or 400 INVALID_URL with the rule it breaks. */
function acceptedUrl(url: string): string {
  const check = checkWebhookUrl(url);
  if (!check.ok) throw new AppError('INVALID_URL', check.reason);
  return check.url;
}

// ---- operations ----------------------------------------------------------------------------------

/**
 * Registers a webhook for the company or one of its branches, in the mode of the token that makes
 * it (live from the portal's internal route). The company row is locked for the count and the
 * insert, so the limit of each mode holds under concurrent creations.
 */
export async function createWebhook(
  deps: Deps,
  owner: { empresaId: string; sucursalId: string | null; modo: Modo },
  body: WebhookCreate,
  usuario: string,
): Promise<ReturnType<typeof presentCreated>> {
  // Stored as the URL parser normalises it: the very form the sender will connect to.
  const url = acceptedUrl(body.url);
  const secret = generateSecret();
  const webhook = await deps.db.transaction().execute(async (trx) => {
    if (!(await lockCompany(trx, owner.empresaId))) throw new AppError('NOT_FOUND', 'no such company');
    if ((await countActive(trx, owner.empresaId, owner.modo)) >= MAX_ACTIVE_WEBHOOKS) {
      throw new AppError('LIMIT_EXCEEDED', `the company already has ${MAX_ACTIVE_WEBHOOKS} active ${owner.modo} webhooks`);
    }
    const created = await insertWebhook(trx, {
      empresaId: owner.empresaId,
      sucursalId: owner.sucursalId,
      modo: owner.modo,
      url,
      secret,
      eventos: body.eventos ?? [],
      descripcion: body.descripcion ?? null,
    });
    await recordActivity(trx, { empresaId: owner.empresaId, usuario, accion: 'webhook.created', sucursalId: owner.sucursalId, webhookId: created.id, detalle: { modo: owner.modo } });
    return created;
  });
  deps.logger.info({ webhookId: webhook.id, empresaId: owner.empresaId, sucursalId: owner.sucursalId, modo: owner.modo }, 'webhook created');
  return presentCreated(webhook, secret);
}

/**
 * The list holds active webhooks only: its items carry no `activo` field, so an inactive one would
 * read as if it still received events. A deactivated webhook stays readable by id (detail), with
 * its history.
 */
export async function listWebhooks(deps: Deps, scope: WebhookScope) {
  const webhooks = await listActiveWebhooks(deps.db, scope);
  const last = await lastAttemptPerWebhook(
    deps.db,
    webhooks.map((w) => w.id),
  );
  return webhooks.map((w) => ({
    id: w.id,
    url: w.url,
    eventos: w.eventos,
    descripcion: w.descripcion,
    createdAt: w.created_at.toISOString(),
    ultimoDelivery: presentLast(last.get(w.id)),
  }));
}

async function requireWebhook(deps: Deps, scope: WebhookScope, id: string): Promise<Webhook> {
  const webhook = isUuid(id) ? await findWebhook(deps.db, scope, id) : undefined;
  if (!webhook) throw new AppError('NOT_FOUND', 'no such webhook');
  return webhook;
}

export async function webhookDetail(deps: Deps, scope: WebhookScope, id: string) {
  const w = await requireWebhook(deps, scope, id);
  const entregas = await latestDeliveries(deps.db, w.id, DETAIL_DELIVERIES);
  return { ...presentUpdated(w), entregas: entregas.map(presentDelivery) };
}

/**
 * Updates the fields given. `activo: true` reactivates an inactive webhook within the limit of
 * active webhooks (counted under the company's lock, as a creation does; an active one stays as it
 * is); `activo: false` deactivates it as DELETE does, without an error when it already is.
 */
export async function patchWebhook(deps: Deps, scope: WebhookScope, id: string, body: WebhookPatch, usuario: string) {
  const url = body.url === undefined ? undefined : acceptedUrl(body.url);
  const current = await requireWebhook(deps, scope, id);
  const fields: { url?: string; eventos?: string[]; descripcion?: string | null; activo?: boolean } = {};
  if (url !== undefined) fields.url = url;
  if (body.eventos !== undefined) fields.eventos = body.eventos;
  if (body.descripcion !== undefined) fields.descripcion = body.descripcion;
  if (body.activo !== undefined) fields.activo = body.activo;
  const updated = await deps.db.transaction().execute(async (trx) => {
    if (body.activo === true) {
      if (!(await lockCompany(trx, scope.empresaId))) throw new AppError('NOT_FOUND', 'no such webhook');
      // Read again under the lock: a concurrent reactivation of this very webhook already counts.
      const now = await findWebhook(trx, scope, current.id);
      if (now && !now.activo && (await countActive(trx, scope.empresaId, now.modo)) >= MAX_ACTIVE_WEBHOOKS) {
        throw new AppError('LIMIT_EXCEEDED', `the company already has ${MAX_ACTIVE_WEBHOOKS} active ${now.modo} webhooks`);
      }
    }
    const changed = await updateWebhook(trx, scope.empresaId, current.id, fields);
    if (changed) {
      const entry = { empresaId: scope.empresaId, usuario, sucursalId: changed.sucursal_id, webhookId: changed.id };
      // Which fields, not their values: a URL may carry a receiver's own credentials in its query.
      const campos = (['url', 'eventos', 'descripcion'] as const).filter((k) => fields[k] !== undefined);
      if (campos.length > 0) await recordActivity(trx, { ...entry, accion: 'webhook.changed', detalle: { campos } });
      if (body.activo !== undefined && body.activo !== current.activo) {
        await recordActivity(trx, { ...entry, accion: body.activo ? 'webhook.reactivated' : 'webhook.deactivated' });
      }
    }
    return changed;
  });
  if (!updated) throw new AppError('NOT_FOUND', 'no such webhook');
  if (body.activo !== undefined && body.activo !== current.activo) {
    deps.logger.info({ webhookId: updated.id, empresaId: scope.empresaId }, body.activo ? 'webhook reactivated' : 'webhook deactivated');
  }
  return presentUpdated(updated);
}

export async function deleteWebhook(deps: Deps, scope: WebhookScope, id: string, usuario: string) {
  const current = await requireWebhook(deps, scope, id);
  const updated = await deps.db.transaction().execute(async (trx) => {
    const deactivated = await deactivateWebhook(trx, scope.empresaId, current.id);
    if (deactivated) {
      await recordActivity(trx, { empresaId: scope.empresaId, usuario, accion: 'webhook.deactivated', sucursalId: deactivated.sucursal_id, webhookId: deactivated.id });
    }
    return deactivated;
  });
  if (!updated) throw new AppError('ALREADY_INACTIVE', 'the webhook is already inactive');
  deps.logger.info({ webhookId: updated.id, empresaId: scope.empresaId }, 'webhook deactivated');
  return { id: updated.id, activo: updated.activo };
}

/**
 * One PING attempt through the dispatcher's own sending code (no retries), answered at once and
 * recorded among the webhook's deliveries.
 */
export async function pingWebhook(deps: Deps, scope: WebhookScope, id: string) {
  const w = await requireWebhook(deps, scope, id);
  if (!w.activo) throw new AppError('WEBHOOK_INACTIVE', 'the webhook is inactive');
  const deliveryId = randomUUID();
  const outcome = await attemptDelivery(deps.sender, {
    url: w.url,
    secret: w.secret,
    previousSecret: previousSecretOf(w),
    deliveryId,
    // A PING has no event: its own id names it, for its resends too.
    eventId: deliveryId,
    event: 'PING',
    data: {},
    sequence: null,
    mode: w.modo,
  });
  const durationMs = Math.max(0, Math.round(outcome.durationMs));
  await insertPingDelivery(deps.db, {
    id: deliveryId,
    webhookId: w.id,
    ok: outcome.ok,
    attempt: {
      numero: 1,
      fecha: new Date(outcome.timestamp),
      statusCode: outcome.statusCode,
      duracionMs: durationMs,
      error: outcome.error,
      mensaje: outcome.message,
      respuesta: outcome.response,
    },
  });
  deps.logger.info(
    {
      webhookId: w.id,
      deliveryId,
      exitoso: outcome.ok,
      statusCode: outcome.statusCode,
      result: outcome.result,
      durationMs,
      ...(outcome.ok ? {} : { error: outcome.error, reason: outcome.message }),
    },
    'webhook ping',
  );
  return { exitoso: outcome.ok, statusCode: outcome.statusCode, durationMs };
}

// ---- the delivery log ------------------------------------------------------------------------------

function presentAttempt(a: AttemptLog) {
  return {
    numero: a.numero,
    fecha: a.fecha.toISOString(),
    statusCode: a.statusCode,
    duracionMs: a.duracionMs,
    error: a.error,
    mensaje: a.mensaje,
    respuesta: a.respuesta,
  };
}

/** EntregaDetalle: the Delivery of the contract, and what the log adds. */
function presentLogged(d: LoggedDelivery, attempts: AttemptLog[]) {
  return {
    ...presentDelivery(d),
    estado: d.estado,
    // A PING has no event: its own id names it.
    eventoId: d.eventoId ?? d.id,
    numeroGuia: d.numeroGuia,
    reenvioDe: d.reenvioDe,
    intentosDetalle: attempts.map(presentAttempt),
  };
}

/** Every delivery of one webhook, newest first, filtered and paged. */
export async function deliveryLog(deps: Deps, scope: WebhookScope, id: string, query: Record<string, unknown>) {
  const { limit, after, filters } = parseLogQuery(query);
  const w = await requireWebhook(deps, scope, id);
  const rows = await listDeliveryLog(deps.db, w.id, filters, limit + 1, after);
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

/** One delivery of the webhook, with its attempts. */
export async function deliveryDetail(deps: Deps, scope: WebhookScope, id: string, entregaId: string) {
  const w = await requireWebhook(deps, scope, id);
  const d = isUuid(entregaId) ? await findLoggedDelivery(deps.db, w.id, entregaId) : undefined;
  if (!d) throw new AppError('NOT_FOUND', 'no such delivery of this webhook');
  const attempts = await attemptsOf(deps.db, [d.id]);
  return presentLogged(d, attempts.get(d.id) ?? []);
}

// ---- resending and recovery ------------------------------------------------------------------------

/** The first attempt of a resend: its event as the outbox keeps it, or for a PING `{}` in the webhook's mode. */
function firstAttempt(w: Webhook, d: Resent, requestId: string): DeliveryJob {
  const common = { deliveryId: d.id, attempt: 1, webhookId: w.id, eventId: d.eventoId ?? d.id, committedAt: d.createdAt.toISOString(), requestId };
  if (d.event === null) return { ...common, evento: 'PING', data: {}, mode: w.modo };
  return {
    ...common,
    evento: d.evento,
    data: d.event.data,
    ...(d.event.sequence === null ? {} : { sequence: d.event.sequence }),
    mode: d.event.mode,
  };
}

/**
 * Sends a delivery's event again to its webhook, now, with the webhook's current URL and secret: a
 * new delivery (new id) with the same event, `reenvioDe` = the original, and the usual attempts.
 * Written under the webhook's lock (so it sees `activo` as it is, and a concurrent recovery sees it),
 * then its first attempt is queued.
 */
export async function resendDelivery(deps: Deps, scope: WebhookScope, id: string, entregaId: string, requestId: string) {
  const w = await requireWebhook(deps, scope, id);
  if (!isUuid(entregaId)) throw new AppError('NOT_FOUND', 'no such delivery of this webhook');
  const resent = await deps.db.transaction().execute(async (trx) => {
    const locked = await lockWebhook(trx, scope.empresaId, w.id);
    const original = await findLoggedDelivery(trx, w.id, entregaId);
    if (!locked || !original) throw new AppError('NOT_FOUND', 'no such delivery of this webhook');
    if (!locked.activo) throw new AppError('WEBHOOK_INACTIVE', 'the webhook is inactive');
    if (original.estado === 'pendiente') throw new AppError('DELIVERY_PENDING', 'the delivery still has attempts left');
    const made = await insertResend(trx, w.id, original.id, eventFields);
    if (!made) throw new AppError('NOT_FOUND', 'the event of this delivery is no longer kept');
    return made;
  });
  await deps.resendRelay.enqueue([firstAttempt(w, resent, requestId)]);
  deps.logger.info({ webhookId: w.id, deliveryId: resent.id, reenvioDe: resent.reenvioDe, evento: resent.evento, requestId }, 'delivery resent');
  return presentLogged(resent, []);
}

/** `{ desde, hasta? }` as a window: `hasta` defaults to now; at most 14 days; `desde` before `hasta`. */
export function recoveryWindow(body: RecoveryRequest, now: Date): { desde: Date; hasta: Date } {
  const desde = parseInstant('desde', body.desde);
  const hasta = body.hasta === undefined ? now : parseInstant('hasta', body.hasta);
  if (desde >= hasta) throw new AppError('VALIDATION_ERROR', 'desde must be before hasta');
  if (hasta.getTime() - desde.getTime() > MAX_RECOVERY_MS) throw new AppError('VALIDATION_ERROR', 'the window from desde to hasta must be at most 14 days');
  return { desde, hasta };
}

/**
 * Resends every failed delivery of the webhook created in the window that is not a resend and has
 * none yet. The resends are written in one statement under the webhook's lock, so two recoveries
 * of the same window, even at once, resend each delivery once; the answer comes as soon as they are
 * committed, and their first attempts are queued in batches behind it (`ResendRelay`).
 */
export async function recoverDeliveries(deps: Deps, scope: WebhookScope, id: string, body: RecoveryRequest, now: Date, requestId: string) {
  const window = recoveryWindow(body, now);
  const w = await requireWebhook(deps, scope, id);
  const resends = await deps.db.transaction().execute(async (trx) => {
    const locked = await lockWebhook(trx, scope.empresaId, w.id);
    if (!locked) throw new AppError('NOT_FOUND', 'no such webhook');
    if (!locked.activo) throw new AppError('WEBHOOK_INACTIVE', 'the webhook is inactive');
    return insertRecoveryResends(trx, w.id, window, eventFields);
  });
  // Answered now; the jobs follow in batches.
  if (resends.length > 0) void deps.resendRelay.enqueue(resends.map((d) => firstAttempt(w, d, requestId)));
  deps.logger.info(
    { webhookId: w.id, reenviadas: resends.length, desde: window.desde.toISOString(), hasta: window.hasta.toISOString(), requestId },
    'deliveries recovered',
  );
  return { reenviadas: resends.length };
}

// ---- secret rotation -------------------------------------------------------------------------------

/**
 * Issues a new secret, shown once in this answer. The replaced one keeps signing beside it
 * (`X-SVC-Signature-Anterior`, a second `webhook-signature`) for `solaparHoras` (default 24; 0: not
 * at all); an older overlap still running ends now. An inactive webhook's secret rotates too.
 */
export async function rotateWebhookSecret(deps: Deps, scope: WebhookScope, id: string, body: SecretRotation, usuario: string) {
  const w = await requireWebhook(deps, scope, id);
  const hours = body.solaparHoras ?? DEFAULT_OVERLAP_HOURS;
  const secret = generateSecret();
  const rotated = await deps.db.transaction().execute(async (trx) => {
    const row = await rotateSecret(trx, scope.empresaId, w.id, secret, hours);
    // The overlap, never a secret.
    if (row) await recordActivity(trx, { empresaId: scope.empresaId, usuario, accion: 'webhook.secret_rotated', sucursalId: row.sucursal_id, webhookId: row.id, detalle: { solaparHoras: hours } });
    return row;
  });
  if (!rotated) throw new AppError('NOT_FOUND', 'no such webhook');
  const expiresAt = rotated.secreto_anterior_expira_en;
  deps.logger.info({ webhookId: w.id, empresaId: scope.empresaId, solaparHoras: hours }, 'webhook secret rotated');
  return {
    id: rotated.id,
    secret,
    secretoAnteriorExpiraEn: expiresAt ? expiresAt.toISOString() : null,
    nota: expiresAt ? NOTA_ROTATED + NOTA_OVERLAP : `${NOTA_ROTATED}; el secreto anterior ya no firma.`,
  };
}
