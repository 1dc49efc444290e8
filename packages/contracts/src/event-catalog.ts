// The event catalog (docs/integrators.md, "The event catalog"): for every event a receiver can get, a
// sentence, the JSON Schema of the whole body and an example. The one source of the payloads:
// `GET /api/v1/eventos` serves it, `node openapi/build.mjs` writes the OpenAPI document's `webhooks`
// section and event schemas from it, and the receiver kit's types are generated from that document
// (decision 0012). The suites validate every delivery their receivers get against it.
import { ESTADOS, SHIPMENT_EVENTS, type Estado, type ShipmentEvent } from './events';
import type { JsonSchema } from './requests/validator';

/** The two endpoint-health notices (docs/integrators.md, "Endpoint health"). */
const NOTICES = ['WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO'] as const;
type Notice = (typeof NOTICES)[number];

/** Every event name the catalog describes, in its order: the shipment events, PING, the notices. */
export const CATALOG_EVENTS = [...SHIPMENT_EVENTS, 'PING', ...NOTICES] as const;
export type CatalogEvent = (typeof CATALOG_EVENTS)[number];

/** The JSON Schema dialect of every schema of the catalog (and of the OpenAPI document). */
export const CATALOG_SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** One item of `GET /api/v1/eventos`. */
export interface EventoCatalogo {
  evento: CatalogEvent;
  descripcion: string;
  schema: JsonSchema;
  ejemplo: EventBody;
}

/** A delivery's body, as the catalog's example holds it. */
export interface EventBody {
  event: CatalogEvent;
  timestamp: string;
  webhookId: string;
  data: Readonly<Record<string, unknown>>;
}

const EXAMPLE_TIMESTAMP = '2026-11-23T18:04:05.123Z';
const EXAMPLE_WEBHOOK_ID = '0b8f5c7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b';
const EXAMPLE_NUMERO_GUIA = 'SVC7K2M9Q4XJD';

/** Where each shipment event leaves its shipment (the status machine's targets); GUIA_ACTUALIZADA keeps the status it had. */
const ESTADO_OF: Record<ShipmentEvent, Estado | undefined> = {
  GUIA_CREADA: 'CREADA',
  GUIA_RECOLECTADA: 'RECOLECTADA',
  GUIA_EN_BODEGA: 'EN_BODEGA',
  GUIA_EN_RUTA: 'EN_RUTA',
  GUIA_ENTREGADA: 'ENTREGADO',
  GUIA_DEVOLUCION: 'DEVOLUCION',
  GUIA_ANULADA: 'ANULADA',
  GUIA_ACTUALIZADA: undefined,
  GUIA_INTENTO_FALLIDO: 'INTENTO_FALLIDO',
};

const DESCRIPCIONES: Record<CatalogEvent, string> = {
  GUIA_CREADA: 'Se creó la guía: el envío quedó registrado y espera su recolección.',
  GUIA_RECOLECTADA: 'El mensajero recolectó el paquete.',
  GUIA_EN_BODEGA: 'El paquete ingresó a la bodega del courier.',
  GUIA_EN_RUTA: 'El paquete fue asignado a un mensajero y va en camino al destinatario.',
  GUIA_ENTREGADA: 'El paquete fue entregado al destinatario; fechaEntrega dice cuándo.',
  GUIA_DEVOLUCION: 'El paquete está en devolución al remitente; motivo dice por qué.',
  GUIA_ANULADA: 'La guía fue anulada: el envío no se realizará.',
  GUIA_ACTUALIZADA: 'Los datos de la guía cambiaron; estado es el estado que tiene, que no cambia con este evento.',
  GUIA_INTENTO_FALLIDO: 'Un intento de entrega no tuvo éxito; el paquete volverá a ruta o a bodega.',
  PING: 'Prueba de conectividad, enviada solo por POST /api/v1/webhooks/{id}/test; data es un objeto vacío.',
  WEBHOOK_FALLANDO:
    'Un webhook de la empresa está fallando: todas sus entregas terminadas desde «desde» fallaron (a lo sumo un aviso cada 24 horas por webhook).',
  WEBHOOK_DESACTIVADO:
    'La plataforma desactivó un webhook de la empresa: por fallas continuas (FALLAS_CONTINUAS) o porque su receptor respondió 410 Gone (GONE).',
};

const shipmentData = (evento: ShipmentEvent): JsonSchema => {
  const estado = ESTADO_OF[evento];
  const properties: Record<string, JsonSchema> = {
    numeroGuia: { type: 'string', minLength: 1, description: 'The shipment.' },
    estado: estado === undefined ? { type: 'string', enum: [...ESTADOS], description: 'The status the shipment has.' } : { const: estado },
  };
  const required = ['numeroGuia', 'estado'];
  if (evento === 'GUIA_ENTREGADA') {
    properties.fechaEntrega = { type: 'string', format: 'date-time', description: 'When it was delivered.' };
    required.push('fechaEntrega');
  }
  if (evento === 'GUIA_DEVOLUCION') {
    properties.motivo = { type: 'string', minLength: 1, maxLength: 500, description: 'Why it is returned.' };
    required.push('motivo');
  }
  return { type: 'object', required, additionalProperties: false, properties };
};

const noticeData = (evento: Notice): JsonSchema => ({
  type: 'object',
  required: ['webhook', 'motivo', 'fallasConsecutivas', 'desde'],
  additionalProperties: false,
  properties: {
    webhook: {
      type: 'object',
      description: 'The webhook the notice is about.',
      required: ['id', 'url', 'descripcion'],
      additionalProperties: false,
      properties: {
        id: { type: 'string', format: 'uuid' },
        url: { type: 'string', format: 'uri' },
        descripcion: { type: ['string', 'null'], maxLength: 200 },
      },
    },
    motivo:
      evento === 'WEBHOOK_FALLANDO'
        ? { type: 'null', description: 'Always null: the webhook is still active.' }
        : { type: 'string', enum: ['FALLAS_CONTINUAS', 'GONE'], description: 'Why the platform deactivated it.' },
    fallasConsecutivas: { type: 'integer', minimum: 0, description: "Deliveries that ended failed since the webhook's last success (PINGs not counted)." },
    desde: { type: 'string', format: 'date-time', description: 'Since when every delivery that ended failed.' },
  },
});

const dataSchema = (evento: CatalogEvent): JsonSchema => {
  if (evento === 'PING') return { type: 'object', additionalProperties: false, maxProperties: 0, description: 'An empty object.' };
  if (evento === 'WEBHOOK_FALLANDO' || evento === 'WEBHOOK_DESACTIVADO') return noticeData(evento);
  return shipmentData(evento);
};

/** The JSON Schema of the body of `evento`'s deliveries, without `$schema` (the OpenAPI document states the dialect once). */
function bodySchema(evento: CatalogEvent): JsonSchema {
  return {
    title: evento,
    description: DESCRIPCIONES[evento],
    type: 'object',
    required: ['event', 'timestamp', 'webhookId', 'data'],
    additionalProperties: false,
    properties: {
      event: { const: evento },
      timestamp: { type: 'string', format: 'date-time', description: 'Time of this attempt.' },
      webhookId: { type: 'string', format: 'uuid', description: "The delivery's id (the same on every attempt)." },
      data: dataSchema(evento),
    },
  };
}

const exampleData = (evento: CatalogEvent): Record<string, unknown> => {
  switch (evento) {
    case 'PING':
      return {};
    case 'WEBHOOK_FALLANDO':
    case 'WEBHOOK_DESACTIVADO':
      return {
        webhook: { id: '3f0c1a52-8d4e-4b8a-9a61-2c7d9e0b5f14', url: 'https://erp.example.com/hooks/svc', descripcion: 'ERP central' },
        motivo: evento === 'WEBHOOK_FALLANDO' ? null : 'FALLAS_CONTINUAS',
        fallasConsecutivas: 12,
        desde: '2026-11-18T09:30:00.000Z',
      };
    case 'GUIA_ENTREGADA':
      return { numeroGuia: EXAMPLE_NUMERO_GUIA, estado: 'ENTREGADO', fechaEntrega: '2026-11-23T18:00:00.000Z' };
    case 'GUIA_DEVOLUCION':
      return { numeroGuia: EXAMPLE_NUMERO_GUIA, estado: 'DEVOLUCION', motivo: 'Dirección no encontrada' };
    default:
      return { numeroGuia: EXAMPLE_NUMERO_GUIA, estado: ESTADO_OF[evento] ?? 'EN_BODEGA' };
  }
};

/** The catalog, one item per event name, in CATALOG_EVENTS' order. Built once: it changes only with a deploy. */
export const EVENT_CATALOG: readonly EventoCatalogo[] = CATALOG_EVENTS.map((evento) => ({
  evento,
  descripcion: DESCRIPCIONES[evento],
  schema: bodySchema(evento),
  ejemplo: { event: evento, timestamp: EXAMPLE_TIMESTAMP, webhookId: EXAMPLE_WEBHOOK_ID, data: exampleData(evento) },
}));

/** A header of every delivery, as the OpenAPI document's `webhooks` entries list it. */
export interface DeliveryHeader {
  name: string;
  required: boolean;
  schema: JsonSchema;
  description: string;
}

/**
 * The headers of a delivery of `evento` (courier-api.md's and extensions.md's tables; `X-SVC-Event` is the
 * event's name). The order is the documents'.
 */
export function deliveryHeaders(evento?: CatalogEvent): DeliveryHeader[] {
  const sha256 = { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' };
  return [
    { name: 'X-SVC-Signature', required: true, schema: sha256, description: 'HMAC-SHA256 of the raw body keyed with the whole secret string, hex.' },
    { name: 'X-SVC-Signature-Anterior', required: false, schema: sha256, description: 'The same, keyed with the previous secret, during a rotation overlap.' },
    {
      name: 'X-SVC-Event',
      required: true,
      schema: evento === undefined ? { type: 'string', enum: [...CATALOG_EVENTS] } : { const: evento },
      description: "The body's `event`.",
    },
    { name: 'X-SVC-Timestamp', required: true, schema: { type: 'string', format: 'date-time' }, description: 'Time of this attempt.' },
    { name: 'X-Request-Id', required: true, schema: { type: 'string', format: 'uuid' }, description: 'The delivery id: the same on every attempt (drop duplicates by it).' },
    { name: 'User-Agent', required: true, schema: { const: 'SVC-Webhooks/1.0' }, description: 'Always this value.' },
    { name: 'webhook-id', required: true, schema: { type: 'string' }, description: "The delivery's eventoId: the same for every webhook, retry and resend." },
    { name: 'webhook-timestamp', required: true, schema: { type: 'string', pattern: '^[0-9]+$' }, description: 'Unix seconds of this attempt.' },
    {
      name: 'webhook-signature',
      required: true,
      schema: { type: 'string' },
      description: '`v1,<base64>` (Standard Webhooks); during a rotation overlap a second, space-separated, keyed with the previous secret.',
    },
    { name: 'X-SVC-Modo', required: true, schema: { type: 'string', enum: ['live', 'test'] }, description: "The event's mode: `test` for a sandbox shipment's events." },
    {
      name: 'X-SVC-Secuencia',
      required: false,
      schema: { type: 'string', pattern: '^[1-9][0-9]*$' },
      description: "The event's position in its shipment's history (1 = GUIA_CREADA); absent on PING and on the notices.",
    },
  ];
}
