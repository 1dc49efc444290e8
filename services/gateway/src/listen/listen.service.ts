import { randomUUID } from 'node:crypto';
import {
  AppError,
  isUuid,
  LISTEN_LEASE_MS,
  listenInstanceOf,
  listenKeys,
  MAX_LISTEN_SESSIONS,
  type ListenAnswer,
  type ListenAnswerRequest,
  type ListenSessionCreate,
  type Webhook,
} from '@svc/contracts';
import { abandonDeliveriesOf, closeListenSessions, insertListenSession, publishOn } from '@svc/platform';
import type { GatewayDeps } from '../deps';
import type { CompanyScope } from '../companies/company-scope';
import { lockCompany } from '../companies/company.repository';
import { latestDeliveriesOf } from '../deliveries/delivery.repository';
import { generateSecret } from '../webhooks/webhook.service';
import { countOpenSessions, findSession, listOpenSessions } from './listen.repository';

type Deps = Pick<GatewayDeps, 'db' | 'redis' | 'secrets' | 'logger' | 'config'>;

/** Deliveries shown per open session (the portal's Sandbox page, the list). */
export const SESSION_DELIVERIES = 10;

/** What `url` holds for a session opened without `destino`: a description, never sent to. */
const NO_DESTINATION = 'svc listen';

export const NOTA_SESSION =
  'Secreto de esta sesión de escucha: verifique con él la firma de cada entrega que svc listen reenvía. ' +
  'La sesión termina cuando se cierra su stream.';

/** Sessions are the sandbox's: a live token gets 403 before anything else is looked at. */
export function requireTestScope(scope: CompanyScope): void {
  if (scope.modo !== 'test') {
    throw new AppError('FORBIDDEN', 'listening sessions take a test token only: use your sandbox (test) token, never a live one');
  }
}

const streamPath = (id: string): string => `/api/v1/escuchas/${id}/stream`;

function presentSession(w: Webhook) {
  return {
    id: w.id,
    eventos: w.eventos,
    destino: w.url === NO_DESTINATION ? null : w.url,
    activo: w.activo,
    stream: streamPath(w.id),
    createdAt: w.created_at.toISOString(),
  };
}

/**
 * Opens a session in the caller's scope (a branch token's gets its branch's events, as its test
 * webhooks would). The company's lock orders concurrent openings, so at most MAX_LISTEN_SESSIONS
 * are ever open. Its lease starts now, so the sweep spares it until its stream opens.
 */
export async function openSession(deps: Deps, scope: CompanyScope, body: ListenSessionCreate) {
  requireTestScope(scope);
  const secret = generateSecret();
  const id = randomUUID();
  const session = await deps.db.transaction().execute(async (trx) => {
    if (!(await lockCompany(trx, scope.empresaId))) throw new AppError('NOT_FOUND', 'no such company');
    if ((await countOpenSessions(trx, scope.empresaId)) >= MAX_LISTEN_SESSIONS) {
      throw new AppError(
        'LISTEN_LIMIT_EXCEEDED',
        `the company already has ${MAX_LISTEN_SESSIONS} open listening sessions: end one (Ctrl-C in its svc listen) and try again; a session whose tool died ends within ${LISTEN_LEASE_MS / 1000} s`,
      );
    }
    const created = await insertListenSession(trx, {
      id,
      empresaId: scope.empresaId,
      sucursalId: scope.sucursalId,
      url: body.destino ?? NO_DESTINATION,
      sealedSecret: deps.secrets.seal(id, secret),
      eventos: body.eventos ?? [],
    });
    return created;
  });
  await deps.redis.set(listenKeys.lease(deps.config.redisPrefix, id), '0', 'PX', LISTEN_LEASE_MS);
  deps.logger.info({ escucha: id, empresaId: scope.empresaId, sucursalId: scope.sucursalId }, 'listening session opened');
  return { ...presentSession(session), secret, nota: NOTA_SESSION };
}

/** An open session of the scope, or 404 (closed, another's, or no such id). */
export async function requireOpenSession(deps: Deps, scope: CompanyScope, id: string): Promise<Webhook> {
  requireTestScope(scope);
  const session = (isUuid(id) ? await findSession(deps.db, scope, id) : undefined);
  if (session === undefined || !session.activo) throw new AppError('NOT_FOUND', 'no open listening session with this id (it ended: open a new one)');
  return session;
}

/**
 * Ends sessions: no event routes to them from now on, and their deliveries still owed an attempt
 * end as failed, so nothing is queued for them afterwards. Returns the ids it ended.
 */
export async function endSessions(deps: Pick<Deps, 'db'>, ids: readonly string[]): Promise<string[]> {
  const closed = await closeListenSessions(deps.db, ids);
  await abandonDeliveriesOf(deps.db, closed);
  return closed;
}

export async function closeSession(deps: Deps, scope: CompanyScope, id: string) {
  const session = await requireOpenSession(deps, scope, id);
  await endSessions(deps, [session.id]);
  return { ...presentSession(session), activo: false };
}

/** The tool's answer to one forwarded attempt, passed to the dispatcher waiting for it. */
export async function answerAttempt(deps: Deps, scope: CompanyScope, id: string, body: ListenAnswerRequest) {
  requireTestScope(scope);
  const session = (isUuid(id) ? await findSession(deps.db, scope, id) : undefined);
  if (session === undefined) throw new AppError('NOT_FOUND', 'no listening session with this id');
  const instance = listenInstanceOf(body.intento);
  if (instance === undefined) throw new AppError('VALIDATION_ERROR', 'intento is not an attempt of this session');
  const answer: ListenAnswer = {
    intento: body.intento,
    escuchaId: session.id,
    statusCode: body.statusCode,
    duracionMs: body.duracionMs,
    respuesta: body.respuesta ?? null,
    error: body.error ?? null,
    mensaje: body.mensaje ?? null,
  };
  await publishOn(deps.redis, listenKeys.answers(deps.config.redisPrefix, instance), JSON.stringify(answer));
  return { intento: body.intento };
}

/** The open sessions of the scope, each with its latest deliveries. */
export async function listSessions(deps: Deps, scope: Pick<CompanyScope, 'empresaId' | 'sucursalId'>) {
  const sessions = await listOpenSessions(deps.db, scope);
  const deliveries = await latestDeliveriesOf(
    deps.db,
    sessions.map((s) => s.id),
    SESSION_DELIVERIES,
  );
  return sessions.map((s) => ({
    ...presentSession(s),
    entregas: (deliveries.get(s.id) ?? []).map((d) => ({
      id: d.id,
      evento: d.evento,
      numeroGuia: d.numeroGuia,
      estado: d.estado,
      exitoso: d.exitoso,
      statusCode: d.statusCode,
      intentos: d.intentos,
      fecha: (d.ultimoIntentoEn ?? d.createdAt).toISOString(),
    })),
  }));
}
