import { randomUUID } from 'node:crypto';
import {
  LISTEN_ANSWER_TIMEOUT_MS,
  LISTEN_WAIT_MS,
  listenAttemptId,
  listenKeys,
  type ListenAnswer,
  type ListenForward,
} from '@svc/contracts';
import type { Logger } from '@svc/observability';
import { listenOn, publishOn, type ChannelListener, type RedisClient } from '@svc/platform';
import { deliveryBody, deliveryHeaders, MAX_RESPONSE_LENGTH, type AttemptInput, type AttemptOutcome, type AttemptResult } from '@svc/webhook-sender';

/**
 * The send of a listening session's attempt (`svc listen`): the very request a webhook would get,
 * signed with the session's secret, published to the session's channel, where the gateway holding
 * its stream passes it to the tool; the tool POSTs it to the local URL and reports the answer
 * through the API, and whichever gateway takes that report publishes it to this dispatcher's
 * channel. The local answer decides the attempt as a receiver's would; no report within the
 * deadline is a timeout.
 */
export interface ListenRelay {
  attempt(sessionId: string, input: Omit<AttemptInput, 'url'>): Promise<AttemptOutcome>;
  /** Attempts still waiting end as timeouts; the answers' channel is left. */
  close(): Promise<void>;
}

interface Waiting {
  sessionId: string;
  settle(answer: ListenAnswer | undefined): void;
}

const resultOf = (statusCode: number, error: ListenAnswer['error']): AttemptResult => {
  if (error === 'TIMEOUT') return 'timeout';
  if (statusCode === 0) return 'network';
  if (statusCode >= 200 && statusCode < 300) return '2xx';
  if (statusCode >= 300 && statusCode < 400) return '3xx';
  return statusCode < 500 ? '4xx' : '5xx';
};

export async function createListenRelay(deps: { commands: RedisClient; subscriber: RedisClient; prefix: string; logger: Logger }): Promise<ListenRelay> {
  // Names this process's answers' channel; a restarted process has a new one, and an answer for
  // an attempt of the previous one is heard by no one (that attempt was already given up).
  const instance = randomUUID();
  const waiting = new Map<string, Waiting>();

  const listener: ChannelListener = await listenOn(deps.subscriber, listenKeys.answers(deps.prefix, instance), (message) => {
    let answer: ListenAnswer;
    try {
      answer = JSON.parse(message) as ListenAnswer;
    } catch {
      return;
    }
    const w = waiting.get(answer.intento);
    // Only the session the attempt was for may answer it (the gateway checked the caller owns that session).
    if (w !== undefined && w.sessionId === answer.escuchaId) w.settle(answer);
  });

  return {
    async attempt(sessionId, input) {
      const at = new Date();
      const timestamp = at.toISOString();
      const body = deliveryBody(input, timestamp);
      const intento = listenAttemptId(instance, randomUUID());
      const forward: ListenForward = { intento, evento: input.event, body, headers: deliveryHeaders(body, input, at) };
      const started = performance.now();
      const answered = new Promise<ListenAnswer | undefined>((resolve) => {
        const timer = setTimeout(() => done(undefined), LISTEN_WAIT_MS);
        const done = (a: ListenAnswer | undefined): void => {
          clearTimeout(timer);
          waiting.delete(intento);
          resolve(a);
        };
        waiting.set(intento, { sessionId, settle: done });
      });
      try {
        // The answer is owed to the platform's own attempt, not an integrator's request: it is kept
        // out of the token's rate limit while this waits (one answer per attempt).
        await deps.commands.set(listenKeys.waiting(deps.prefix, sessionId, intento), '1', 'PX', LISTEN_WAIT_MS);
        await publishOn(deps.commands, listenKeys.forwards(deps.prefix, sessionId), JSON.stringify(forward));
      } catch (err) {
        waiting.get(intento)?.settle(undefined);
        deps.logger.warn({ webhook: sessionId, err: (err as Error).message }, 'listening session attempt not published');
      }
      const answer = await answered;
      if (answer === undefined) {
        return {
          ok: false,
          statusCode: 0,
          durationMs: Math.round(performance.now() - started),
          result: 'timeout',
          error: 'TIMEOUT',
          message: `the listening session did not answer within ${LISTEN_WAIT_MS / 1000} s (is svc listen still running?)`,
          response: null,
          timestamp,
        };
      }
      const result = resultOf(answer.statusCode, answer.error);
      // The contract's deadline holds for the local answer too: a 2xx after it is a timeout.
      const ok = result === '2xx' && answer.duracionMs <= LISTEN_ANSWER_TIMEOUT_MS;
      return {
        ok,
        statusCode: answer.statusCode,
        // The delivery log keeps whole milliseconds.
        durationMs: Math.round(answer.duracionMs),
        result: ok || result !== '2xx' ? result : 'timeout',
        error: ok ? null : (answer.error ?? (result === '2xx' ? 'TIMEOUT' : 'HTTP_STATUS')),
        message: ok ? null : (answer.mensaje ?? `the local receiver answered ${answer.statusCode}`),
        response: answer.respuesta === null ? null : answer.respuesta.slice(0, MAX_RESPONSE_LENGTH),
        timestamp,
      };
    },
    async close() {
      for (const w of [...waiting.values()]) w.settle(undefined);
      await listener.close();
    },
  };
}
