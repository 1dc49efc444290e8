/**
 * The API as the tool calls it: bearer token, JSON envelopes, and a one-line reason for every way
 * a call can fail (no API there, a wrong token, a refusal), so each command prints it and exits.
 */

/** A failure the tool reports in one line and exits non-zero with. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly status = 0,
    readonly code: string | undefined = undefined,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export interface ApiOptions {
  api: string;
  token: string;
}

interface Envelope {
  success?: boolean;
  data?: unknown;
  error?: { message?: string; code?: string };
}

/** Why a fetch to the API threw: the reason of its cause (ECONNREFUSED, ENOTFOUND), else its message. */
export function networkReason(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err as Error).message;
}

/** A refusal of the API as a line: its message and code, with a hint for the token's failures. */
export function refusalLine(status: number, code: string | undefined, message: string): string {
  const base = `the API refused (${status}${code ? ` ${code}` : ''}): ${message}`;
  if (status === 401) return `${base}. Check --token or SVC_TOKEN: it must be one of your company's tokens.`;
  return base;
}

export async function call<T>(o: ApiOptions, method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  let res: Response;
  try {
    res = await fetch(new URL(path, o.api), {
      method,
      headers: { authorization: `Bearer ${o.token}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
      signal: signal ?? AbortSignal.timeout(15_000),
    });
  } catch (err) {
    throw new CliError(`cannot reach the API at ${o.api} (${networkReason(err)}): is the platform running there? Check --api or SVC_API.`);
  }
  return envelopeOf<T>(o, res, method, path);
}

/** The data of an answer, or the CliError its refusal is. */
export async function envelopeOf<T>(o: ApiOptions, res: Response, method: string, path: string): Promise<T> {
  const text = await res.text();
  let parsed: Envelope | undefined;
  try {
    parsed = JSON.parse(text) as Envelope;
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || typeof parsed.success !== 'boolean') {
    throw new CliError(`${o.api} does not answer as the SVC API (${method} ${path}: HTTP ${res.status}, ${res.headers.get('content-type') ?? 'no content type'}). Check --api or SVC_API.`, res.status);
  }
  if (!parsed.success) {
    const code = parsed.error?.code;
    throw new CliError(refusalLine(res.status, code, parsed.error?.message ?? 'no message'), res.status, code);
  }
  return parsed.data as T;
}
