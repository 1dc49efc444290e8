// The portal's API client: same origin, the session's cookie, the anti-CSRF token on every change.

// The contracts' pure modules (no imports), by path: Vite bundles them without the package's node side.
import type { EntregaDetalle as Entrega } from '../../../packages/contracts/src/wire-shapes';
export type { Actividad, Attempt, EntregaDetalle as Entrega } from '../../../packages/contracts/src/wire-shapes';
/** The shipment events a webhook may subscribe to (courier-api.md). */
export { SHIPMENT_EVENTS as EVENTOS } from '../../../packages/contracts/src/events';

/** A refusal of the API: its code (the contract) and its message (shown to the person as is). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The API could not be reached, or answered something that is not its envelope. */
export class NetworkError extends Error {
  constructor(message = 'No se pudo conectar con el portal.') {
    super(message);
    this.name = 'NetworkError';
  }
}

let csrfToken: string | undefined;
let sessionEnded: () => void = () => undefined;

export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

/** Called when the API says the session is over (401): the app shows **Enlace no válido**. */
export function onSessionEnded(handler: () => void): void {
  sessionEnded = handler;
}

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export async function api<T>(method: Method, path: string, body?: unknown, opts: { quietAuth?: boolean } = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(`/portal/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new NetworkError();
  }
  let envelope: { success?: boolean; data?: unknown; error?: { code?: string; message?: string } };
  try {
    envelope = (await res.json()) as typeof envelope;
  } catch {
    throw new NetworkError(`El portal respondió de forma inesperada (HTTP ${res.status}).`);
  }
  if (res.ok && envelope.success === true) return envelope.data as T;
  const code = envelope.error?.code ?? 'INTERNAL_ERROR';
  const message = envelope.error?.message ?? `HTTP ${res.status}`;
  if (res.status === 401 && !opts.quietAuth) sessionEnded();
  if (res.status >= 500) throw new NetworkError(`El portal no está disponible ahora (${code}): ${message}`);
  throw new ApiError(res.status, code, message);
}

/** A short Spanish lead for each code; the API's own message follows it. */
const LEADS: Record<string, string> = {
  VALIDATION_ERROR: 'Revise los datos',
  INVALID_URL: 'La URL no está permitida',
  LIMIT_EXCEEDED: 'Se alcanzó el límite de webhooks activos',
  AUTH_REQUIRED: 'La sesión terminó',
  FORBIDDEN: 'Acción no permitida',
  NOT_FOUND: 'No se encontró',
  ALREADY_INACTIVE: 'El webhook ya estaba desactivado',
  WEBHOOK_INACTIVE: 'El webhook está desactivado',
  DELIVERY_PENDING: 'La entrega aún tiene intentos pendientes',
  INVALID_TRANSITION: 'Ese evento no se permite en el estado actual de la guía',
  EMPRESA_NO_VERIFICADA: 'La empresa aún no está verificada',
  SUCURSALES_DESHABILITADAS: 'Las sucursales no están habilitadas',
  RATE_LIMIT_EXCEEDED: 'Demasiadas peticiones; espere un momento',
  DAILY_GUIDE_LIMIT: 'Se alcanzó el límite diario de guías',
  RESEND_LIMIT_EXCEEDED: 'Este evento ya se reenvió 10 veces a este webhook en la última hora',
  PAYMENT_REQUIRED: 'No hay créditos disponibles',
};

export function describeError(err: unknown): string {
  if (err instanceof ApiError) return `${LEADS[err.code] ?? 'La acción no se completó'} (${err.code}): ${err.message}`;
  if (err instanceof NetworkError) return `${err.message} Intente de nuevo.`;
  return 'Ocurrió un error inesperado. Intente de nuevo.';
}

// ---- what the API answers -------------------------------------------------------------------------

export type Modo = 'live' | 'test';

export interface Session {
  usuario: string;
  expiraEn: string;
  inactividadSegundos: number;
  csrfToken: string;
  empresa: { id: string; nombre: string; verificada: boolean; sucursalesHabilitadas: boolean };
}

export interface DeliveryHour {
  hora: string;
  exitosas: number;
  fallidas: number;
}

export interface Resumen {
  empresa: {
    id: string;
    nombre: string;
    verificada: boolean;
    sucursalesHabilitadas: boolean;
    limiteDiario: number;
    planActivo: boolean;
    creditos: number;
    planPersonalizado: 'PENDIENTE' | 'APROBADA' | 'RECHAZADA' | null;
    guiasHoy: number;
  };
  reiniciaEn: string;
  webhooksActivos: Record<Modo, number>;
  entregas: { porHora: Record<Modo, DeliveryHour[]>; pendientes: Record<Modo, number> };
}

export interface TokenPair {
  live: string;
  test: string;
}

export interface LastDelivery {
  exitoso: boolean;
  statusCode: number;
  fecha: string;
}

export interface WebhookRow extends WebhookDetail {
  sucursalId: string | null;
  ultimoDelivery: LastDelivery | null;
}

export interface WebhookCreated {
  id: string;
  url: string;
  secret: string;
  eventos: string[];
  descripcion: string | null;
  createdAt: string;
  nota: string;
}

export interface WebhookDetail {
  id: string;
  url: string;
  eventos: string[];
  descripcion: string | null;
  activo: boolean;
  createdAt: string;
}

export interface EntregasPage {
  entregas: Entrega[];
  nextCursor: string | null;
}

export interface Sucursal {
  id: string;
  nombre: string;
  tokensGeneradosEn: string | null;
  webhooks: WebhookRow[];
}

export interface Guia {
  numeroGuia: string;
  estado: string;
  createdAt: string;
  referencia: string | null;
}

export interface GuiaSandbox {
  numeroGuia: string;
  estado: string;
  historial: Array<{ estado: string; evento: string; fecha: string; motivo?: string }>;
  eventosPermitidos: string[];
  entregas: Array<{
    id: string;
    evento: string;
    estado: 'pendiente' | 'exitosa' | 'fallida';
    exitoso: boolean;
    statusCode: number;
    intentos: number;
    createdAt: string;
    webhookId: string;
    url: string;
  }>;
}

