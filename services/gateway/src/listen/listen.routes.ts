import type { RequestHandler, Router } from 'express';
import { AppError, validateListenAnswer, validateListenSessionCreate } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendData } from '../http/send-json';
import { apiDoor } from '../companies/company-scope';
import { answerAttempt, closeSession, endSessions, listSessions, openSession, requireOpenSession, requireTestScope } from './listen.service';
import type { ListenStreams } from './listen-streams';

/**
 * Listening sessions of `svc listen` (docs/integrators.md, "Your first event in a minute"): test
 * tokens only. Open one, hold its stream (Server-Sent Events), answer each attempt it carries
 * (`respuestas/{intento}`, outside the rate limit while the attempt waits; `respuestas`, the first
 * form, always counted); the session ends when its stream closes (or on DELETE).
 */
export function mountListenRoutes(router: Router, deps: GatewayDeps, streams: ListenStreams): void {
  const open: RequestHandler = async (req, res) => {
    const scope = apiDoor.scope(req);
    requireTestScope(scope);
    sendData(res, 201, await openSession(deps, scope, validateListenSessionCreate(req.body ?? {})));
  };
  const list: RequestHandler = async (req, res) => {
    const scope = apiDoor.scope(req);
    requireTestScope(scope);
    sendData(res, 200, await listSessions(deps, scope));
  };
  const stream: RequestHandler = async (req, res) => {
    const session = await requireOpenSession(deps, apiDoor.scope(req), String(req.params.id));
    await streams.serve(req, res, session.id, async () => {
      await endSessions(deps, [session.id]);
    });
  };
  const answer: RequestHandler = async (req, res) => {
    const scope = apiDoor.scope(req);
    requireTestScope(scope);
    sendData(res, 200, await answerAttempt(deps, scope, String(req.params.id), validateListenAnswer(req.body)));
  };
  // The attempt in the path: the rate limit sees it before the body is read (answer-exemption.ts).
  const answerTo: RequestHandler = async (req, res) => {
    const scope = apiDoor.scope(req);
    requireTestScope(scope);
    const body = validateListenAnswer(req.body);
    if (body.intento !== String(req.params.intento)) throw new AppError('VALIDATION_ERROR', 'intento must be the attempt the path names');
    sendData(res, 200, await answerAttempt(deps, scope, String(req.params.id), body));
  };
  const remove: RequestHandler = async (req, res) => {
    sendData(res, 200, await closeSession(deps, apiDoor.scope(req), String(req.params.id)));
  };

  route(router, '/escuchas', { post: open, get: list });
  route(router, '/escuchas/:id', { delete: remove });
  route(router, '/escuchas/:id/stream', { get: stream });
  route(router, '/escuchas/:id/respuestas', { post: answer });
  route(router, '/escuchas/:id/respuestas/:intento', { post: answerTo });
}
