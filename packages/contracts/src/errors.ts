/**
 * The closed catalog of error codes: those of the integrators' contract plus those the platform
 * adds (malformed bodies, unknown routes, the portal's refusals). A code is the contract; the
 * HTTP status travels with it.
 */
export const ERROR_STATUS = {
  INVALID_JSON: 400,
  VALIDATION_ERROR: 400,
  INVALID_URL: 400,
  LIMIT_EXCEEDED: 400,
  AUTH_REQUIRED: 401,
  PAYMENT_REQUIRED: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  ALREADY_INACTIVE: 409,
  WEBHOOK_INACTIVE: 409,
  DELIVERY_PENDING: 409,
  INVALID_TRANSITION: 409,
  IDEMPOTENCY_CONFLICT: 409,
  EMPRESA_NO_VERIFICADA: 409,
  SUCURSALES_DESHABILITADAS: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMIT_EXCEEDED: 429,
  DAILY_GUIDE_LIMIT: 429,
  RESEND_LIMIT_EXCEEDED: 429,
  LISTEN_LIMIT_EXCEEDED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The only error type the services throw on purpose; the error middleware writes its envelope. */
export class AppError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.headers = headers;
  }
}

export interface ErrorEnvelope {
  success: false;
  error: { message: string; code: ErrorCode };
}

export interface SuccessEnvelope<T> {
  success: true;
  data: T;
}

export function errorEnvelope(code: ErrorCode, message: string): ErrorEnvelope {
  return { success: false, error: { message, code } };
}
