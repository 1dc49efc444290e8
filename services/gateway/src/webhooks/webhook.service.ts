import { randomBytes, randomUUID } from 'node:crypto';
import { AppError, isUuid, type Webhook, type WebhookCreate, type WebhookPatch } from '@svc/schema';
import { attemptDelivery, checkWebhookUrl } from '@svc/webhook-sender';
import type { GatewayDeps } from '../deps';
import type { Principal } from '../auth/principal';
import { lockCompany } from '../companies/company.repository';
import {
  attemptsOf,
  findLoggedDelivery,
  insertPingDelivery,
  lastAttemptPerWebhook,
  latestDeliveries,
  listDeliveryLog,
  type AttemptLog,
  type Delivery,
  type LastAttempt,
  type LoggedDelivery,
} from './delivery.repository';
import { parseLogQuery, encodeLogCursor } from './delivery-log.query';
import {
  countActive,
  deactivateWebhook,
  findWebhook,
  insertWebhook,
  listActiveWebhooks,
  updateWebhook,
  type WebhookScope,
} from './webhook.repository';

type Deps = Pick<GatewayDeps, 'db' | 'sender' | 'logger'>;

/** Active webhooks per company, its branches' included: the contract's limit. */
export const MAX_ACTIVE_WEBHOOKS = 10;
/** The detail's window of deliveries. */
export const DETAIL_DELIVERIES = 20;

export const NOTA_SECRET =
  'Guarde este secreto en un lugar seguro: no se volverá a mostrar ni se puede recuperar. ' +
  'Úselo para verificar la firma X-SVC-Signature de cada entrega.';

/** 32 random bytes, URL-safe: the HMAC key of every delivery to this webhook. */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export function scopeOf(p: Principal): WebhookScope {
  return { empresaId: p.empresa.id, sucursalId: p.sucursal?.id ?? null };
}

/** Creating, updating, deactivating and testing webhooks belong to the head account: a branch token gets 403. */
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
 * Registers a webhook for the company or one of its branches. The company row is locked for the
 * count and the insert, so the limit holds under concurrent creations.
 */
export async function createWebhook(
  deps: Deps,
  owner: { empresaId: string; sucursalId: string | null },
  body: WebhookCreate,
): Promise<ReturnType<typeof presentCreated>> {
  // Stored as the URL parser normalises it: the very form the sender will connect to.
  const url = acceptedUrl(body.url);
  const secret = generateSecret();
  const webhook = await deps.db.transaction().execute(async (trx) => {
    if (!(await lockCompany(trx, owner.empresaId))) throw new AppError('NOT_FOUND', 'no such company');
    if ((await countActive(trx, owner.empresaId)) >= MAX_ACTIVE_WEBHOOKS) {
      throw new AppError('LIMIT_EXCEEDED', `the company already has ${MAX_ACTIVE_WEBHOOKS} active webhooks`);
    }
    return insertWebhook(trx, {
      empresaId: owner.empresaId,
      sucursalId: owner.sucursalId,
      url,
      secret,
      eventos: body.eventos ?? [],
      descripcion: body.descripcion ?? null,
    });
  });
  deps.logger.info({ webhookId: webhook.id, empresaId: owner.empresaId, sucursalId: owner.sucursalId }, 'webhook created');
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

export async function patchWebhook(deps: Deps, scope: WebhookScope, id: string, body: WebhookPatch) {
  const url = body.url === undefined ? undefined : acceptedUrl(body.url);
  const current = await requireWebhook(deps, scope, id);
  const fields: { url?: string; eventos?: string[]; descripcion?: string | null } = {};
  if (url !== undefined) fields.url = url;
  if (body.eventos !== undefined) fields.eventos = body.eventos;
  if (body.descripcion !== undefined) fields.descripcion = body.descripcion;
  const updated = await updateWebhook(deps.db, scope.empresaId, current.id, fields);
  if (!updated) throw new AppError('NOT_FOUND', 'no such webhook');
  return presentUpdated(updated);
}

export async function deleteWebhook(deps: Deps, scope: WebhookScope, id: string) {
  const current = await requireWebhook(deps, scope, id);
  const updated = await deactivateWebhook(deps.db, scope.empresaId, current.id);
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
    deliveryId,
    event: 'PING',
    data: {},
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
