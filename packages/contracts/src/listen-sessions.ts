/**
 * Listening sessions (`svc listen`, docs/integrators.md "Your first event in a minute"): what the
 * dispatcher that makes an attempt, the gateway that holds the session's stream and the gateway
 * that takes the tool's answer agree on. They meet through Redis pub/sub only, so any number of
 * each may run.
 */

/** Open sessions a company may hold at once, every branch's included. */
export const MAX_LISTEN_SESSIONS = 5;

/** The contract's answer deadline, which the tool applies to the local POST. */
export const LISTEN_ANSWER_TIMEOUT_MS = 5000;

/**
 * How long a dispatcher waits for the tool's answer beyond the local deadline: the relay's hops
 * (Redis, the stream, the answer's own request) and a slow laptop. Past it the attempt is a
 * timeout, and its retry comes as any other's.
 */
export const LISTEN_RELAY_MARGIN_MS = 2000;

/**
 * How long a session outlives the last sign of its stream: the gateway holding the stream renews
 * its lease every LISTEN_LEASE_RENEW_MS; a session whose lease lapsed (its gateway died, or no
 * stream was ever opened) is closed by the sweep of any gateway. Long enough for the tool to
 * reconnect to another gateway after a crash, short enough that a dead session stops taking
 * attempts soon.
 */
export const LISTEN_LEASE_MS = 30_000;
export const LISTEN_LEASE_RENEW_MS = 10_000;

/** One attempt handed to the session's stream: exactly the request a receiver would get. */
export interface ListenForward {
  /** Names this attempt in the tool's answer. */
  intento: string;
  evento: string;
  /** The exact body, as signed. */
  body: string;
  headers: Record<string, string>;
}

/** A forwarded attempt's answer, as a gateway passes it to the dispatcher that waits for it. */
export interface ListenAnswer {
  intento: string;
  /** The session the answer was given for: a dispatcher takes it only for an attempt of that session. */
  escuchaId: string;
  statusCode: number;
  duracionMs: number;
  respuesta: string | null;
  error: 'TIMEOUT' | 'CONNECTION' | null;
  mensaje: string | null;
}

/**
 * The attempt's id carries the channel of the dispatcher waiting for it (`<instance>.<uuid>`), so
 * whichever gateway takes the answer knows where to publish it.
 */
export function listenAttemptId(instance: string, uuid: string): string {
  return `${instance}.${uuid}`;
}

/** The dispatcher instance an attempt id names; undefined for an id of another form. */
export function listenInstanceOf(intento: string): string | undefined {
  const dot = intento.indexOf('.');
  return dot > 0 ? intento.slice(0, dot) : undefined;
}

/** Channels and keys, all under the Redis prefix. */
export const listenKeys = {
  /** Where a session's attempts are published; the gateway holding its stream listens. */
  forwards: (prefix: string, sessionId: string): string => `${prefix}:escucha:${sessionId}:envios`,
  /** Where a dispatcher instance hears the answers to its attempts. */
  answers: (prefix: string, instance: string): string => `${prefix}:escucha:respuestas:${instance}`,
  /** Present while a gateway holds the session's stream (or briefly after its creation). */
  lease: (prefix: string, sessionId: string): string => `${prefix}:escucha:${sessionId}:lease`,
  /** A counter of the streams opened for the session: the newest holds it, an older one's close does not end it. */
  holder: (prefix: string, sessionId: string): string => `${prefix}:escucha:${sessionId}:holder`,
  /**
   * Present while a dispatcher waits for the answer to one attempt of the session: the answer that
   * takes it (`POST .../respuestas/{intento}`) is not counted in the token's rate limit.
   */
  waiting: (prefix: string, sessionId: string, intento: string): string => `${prefix}:escucha:${sessionId}:espera:${intento}`,
};

/** How long a dispatcher waits for an attempt's answer in all: the local deadline and the relay's margin. */
export const LISTEN_WAIT_MS = LISTEN_ANSWER_TIMEOUT_MS + LISTEN_RELAY_MARGIN_MS;
