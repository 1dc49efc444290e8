import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { AttemptErrorClass } from '../attempts';
import type { AutoDisableReason, DeactivatedBy, Estado, LoggedEvent, ShipmentEvent, ShipmentEventData, EventName, WebhookNoticeData } from '../events';

/** A timestamptz with a default: optional on insert. */
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

export type Modo = 'live' | 'test';
export type PlanPersonalizado = 'PENDIENTE' | 'APROBADA' | 'RECHAZADA';
export type DeliveryState = 'pendiente' | 'exitosa' | 'fallida';

export interface EmpresasTable {
  id: Generated<string>;
  nombre: string;
  verificada: Generated<boolean>;
  sucursales_habilitadas: Generated<boolean>;
  limite_diario: Generated<number>;
  plan_activo: Generated<boolean>;
  creditos: Generated<number>;
  plan_personalizado: PlanPersonalizado | null;
  /** Live shipments created on `guias_hoy_dia` (a Guatemala calendar day). */
  guias_hoy: Generated<number>;
  guias_hoy_dia: string | null;
  /** Sandbox shipments created on `guias_sandbox_hoy_dia`, against SANDBOX_DAILY_LIMIT. */
  guias_sandbox_hoy: Generated<number>;
  guias_sandbox_hoy_dia: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SucursalesTable {
  id: Generated<string>;
  empresa_id: string;
  nombre: string;
  created_at: Timestamp;
}

export interface TokensTable {
  id: Generated<string>;
  empresa_id: string;
  sucursal_id: string | null;
  modo: Modo;
  /** Hex SHA-256 of the bearer value; the value itself is never stored. */
  hash: string;
  created_at: Timestamp;
}

export interface GuiasTable {
  id: Generated<string>; // bigint identity, as text: the list cursor
  numero_guia: string;
  empresa_id: string;
  sucursal_id: string | null;
  modo: Modo;
  estado: Estado;
  destinatario: Json<Record<string, unknown>>;
  paquete: Json<Record<string, unknown>>;
  referencia: string | null;
  extra: Json<Record<string, unknown>> | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface GuiaHistorialTable {
  id: Generated<string>;
  guia_id: string;
  estado: Estado;
  evento: ShipmentEvent;
  motivo: string | null;
  fecha_entrega: string | null;
  fecha: Timestamp;
}

export interface OutboxTable {
  id: string;
  empresa_id: string;
  sucursal_id: string | null;
  /** A shipment event, or a notice about one of the company's webhooks (its data a WebhookNoticeData). */
  evento: LoggedEvent;
  data: Json<ShipmentEventData | WebhookNoticeData>;
  request_id: string | null;
  created_at: Timestamp;
  /** Set once the relay has added the event to the queue. */
  enviado_en: NullableTimestamp;
  /** When the dispatcher recorded the event's deliveries; null until then (the reconciler's cue). */
  repartido_en: NullableTimestamp;
  /**
   * The event's position in its shipment's history (1 = GUIA_CREADA), fixed when the event is
   * committed: every delivery, retry and resend of it carries the same `X-SVC-Secuencia`.
   */
  secuencia: ColumnType<number | null, number | null | undefined, number | null>;
  /** The mode of the event's shipment: its deliveries' `X-SVC-Modo`. */
  modo: Generated<Modo>;
}

/** What a `webhooks` row is: an integrator's webhook, or a listening session (`svc listen`). */
export type WebhookTipo = 'webhook' | 'escucha';

export interface WebhooksTable {
  id: Generated<string>;
  empresa_id: string;
  sucursal_id: string | null;
  url: string;
  /**
   * Sealed (db/sealed-secrets.ts: `v1:<keyId>:...`), opened only to sign; never returned after
   * creation, never logged. A `whsec_` value is one stored before sealing, sealed at the next start.
   */
  secret: string;
  /**
   * The secret a rotation replaced, sealed likewise, still signing beside `secret` until
   * `secreto_anterior_expira_en`; erased (both null) once that has passed.
   */
  secreto_anterior: ColumnType<string | null, string | null | undefined, string | null>;
  secreto_anterior_expira_en: NullableTimestamp;
  /** The mode of the token that made it: only events of this mode reach it, only tokens of this mode see it. */
  modo: Generated<Modo>;
  eventos: ColumnType<string[], string[], string[]>;
  descripcion: string | null;
  activo: Generated<boolean>;
  /**
   * `webhook`, or `escucha`: a listening session of `svc listen` (a hidden row of the company's
   * test mode, routed and signed as a webhook is, sent through the session's stream). Never changes.
   */
  tipo: Generated<WebhookTipo>;
  created_at: Timestamp;
  updated_at: Timestamp;
  /**
   * Its health (migration 20261202100000), kept by the dispatcher as deliveries end
   * (tables/webhooks.table.ts, `recordHealth`): deliveries ended `fallida` since the last success
   * (PINGs not counted), when the first of them ended, the last success and the last failure, when
   * its current run of successes began, and when it last sent WEBHOOK_FALLANDO.
   */
  salud_fallas: Generated<number>;
  salud_fallando_desde: NullableTimestamp;
  salud_ultimo_exito: NullableTimestamp;
  salud_ultima_falla: NullableTimestamp;
  salud_estable_desde: NullableTimestamp;
  salud_aviso_en: NullableTimestamp;
  /** The last deactivation: when, by whom, and for `sistema` why; null while it never was deactivated. */
  desactivado_en: NullableTimestamp;
  desactivado_por: ColumnType<DeactivatedBy | null, DeactivatedBy | null | undefined, DeactivatedBy | null>;
  desactivado_motivo: ColumnType<AutoDisableReason | null, AutoDisableReason | null | undefined, AutoDisableReason | null>;
}

/**
 * A company's count of changes to its webhooks' routing and signing columns, kept by a trigger on
 * `webhooks` (migration 20261126090000). An event carries it as its transaction read it: routes
 * read at this count or later are current for that event.
 */
export interface WebhookVersionsTable {
  empresa_id: string;
  /** bigint: pg returns it as a string. */
  version: ColumnType<string, never, never>;
}

export interface EntregasTable {
  id: string;
  webhook_id: string;
  evento_id: string | null;
  evento: EventName;
  estado: Generated<DeliveryState>;
  exitoso: Generated<boolean>;
  status_code: Generated<number>;
  intentos: Generated<number>;
  ultimo_intento_en: NullableTimestamp;
  /** When the next attempt of a pending delivery is due; null once it has ended. */
  proximo_intento_en: NullableTimestamp;
  /** Its next attempt was deferred (no free slot) and waits here, with no job in Redis. */
  diferida: Generated<boolean>;
  /** The shipment of the event; null for a PING. */
  numero_guia: string | null;
  /** The delivery this one resends; null otherwise. */
  reenvio_de: string | null;
  /**
   * True for a resend: it shares its original's `evento_id`, so the one-delivery-per-(event,
   * webhook) index leaves it out. Kept apart from `reenvio_de`, which retention may set to null.
   */
  es_reenvio: Generated<boolean>;
  created_at: Timestamp;
  /**
   * The partition key (one partition per UTC day): the creation of the event for an event's own
   * delivery, so that every run of its fan-out writes the same key and the same id finds itself;
   * the delivery's own creation for a PING or a resend.
   */
  particion_en: Timestamp;
}

/** One attempt of a delivery, with its reason. */
export interface EntregaIntentosTable {
  entrega_id: string;
  numero: number;
  fecha: Date;
  status_code: number;
  duracion_ms: number;
  error: AttemptErrorClass | null;
  mensaje: string | null;
  respuesta: string | null;
  /** Its delivery's `particion_en`: a day's attempts are in the partition of that day's deliveries. */
  particion_en: Date;
}

export interface IdempotenciaTable {
  scope: string;
  clave: string;
  request_hash: string;
  status_code: number | null;
  response: Json<unknown> | null;
  created_at: Timestamp;
}

/** A single-use portal link (docs/portal.md): the hash of its secret, never the secret. */
export interface PortalEnlacesTable {
  id: Generated<string>;
  empresa_id: string;
  /** Who the link is for, as the courier's website named them (kept for the activity log). */
  usuario: string;
  hash: string;
  expira_en: Date;
  /** Set when the link was traded for a session: it works once. */
  usado_en: NullableTimestamp;
  created_at: Timestamp;
}

/** A portal session: the hash of its cookie's secret, its idle and absolute ends. */
export interface PortalSesionesTable {
  id: Generated<string>;
  empresa_id: string;
  usuario: string;
  hash: string;
  created_at: Date;
  ultimo_uso_en: Date;
  /** The absolute end (8 hours after it began). */
  expira_en: Date;
  /** Set on logout, or when the operator ends the company's sessions. */
  terminada_en: NullableTimestamp;
}

/**
 * What the activity log records, a closed list (docs/portal.md, Actividad, and the operator's own
 * actions). The names are stored data: renaming one needs a migration of the rows.
 */
export const ACTIVITY_ACTIONS = [
  // the operator's internal routes only
  'company.created',
  'company.changed',
  'credits.added',
  'branch.created',
  'shipment.event',
  // the operator's and the portal's (and, for webhooks, the API's)
  'tokens.generated',
  'tokens.regenerated',
  'tokens.deleted',
  'webhook.created',
  'webhook.changed',
  'webhook.deactivated',
  'webhook.reactivated',
  'webhook.secret_rotated',
  'delivery.resent',
  'deliveries.recovered',
  'session.started',
] as const;
export type ActivityAction = (typeof ACTIVITY_ACTIONS)[number];

/** One entry of the append-only activity log (migration 20261127120000); never a token or a secret. */
export interface ActividadTable {
  /** bigint identity, as text: the page cursor. */
  id: Generated<string>;
  empresa_id: string;
  /** Who: "operador" (internal routes), the portal link's `usuario`, or "api". 1-200 characters. */
  usuario: string;
  accion: ActivityAction;
  /** The branch the action was about (its tokens, its webhook), if any. */
  sucursal_id: string | null;
  webhook_id: string | null;
  /** The action's parameters (a company's fields, a count, a shipment's event): JSON text on insert. */
  detalle: Json<Record<string, unknown>> | null;
  created_at: Timestamp;
}

/** A setting of the whole stack that every process must share (`ajustes_pila`): `QUEUE_SHARDS`. */
export interface AjustesPilaTable {
  clave: string;
  valor: number;
  cambiado_en: Timestamp;
}

export interface Database {
  empresas: EmpresasTable;
  sucursales: SucursalesTable;
  tokens: TokensTable;
  guias: GuiasTable;
  guia_historial: GuiaHistorialTable;
  outbox: OutboxTable;
  webhooks: WebhooksTable;
  webhook_versions: WebhookVersionsTable;
  entregas: EntregasTable;
  entrega_intentos: EntregaIntentosTable;
  idempotencia: IdempotenciaTable;
  portal_enlaces: PortalEnlacesTable;
  portal_sesiones: PortalSesionesTable;
  actividad: ActividadTable;
  ajustes_pila: AjustesPilaTable;
}

export type Empresa = Selectable<EmpresasTable>;
export type NewEmpresa = Insertable<EmpresasTable>;
export type EmpresaUpdate = Updateable<EmpresasTable>;
export type Sucursal = Selectable<SucursalesTable>;
export type Guia = Selectable<GuiasTable>;
export type Webhook = Selectable<WebhooksTable>;
export type Entrega = Selectable<EntregasTable>;
export type EntregaIntento = Selectable<EntregaIntentosTable>;
export type OutboxRow = Selectable<OutboxTable>;
