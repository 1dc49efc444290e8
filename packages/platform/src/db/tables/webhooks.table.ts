import type { Selectable } from 'kysely';
import { previousSecretOf, type Modo, type PreviousSecret, type WebhooksTable } from '@svc/contracts';
import type { SecretBox } from '../sealed-secrets';

/**
 * What both services must agree on about `webhooks`: the columns that decide where an event goes
 * and how it is sent and signed, and the target they make.
 */

type WebhookColumn = keyof WebhooksTable;

/** The columns that decide which events reach a webhook: its company, branch, mode, subscription and state. */
export const WEBHOOK_ROUTING_COLUMNS = ['empresa_id', 'sucursal_id', 'modo', 'eventos', 'activo'] as const satisfies readonly WebhookColumn[];

/**
 * The columns that make a webhook's target: where its deliveries go, the secrets that sign them,
 * and its company (the dispatcher shares its send slots between companies first).
 */
export const WEBHOOK_TARGET_COLUMNS = ['id', 'empresa_id', 'url', 'secret', 'secreto_anterior', 'secreto_anterior_expira_en', 'activo', 'modo'] as const satisfies readonly WebhookColumn[];

/**
 * Every column whose change alters a company's routes or targets: the column list of the
 * `webhook_versions` trigger, which a test holds equal to this. A new routing or signing column
 * goes in one of the lists above and, in its migration, into the trigger.
 */
export const WEBHOOK_VERSIONED_COLUMNS: readonly WebhookColumn[] = [...new Set<WebhookColumn>([...WEBHOOK_ROUTING_COLUMNS, ...WEBHOOK_TARGET_COLUMNS])].filter(
  (c) => c !== 'id', // a key, never updated
);

/** A webhook's target columns, as read: its secrets sealed (db/sealed-secrets.ts). */
export type WebhookTargetRow = Pick<Selectable<WebhooksTable>, (typeof WEBHOOK_TARGET_COLUMNS)[number]>;

/** Where and how a webhook's deliveries are sent. */
export interface WebhookTarget {
  id: string;
  /** Its company: the tenant whose share of the send slots its deliveries use. */
  companyId: string;
  url: string;
  /** The signing key, opened: never log it. */
  secret: string;
  /**
   * The secret before the last rotation and the end of its overlap, during which it signs beside
   * `secret` (the sender compares the end with each attempt's time); null when there is none.
   */
  previousSecret: PreviousSecret | null;
  active: boolean;
  /** Its mode: only events of this mode reach it; a PING's `X-SVC-Modo`. */
  mode: Modo;
}

/**
 * The target of a row, its secrets opened with `secrets`: throws SealedSecretError when one does not
 * open (a key SECRETS_KEY no longer lists, an altered value), so nothing is ever signed with a wrong
 * key. Opening costs a few microseconds; callers that hold targets (the dispatcher's routes) open
 * once per read, not once per delivery.
 */
export function webhookTargetOf(r: WebhookTargetRow, secrets: SecretBox): WebhookTarget {
  const previous = previousSecretOf(r);
  return {
    id: r.id,
    companyId: r.empresa_id,
    url: r.url,
    secret: secrets.open(r.id, r.secret),
    previousSecret: previous && { secret: secrets.open(r.id, previous.secret), expiresAt: previous.expiresAt },
    active: r.activo,
    mode: r.modo,
  };
}
