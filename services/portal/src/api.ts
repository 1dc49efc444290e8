// The portal's API client: same origin, the session's cookie, the anti-CSRF token on every change.

// The contracts' pure modules (no imports), by path: Vite bundles them without the package's node side.
import type { ErrorCode } from '../../../packages/contracts/src/errors';
import type { EntregaDetalle as Entrega } from '../../../packages/contracts/src/wire-shapes';
import { formatDateTime } from './format';
export type { Actividad, Attempt, EntregaDetalle as Entrega, WebhookHealth, WebhookHealthDetail } from '../../../packages/contracts/src/wire-shapes';
import type { WebhookHealth } from '../../../packages/contracts/src/wire-shapes';
/** The shipment events a webhook may subscribe to. */
export { SHIPMENT_EVENTS as EVENTOS } from '../../../packages/contracts/src/events';
/** The endpoint-health notices: a webhook receives them only when its `eventos` lists them by name. */
export { NOTICE_EVENTS, isNoticeEvent, type NoticeEvent } from '../../../packages/contracts/src/events';

/** A refusal of the API: its code (the contract), and how long it asks to wait (`Retry-After`), if it does. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The API could not be reached, or answered something that is not its envelope, or a 5xx (`code`). */
export class NetworkError extends Error {
  constructor(
    message = 'No se pudo conectar con el portal.',
    readonly code?: string,
  ) {
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
  if (res.status >= 500) throw new NetworkError(message, code);
  const retryAfter = Number(res.headers.get('Retry-After') ?? '');
  throw new ApiError(res.status, code, message, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined);
}

/** How long to wait, in words, from a `Retry-After` in seconds. */
function waitFor(seconds: number | undefined, otherwise: string): string {
  if (seconds === undefined) return otherwise;
  if (seconds < 90) return `Espere ${Math.ceil(seconds)} segundos y vuelva a intentarlo.`;
  if (seconds < 3600) return `Espere ${Math.ceil(seconds / 60)} minutos y vuelva a intentarlo.`;
  return `Vuelva a intentarlo después del ${formatDateTime(new Date(Date.now() + seconds * 1000).toISOString())}.`;
}

/** A request of the portal's own that the API could not read (its body or its type). */
const UNREADABLE: [string, string] = ['El servidor no entendió la petición del portal', 'Vuelva a cargar la página e intente de nuevo; si se repite, avise al courier.'];

/**
 * What the page says for each code of the API's closed catalog: what happened (the code follows it)
 * and what to do. The API's own message is English, for integrators: the page never shows it.
 */
const SAYS: Record<ErrorCode, (e: { retryAfterSeconds?: number }) => [string, string]> = {
  INVALID_JSON: () => UNREADABLE,
  VALIDATION_ERROR: () => ['Revise los datos', 'Algún campo no tiene un valor válido: corríjalo y vuelva a enviar.'],
  INVALID_URL: () => ['La URL no está permitida', 'Use una dirección https:// pública, sin usuario ni contraseña, que no apunte a localhost ni a una red privada.'],
  LIMIT_EXCEEDED: () => ['Se alcanzó el límite de webhooks activos', 'Desactive un webhook de este modo que ya no use y vuelva a intentarlo.'],
  AUTH_REQUIRED: () => ['La sesión terminó', 'Vuelva al sitio del courier y abra el portal con un enlace nuevo.'],
  PAYMENT_REQUIRED: () => ['No hay créditos disponibles', 'Pida al courier que agregue créditos o active su plan.'],
  FORBIDDEN: () => ['Acción no permitida', 'Vuelva a cargar la página e intente de nuevo; si se repite, abra el portal desde el sitio del courier.'],
  NOT_FOUND: () => ['No se encontró', 'Puede que ya no exista o que sea del otro modo: vuelva a la lista y elíjalo de nuevo.'],
  METHOD_NOT_ALLOWED: () => ['El servidor no acepta esa petición del portal', 'Vuelva a cargar la página; si se repite, avise al courier.'],
  ALREADY_INACTIVE: () => ['El webhook ya estaba desactivado', 'Vuelva a cargar la página para ver su estado actual.'],
  WEBHOOK_INACTIVE: () => ['El webhook está desactivado', 'Reactívelo para enviarle un PING o reenviarle entregas.'],
  DELIVERY_PENDING: () => ['La entrega aún tiene intentos pendientes', 'Espere a que termine, exitosa o fallida, y reenvíela después.'],
  INVALID_TRANSITION: () => ['Ese evento no se permite en el estado actual de la guía', 'Vuelva a cargar la página y use uno de los eventos que ofrece.'],
  IDEMPOTENCY_CONFLICT: () => ['Otra petición igual sigue en curso', 'Espere un momento y vuelva a intentarlo.'],
  EMPRESA_NO_VERIFICADA: () => ['La empresa aún no está verificada', 'Pida al courier que la verifique; después podrá generar tokens.'],
  SUCURSALES_DESHABILITADAS: () => ['Las sucursales no están habilitadas', 'Pida al courier que las habilite para su empresa.'],
  PAYLOAD_TOO_LARGE: () => ['Los datos enviados son demasiado grandes', 'Acorte los textos, por ejemplo la descripción, y vuelva a intentarlo.'],
  UNSUPPORTED_MEDIA_TYPE: () => UNREADABLE,
  RATE_LIMIT_EXCEEDED: (e) => ['Demasiadas peticiones en poco tiempo', waitFor(e.retryAfterSeconds, 'Espere un minuto y vuelva a intentarlo.')],
  DAILY_GUIDE_LIMIT: (e) => ['Se alcanzó el límite diario de guías', waitFor(e.retryAfterSeconds, 'El límite se reinicia a medianoche, hora de Guatemala.')],
  RESEND_LIMIT_EXCEEDED: (e) => ['Este evento ya se reenvió a este webhook el máximo de veces de una hora', waitFor(e.retryAfterSeconds, 'Espere una hora y vuelva a intentarlo.')],
  LISTEN_LIMIT_EXCEEDED: () => ['La empresa ya tiene 5 sesiones de escucha abiertas', 'Termine una (Ctrl-C en su svc listen) y vuelva a intentarlo.'],
  INTERNAL_ERROR: () => ['El portal tuvo un error', 'Intente de nuevo en unos segundos; si se repite, avise al courier.'],
  SERVICE_UNAVAILABLE: () => ['El portal no está disponible ahora', 'Intente de nuevo en unos segundos.'],
};

const isKnown = (code: string): code is ErrorCode => Object.hasOwn(SAYS, code);

/** "<what happened> (<CODE>). <what to do>", in Spanish, for any refusal or failure. */
export function describeError(err: unknown): string {
  const code = err instanceof ApiError || err instanceof NetworkError ? err.code : undefined;
  if (code !== undefined) {
    const retryAfterSeconds = err instanceof ApiError ? err.retryAfterSeconds : undefined;
    const [what, todo] = isKnown(code) ? SAYS[code]({ retryAfterSeconds }) : ['La acción no se completó', 'Intente de nuevo; si se repite, avise al courier.'];
    return `${what} (${code}). ${todo}`;
  }
  if (err instanceof NetworkError) return `${err.message} Revise su conexión e intente de nuevo.`;
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
  /** The company's failing webhooks and those the platform deactivated (both modes). */
  webhooksConProblemas: Array<{ id: string; url: string; descripcion: string | null; modo: Modo; sucursalId: string | null; salud: WebhookHealth }>;
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
  salud: WebhookHealth;
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

/** An open `svc listen` session with its latest deliveries (GET /sandbox/escuchas). */
export interface SesionEscucha {
  id: string;
  eventos: string[];
  destino: string | null;
  createdAt: string;
  entregas: Array<{
    id: string;
    evento: string;
    numeroGuia: string | null;
    estado: 'pendiente' | 'exitosa' | 'fallida';
    statusCode: number;
    intentos: number;
    fecha: string;
  }>;
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

