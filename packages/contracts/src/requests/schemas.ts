import { SHIPMENT_EVENTS, SUBSCRIBABLE_EVENTS, type LoggedEvent, type ShipmentEvent } from '../events';
import type { PlanPersonalizado } from '../db/types';
import { compile } from './validator';

const text = (max: number) => ({ type: 'string', minLength: 1, maxLength: max }) as const;

// ---- internal: the portal's actions -------------------------------------------------------------

export interface EmpresaFields {
  nombre: string;
  verificada?: boolean;
  sucursalesHabilitadas?: boolean;
  limiteDiario?: number;
  planActivo?: boolean;
  creditos?: number;
  planPersonalizado?: PlanPersonalizado | null;
}

/** The largest credit balance: the column is a Postgres integer (at most 2^31 - 1). */
export const MAX_CREDITOS = 2_000_000_000;

const empresaProperties = {
  nombre: text(200),
  verificada: { type: 'boolean' },
  sucursalesHabilitadas: { type: 'boolean' },
  limiteDiario: { type: 'integer', minimum: 0, maximum: 1_000_000 },
  planActivo: { type: 'boolean' },
  creditos: { type: 'integer', minimum: 0, maximum: MAX_CREDITOS },
  planPersonalizado: { type: ['string', 'null'], enum: ['PENDIENTE', 'APROBADA', 'RECHAZADA', null] },
};

export const validateEmpresaCreate = compile<EmpresaFields>({
  type: 'object',
  properties: empresaProperties,
  required: ['nombre'],
  additionalProperties: false,
});

export const validateEmpresaPatch = compile<Partial<EmpresaFields>>({
  type: 'object',
  properties: empresaProperties,
  minProperties: 1,
  additionalProperties: false,
});

export const validateCreditos = compile<{ cantidad: number }>({
  type: 'object',
  properties: { cantidad: { type: 'integer', minimum: 1, maximum: 1_000_000_000 } },
  required: ['cantidad'],
  additionalProperties: false,
});

export const validateSucursalCreate = compile<{ nombre: string }>({
  type: 'object',
  properties: { nombre: text(200) },
  required: ['nombre'],
  additionalProperties: false,
});

// ---- webhooks -----------------------------------------------------------------------------------

export interface WebhookCreate {
  url: string;
  /** Shipment events and notices by name; empty or absent: every shipment event (never a notice). */
  eventos?: LoggedEvent[];
  descripcion?: string | null;
}

/** PATCH takes the creation's fields and `activo` (docs/integrators.md, Reactivation). */
export type WebhookPatch = Partial<WebhookCreate> & { activo?: boolean };

const webhookProperties = {
  url: { type: 'string', minLength: 1, maxLength: 2048 },
  eventos: { type: 'array', items: { type: 'string', enum: [...SUBSCRIBABLE_EVENTS] }, maxItems: 50, uniqueItems: true },
  descripcion: { type: ['string', 'null'], maxLength: 200 },
};

export const validateWebhookCreate = compile<WebhookCreate>({
  type: 'object',
  properties: webhookProperties,
  required: ['url'],
  additionalProperties: false,
});

export const validateWebhookPatch = compile<WebhookPatch>({
  type: 'object',
  properties: { ...webhookProperties, activo: { type: 'boolean' } },
  minProperties: 1,
  additionalProperties: false,
});

/** The longest overlap of a rotated secret, in hours. */
export const MAX_OVERLAP_HOURS = 72;
export const DEFAULT_OVERLAP_HOURS = 24;

export interface SecretRotation {
  solaparHoras?: number;
}

export const validateSecretRotation = compile<SecretRotation>({
  type: 'object',
  properties: { solaparHoras: { type: 'integer', minimum: 0, maximum: MAX_OVERLAP_HOURS } },
  additionalProperties: false,
});

/** The window of a recovery, as written (ISO 8601); the service reads and bounds it. */
export interface RecoveryRequest {
  desde: string;
  hasta?: string;
  /** Also the events the webhook missed while it was inactive (extensions.md, Endpoint health). */
  omitidas?: boolean;
}

export const validateRecoveryRequest = compile<RecoveryRequest>({
  type: 'object',
  properties: { desde: { type: 'string', minLength: 1, maxLength: 64 }, hasta: { type: 'string', minLength: 1, maxLength: 64 }, omitidas: { type: 'boolean' } },
  required: ['desde'],
  additionalProperties: false,
});

// ---- listening sessions (svc listen) -----------------------------------------------------------

/**
 * `POST /api/v1/escuchas`: the events to forward (all when absent or empty), and where the tool
 * forwards them (`destino`: shown in the portal only; the platform never sends there).
 */
export interface ListenSessionCreate {
  eventos?: ShipmentEvent[];
  destino?: string;
}

export const validateListenSessionCreate = compile<ListenSessionCreate>({
  type: 'object',
  // Shipment events only: notices go to the company's webhooks, never to a session (docs/integrators.md).
  properties: { eventos: { ...webhookProperties.eventos, items: { type: 'string', enum: [...SHIPMENT_EVENTS] } }, destino: webhookProperties.url },
  additionalProperties: false,
});

/** `POST /api/v1/escuchas/{id}/respuestas`: what the local receiver answered to one forwarded attempt. */
export interface ListenAnswerRequest {
  intento: string;
  /** 0 when no HTTP answer came (refused, timed out). */
  statusCode: number;
  duracionMs: number;
  /** The start of the answer's body. */
  respuesta?: string | null;
  /** Why no answer came (`TIMEOUT`, `CONNECTION`), with `mensaje`. */
  error?: 'TIMEOUT' | 'CONNECTION' | null;
  mensaje?: string | null;
}

export const validateListenAnswer = compile<ListenAnswerRequest>({
  type: 'object',
  properties: {
    intento: { type: 'string', minLength: 1, maxLength: 200 },
    statusCode: { type: 'integer', minimum: 0, maximum: 999 },
    duracionMs: { type: 'number', minimum: 0, maximum: 3_600_000 },
    respuesta: { type: ['string', 'null'], maxLength: 1024 },
    error: { type: ['string', 'null'], enum: ['TIMEOUT', 'CONNECTION', null] },
    mensaje: { type: ['string', 'null'], maxLength: 500 },
  },
  required: ['intento', 'statusCode', 'duracionMs'],
  additionalProperties: false,
});

// ---- shipments ----------------------------------------------------------------------------------

export interface GuiaCreate {
  destinatario: { nombre: string; telefono: string; direccion: string; ciudad?: string; email?: string };
  paquete: { peso: number; largo?: number; ancho?: number; alto?: number; descripcion?: string };
  referencia?: string;
  observaciones?: string;
}

const positive = { type: 'number', exclusiveMinimum: 0, maximum: 100_000 } as const;

export const guiaSchema = {
  type: 'object',
  properties: {
    destinatario: {
      type: 'object',
      properties: {
        nombre: text(200),
        telefono: text(50),
        direccion: text(500),
        ciudad: text(200),
        email: { type: 'string', format: 'email', maxLength: 320 },
      },
      required: ['nombre', 'telefono', 'direccion'],
      additionalProperties: false,
    },
    paquete: {
      type: 'object',
      properties: { peso: positive, largo: positive, ancho: positive, alto: positive, descripcion: text(500) },
      required: ['peso'],
      additionalProperties: false,
    },
    referencia: text(100),
    observaciones: text(1000),
  },
  required: ['destinatario', 'paquete'],
  additionalProperties: false,
} as const;

export const MAX_BATCH = 100;

export const validateGuiaCreate = compile<GuiaCreate>(guiaSchema);

export const validateGuiaBatch = compile<{ guias: GuiaCreate[] }>({
  type: 'object',
  properties: { guias: { type: 'array', minItems: 1, maxItems: MAX_BATCH, items: guiaSchema } },
  required: ['guias'],
  additionalProperties: false,
});

export interface GuiaEventoRequest {
  evento: Exclude<ShipmentEvent, 'GUIA_CREADA'>;
  motivo?: string;
  fechaEntrega?: string;
}

export const validateGuiaEvento = compile<GuiaEventoRequest>({
  type: 'object',
  properties: {
    evento: { type: 'string', enum: SHIPMENT_EVENTS.filter((e) => e !== 'GUIA_CREADA') },
    motivo: text(500),
    fechaEntrega: { type: 'string', format: 'date-time' },
  },
  required: ['evento'],
  additionalProperties: false,
  // `required` too: without it an absent evento passes the `if` and is reported as a missing motivo.
  if: { properties: { evento: { const: 'GUIA_DEVOLUCION' } }, required: ['evento'] },
  then: { required: ['motivo'] },
});

// ---- the customer portal (docs/portal.md) --------------------------------------------------------

/** `POST /internal/v1/empresas/{id}/portal`: who the link is for (an e-mail or a name). */
export const validatePortalLinkRequest = compile<{ usuario: string }>({
  type: 'object',
  properties: { usuario: text(200) },
  required: ['usuario'],
  additionalProperties: false,
});

/** `POST /portal/v1/sesion`: the secret of the link's fragment, traded for a session. */
export const validatePortalSessionRequest = compile<{ enlace: string }>({
  type: 'object',
  properties: { enlace: text(200) },
  required: ['enlace'],
  additionalProperties: false,
});
