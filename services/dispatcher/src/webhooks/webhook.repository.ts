import { sql, type RawBuilder } from 'kysely';
import {
  SealedSecretError,
  WEBHOOK_TARGET_COLUMNS,
  webhookTargetOf,
  type Db,
  type SecretBox,
  type WebhookTarget,
  type WebhookTargetRow,
} from '@svc/platform';
import type { Modo } from '@svc/contracts';
import type { RouteKey } from './routes.cache';

/** The dispatcher's reads of `webhooks`: where an event goes, and where and how to send it. */

/** An event to route: its id and what decides its routes (the mode of its shipment among them). */
export interface RoutableEvent extends RouteKey {
  eventId: string;
}

/**
 * The rows `(event_id uuid, webhooks_version, ...WebhookRow)`: each event of a batch with every
 * active webhook it goes to and that webhook's target, and its company's webhook count as this read
 * saw it, as a fragment for the fan-out's read (one round trip per batch). An event that goes
 * nowhere still has one row, its webhook's columns null: the count says as of when it went nowhere.
 *
 * Routing: an event reaches webhooks of its own mode only (a sandbox shipment's, test webhooks; a
 * live one's, live webhooks). Within the mode, an event of the company reaches the webhooks with no
 * branch; an event of a branch reaches those and the branch's own (`sucursal_id = null` never
 * matches, so a company event skips branch webhooks). Subscription: an empty `eventos` takes every
 * event.
 */
export function routedWebhooks(events: readonly RoutableEvent[]): RawBuilder<NullableWebhookRow & { event_id: string; webhooks_version: string }> {
  return sql`
    select ev.event_id, coalesce(wv.version, 0) as webhooks_version, w.*
    from unnest(
      ${sql.val(events.map((e) => e.eventId))}::uuid[],
      ${sql.val(events.map((e) => e.event))}::text[],
      ${sql.val(events.map((e) => e.companyId))}::uuid[],
      ${sql.val(events.map((e) => e.branchId))}::uuid[],
      ${sql.val(events.map((e) => e.mode))}::text[]
    ) as ev(event_id, evento, empresa_id, sucursal_id, modo)
    left join webhook_versions wv on wv.empresa_id = ev.empresa_id
    left join lateral (
      select ${sql.join(WEBHOOK_TARGET_COLUMNS.map((c) => sql.ref(`w.${c}`)))}
      from webhooks w
      where w.empresa_id = ev.empresa_id
        and w.modo = ev.modo
        and w.activo
        and (w.sucursal_id is null or w.sucursal_id = ev.sucursal_id)
        and (cardinality(w.eventos) = 0 or ev.evento = any(w.eventos))
      -- Not flattened: the statement's generic plan outlives the statistics it was made with, and
      -- each event must stay one probe of webhooks_routing_idx however many webhooks there are.
      offset 0
    ) w on true`;
}

/** The columns of a left join's right side: every one null where the row had no match. */
export type NullableColumns<T> = { [K in keyof T]: T[K] | null };

/** A routing row's webhook: every column null where the event goes nowhere. */
export type NullableWebhookRow = NullableColumns<WebhookTargetRow>;

/**
 * A webhook whose stored secret does not open (a key SECRETS_KEY no longer lists, an altered value):
 * nothing is sent to it, since it could only be signed with a wrong key; its deliveries wait, owed,
 * and go once the secret is fixed. Inactive, it is still ended as any inactive webhook is.
 */
export interface UnopenedTarget {
  id: string;
  active: boolean;
  mode: Modo;
  /** Why; its message names the webhook and the key id, never the value. */
  unopened: SealedSecretError;
}

/** A webhook's target as the dispatcher reads and holds it: its secrets opened, or why they did not open. */
export type ReadTarget = WebhookTarget | UnopenedTarget;

export const isUnopened = (t: ReadTarget): t is UnopenedTarget => 'unopened' in t;

/**
 * A target row with its secrets opened, once, as it is read: what the routes and targets held in
 * memory keep, so a delivery never opens a secret itself.
 */
export function openTarget(row: WebhookTargetRow, secrets: SecretBox): ReadTarget {
  try {
    return webhookTargetOf(row, secrets);
  } catch (err) {
    if (!(err instanceof SealedSecretError)) throw err;
    return { id: row.id, active: row.activo, mode: row.modo, unopened: err };
  }
}

/** The targets of a batch of webhooks, in one query, their secrets opened; unknown ids are simply absent. */
export async function findWebhookTargets(db: Db, secrets: SecretBox, ids: readonly string[]): Promise<Map<string, ReadTarget>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhooks')
    .select(WEBHOOK_TARGET_COLUMNS)
    .where('id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, openTarget(r, secrets)]));
}

/** The modes and companies of a batch of webhooks (a PING's resend is sent in its webhook's mode, on its company's shard); unknown ids are absent. */
export async function findWebhookModes(db: Db, ids: readonly string[]): Promise<Map<string, { mode: Modo; empresaId: string }>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhooks')
    .select(['id', 'modo', 'empresa_id'])
    .where('id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, { mode: r.modo, empresaId: r.empresa_id }]));
}
