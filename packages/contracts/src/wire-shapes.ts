// Response shapes the API and the portal's API show, written once for the portal (a browser bundle that
// imports this file by path, so it stays free of imports) and the tests that read the same answers.

/**
 * Active webhooks a company may have in each mode, its branches' included: the contract's limit
 * (the next one is refused with LIMIT_EXCEEDED), which the portal shows before the API refuses.
 */
export const MAX_ACTIVE_WEBHOOKS = 10;

/** One attempt in a delivery's `intentosDetalle` (docs/integrators.md, The delivery log). */
export interface Attempt {
  numero: number;
  fecha: string;
  statusCode: number;
  duracionMs: number;
  error: string | null;
  mensaje: string | null;
  respuesta: string | null;
}

/** A delivery as the delivery log shows it (docs/integrators.md, The delivery log). */
export interface EntregaDetalle {
  id: string;
  evento: string;
  exitoso: boolean;
  statusCode: number;
  intentos: number;
  ultimoIntentoEn: string | null;
  createdAt: string;
  estado: 'pendiente' | 'exitosa' | 'fallida';
  eventoId: string;
  numeroGuia: string | null;
  reenvioDe: string | null;
  intentosDetalle: Attempt[];
}

/** One entry of the company's activity log (`GET /portal/v1/actividad`), newest first. */
export interface Actividad {
  id: string;
  accion: string;
  /** The portal link's `usuario`, `operador` (the courier's internal routes) or `api` (an API token). */
  usuario: string;
  sucursalId: string | null;
  webhookId: string | null;
  detalle: Record<string, unknown> | null;
  createdAt: string;
}

/** A webhook's health (`GET /webhooks/{id}/salud`, extensions.md Endpoint health); the portal's lists carry it too. */
export interface WebhookHealth {
  estado: 'saludable' | 'degradado' | 'fallando' | 'desactivado';
  desde: string | null;
  ultimoExito: string | null;
  fallasConsecutivas: number;
  desactivacion: { fecha: string; por: 'sistema' | 'empresa' | 'operador'; motivo: 'FALLAS_CONTINUAS' | 'GONE' | null } | null;
}

/** `GET /webhooks/{id}/salud`: the health and the last 24 hours' deliveries by state. */
export interface WebhookHealthDetail extends WebhookHealth {
  ultimas24h: { exitosas: number; fallidas: number; pendientes: number };
}
