import { randomBytes, randomUUID } from 'node:crypto';
import {
  AppError,
  DEFAULT_OVERLAP_HOURS,
  isUuid,
  MAX_ACTIVE_WEBHOOKS,
  type Modo,
  type SecretRotation,
  type Webhook,
  type WebhookCreate,
  type WebhookPatch,
} from '@svc/contracts';
import { deactivateWebhook, insertPingDelivery, insertWebhook, rotateSecret, updateWebhook, webhookTargetOf, type Db } from '@svc/platform';
import { attemptDelivery, checkWebhookUrl } from '@svc/webhook-sender';
import type { GatewayDeps } from '../deps';
import type { Caller, CompanyScope } from '../companies/company-scope';
import { lockCompany } from '../companies/company.repository';
import { deliveriesSince, lastAttemptPerWebhook, latestDeliveries, logReaderOf } from '../deliveries/delivery.repository';
import { presentDelivery, presentLast } from '../deliveries/delivery.presenter';
import { OPERATOR, recordActivity } from '../activity/activity.repository';
import { countActive, countActiveByMode, findWebhook, listActiveWebhooks, listOwnerWebhooks, listTroubledWebhooks } from './webhook.repository';
import { DEGRADED_FOR_MS, healthOf } from './webhook-health';

type Deps = Pick<GatewayDeps, 'db' | 'sender' | 'secrets' | 'logger'>;

/** The contract's window of deliveries in a webhook's detail: the 20 most recent. */
export const DETAIL_DELIVERIES = 20;

export const NOTA_SECRET =
  'Guarde este secreto en un lugar seguro: no se volverá a mostrar ni se puede recuperar. ' +
  'Úselo para verificar la firma X-SVC-Signature de cada entrega.';

const NOTA_ROTATED =
  'Guarde este secreto en un lugar seguro: no se volverá a mostrar ni se puede recuperar. ' +
  'Desde ahora X-SVC-Signature y webhook-signature usan este secreto';
const NOTA_OVERLAP =
  '; hasta secretoAnteriorExpiraEn cada entrega lleva además X-SVC-Signature-Anterior y una segunda firma en webhook-signature, calculadas con el secreto anterior.';

/**
 * `whsec_` + the base64 of 32 random bytes (the Standard Webhooks form): `X-SVC-Signature` is keyed
 * with the whole string, `webhook-signature` with the 32 bytes. Webhooks created before this form
 * keep their `whsec_` + URL-safe base64 secrets until they rotate (see @svc/webhook-signature).
 */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * Creating, updating, deactivating, testing, resending to and rotating the secret of webhooks belong
 * to the head account: a branch token gets 403.
 */
export function requireHead(caller: Pick<Caller, 'sucursalId'>): void {
  if (caller.sucursalId !== null) throw new AppError('FORBIDDEN', 'a branch token cannot manage webhooks; use the company token');
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
  owner: CompanyScope,
  body: WebhookCreate,
  usuario: string,
): Promise<ReturnType<typeof presentCreated>> {
  // Stored as the URL parser normalises it: the very form the sender will connect to.
  const url = acceptedUrl(body.url);
  const secret = generateSecret();
  // The id is chosen here: the sealed secret is bound to it.
  const id = randomUUID();
  const sealedSecret = deps.secrets.seal(id, secret);
  const webhook = await deps.db.transaction().execute(async (trx) => {
    if (!(await lockCompany(trx, owner.empresaId))) throw new AppError('NOT_FOUND', 'no such company');
    if ((await countActive(trx, owner.empresaId, owner.modo)) >= MAX_ACTIVE_WEBHOOKS) {
      throw new AppError('LIMIT_EXCEEDED', `the company already has ${MAX_ACTIVE_WEBHOOKS} active ${owner.modo} webhooks`);
    }
    const created = await insertWebhook(trx, {
      id,
      empresaId: owner.empresaId,
      sucursalId: owner.sucursalId,
      modo: owner.modo,
      url,
      sealedSecret,
      eventos: body.eventos ?? [],
      descripcion: body.descripcion ?? null,
    });
    await recordActivity(trx, { empresaId: owner.empresaId, usuario, accion: 'webhook.created', sucursalId: owner.sucursalId, webhookId: created.id, detalle: { modo: owner.modo } });
    return created;
  });
  deps.logger.info({ webhook: webhook.id, empresaId: owner.empresaId, sucursalId: owner.sucursalId, modo: owner.modo }, 'webhook created');
  return presentCreated(webhook, secret);
}

/**
 * The list holds active webhooks only: its items carry no `activo` field, so an inactive one would
 * read as if it still received events. A deactivated webhook stays readable by id (detail), with
 * its history.
 */
export async function listWebhooks(deps: Deps, scope: CompanyScope) {
  const webhooks = await listActiveWebhooks(deps.db, scope);
  const last = await lastAttemptPerWebhook(
    deps.db,
    webhooks.map((w) => w.id),
    scope.sucursalId,
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

/** The webhook `id` if the scope sees it, active or not; else 404 NOT_FOUND. */
export async function requireWebhook(db: Db, scope: CompanyScope, id: string): Promise<Webhook> {
  const webhook = isUuid(id) ? await findWebhook(db, scope, id) : undefined;
  if (!webhook) throw new AppError('NOT_FOUND', 'no such webhook');
  return webhook;
}

export async function webhookDetail(deps: Deps, scope: CompanyScope, id: string) {
  const w = await requireWebhook(deps.db, scope, id);
  const deliveries = await latestDeliveries(deps.db, w.id, DETAIL_DELIVERIES, logReaderOf(scope, w));
  return { ...presentUpdated(w), entregas: deliveries.map(presentDelivery) };
}

/**
 * `GET /webhooks/{id}/salud`: the health its row keeps, and its deliveries of the last 24 hours by
 * state (the scope's share of the log, as the detail shows it).
 */
export async function webhookHealth(deps: Deps, scope: CompanyScope, id: string, now: Date) {
  const w = await requireWebhook(deps.db, scope, id);
  const counts = await deliveriesSince(deps.db, w.id, new Date(now.getTime() - DEGRADED_FOR_MS), logReaderOf(scope, w));
  const { estado, desde, ultimoExito, fallasConsecutivas, desactivacion } = healthOf(w, now);
  return { estado, desde, ultimoExito, fallasConsecutivas, ultimas24h: { exitosas: counts.exitosa, fallidas: counts.fallida, pendientes: counts.pendiente }, desactivacion };
}

/**
 * Updates the fields given. `activo: true` reactivates an inactive webhook within the limit of
 * active webhooks (counted under the company's lock, as a creation does; an active one stays as it
 * is); `activo: false` deactivates it as DELETE does, without an error when it already is.
 */
export async function patchWebhook(deps: Deps, scope: CompanyScope, id: string, body: WebhookPatch, usuario: string) {
  const url = body.url === undefined ? undefined : acceptedUrl(body.url);
  const current = await requireWebhook(deps.db, scope, id);
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
    const changed = await updateWebhook(trx, scope.empresaId, current.id, fields, deactivatedBy(usuario));
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
    deps.logger.info({ webhook: updated.id, empresaId: scope.empresaId }, body.activo ? 'webhook reactivated' : 'webhook deactivated');
  }
  return presentUpdated(updated);
}

/** `desactivacion.por` of a deactivation by hand: the internal routes' are the operator's, every other the company's (a token or the portal). */
const deactivatedBy = (usuario: string): 'empresa' | 'operador' => (usuario === OPERATOR ? 'operador' : 'empresa');

export async function deleteWebhook(deps: Deps, scope: CompanyScope, id: string, usuario: string) {
  const current = await requireWebhook(deps.db, scope, id);
  const updated = await deps.db.transaction().execute(async (trx) => {
    const deactivated = await deactivateWebhook(trx, scope.empresaId, current.id, deactivatedBy(usuario));
    if (deactivated) {
      await recordActivity(trx, { empresaId: scope.empresaId, usuario, accion: 'webhook.deactivated', sucursalId: deactivated.sucursal_id, webhookId: deactivated.id });
    }
    return deactivated;
  });
  if (!updated) throw new AppError('ALREADY_INACTIVE', 'the webhook is already inactive');
  deps.logger.info({ webhook: updated.id, empresaId: scope.empresaId }, 'webhook deactivated');
  return { id: updated.id, activo: updated.activo };
}

/**
 * One PING attempt through the dispatcher's own sending code (no retries), answered at once and
 * recorded among the webhook's deliveries.
 */
export async function pingWebhook(deps: Deps, scope: CompanyScope, id: string) {
  const w = await requireWebhook(deps.db, scope, id);
  if (!w.activo) throw new AppError('WEBHOOK_INACTIVE', 'the webhook is inactive');
  // Opened only now, to sign; a secret that does not open throws (a 500, logged): never a wrong key.
  const target = webhookTargetOf(w, deps.secrets);
  const deliveryId = randomUUID();
  const outcome = await attemptDelivery(deps.sender, {
    url: target.url,
    secret: target.secret,
    previousSecret: target.previousSecret,
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
      at: new Date(outcome.timestamp),
      statusCode: outcome.statusCode,
      durationMs,
      error: outcome.error,
      message: outcome.message,
      response: outcome.response,
    },
  });
  deps.logger.info(
    {
      webhook: w.id,
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

// ---- secret rotation -------------------------------------------------------------------------------

/**
 * Issues a new secret, shown once in this answer. The replaced one keeps signing beside it
 * (`X-SVC-Signature-Anterior`, a second `webhook-signature`) for `solaparHoras` (default 24; 0: not
 * at all); an older overlap still running ends now. An inactive webhook's secret rotates too.
 */
export async function rotateWebhookSecret(deps: Deps, scope: CompanyScope, id: string, body: SecretRotation, usuario: string) {
  const w = await requireWebhook(deps.db, scope, id);
  const hours = body.solaparHoras ?? DEFAULT_OVERLAP_HOURS;
  const secret = generateSecret();
  const rotated = await deps.db.transaction().execute(async (trx) => {
    const row = await rotateSecret(trx, scope.empresaId, w.id, deps.secrets.seal(w.id, secret), hours);
    // The overlap, never a secret.
    if (row) await recordActivity(trx, { empresaId: scope.empresaId, usuario, accion: 'webhook.secret_rotated', sucursalId: row.sucursal_id, webhookId: row.id, detalle: { solaparHoras: hours } });
    return row;
  });
  if (!rotated) throw new AppError('NOT_FOUND', 'no such webhook');
  const expiresAt = rotated.secreto_anterior_expira_en;
  deps.logger.info({ webhook: w.id, empresaId: scope.empresaId, solaparHoras: hours }, 'webhook secret rotated');
  return {
    id: rotated.id,
    secret,
    secretoAnteriorExpiraEn: expiresAt ? expiresAt.toISOString() : null,
    nota: expiresAt ? NOTA_ROTATED + NOTA_OVERLAP : `${NOTA_ROTATED}; el secreto anterior ya no firma.`,
  };
}

// ---- the customer portal's views (docs/portal.md) ----------------------------------------------------

/**
 * The portal's table of webhooks: every webhook of one owner (the company's own, or one branch's) in
 * one mode, active or not (the portal reactivates them), with its last attempt.
 */
export async function listOwnerWebhookViews(deps: Deps, owner: { empresaId: string; modo: Modo; sucursalId: string | null }) {
  const webhooks = await listOwnerWebhooks(deps.db, owner);
  const last = await lastAttemptPerWebhook(
    deps.db,
    webhooks.map((w) => w.id),
  );
  const now = new Date();
  return webhooks.map((w) => ({
    ...presentUpdated(w),
    sucursalId: w.sucursal_id,
    ultimoDelivery: presentLast(last.get(w.id)),
    salud: healthOf(w, now),
  }));
}

/** The portal's Webhooks con problemas: the company's failing webhooks and those the platform deactivated, with their health. */
export async function troubledWebhookViews(deps: Deps, empresaId: string, now: Date) {
  const webhooks = await listTroubledWebhooks(deps.db, empresaId);
  return webhooks.map((w) => ({ id: w.id, url: w.url, descripcion: w.descripcion, modo: w.modo, sucursalId: w.sucursal_id, salud: healthOf(w, now) }));
}

/** Active webhooks of a company per mode, its branches' included. */
export function activeWebhookCounts(deps: Deps, empresaId: string): Promise<Record<Modo, number>> {
  return countActiveByMode(deps.db, empresaId);
}
