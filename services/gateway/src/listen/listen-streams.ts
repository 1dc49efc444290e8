import type { Request, Response } from 'express';
import { LISTEN_LEASE_MS, LISTEN_LEASE_RENEW_MS, listenKeys, type ListenForward } from '@svc/contracts';
import type { Logger } from '@svc/observability';
import { listenOn, type ChannelListener, type RedisClient } from '@svc/platform';

/**
 * A comment line on an idle stream: proxies in front close a silent connection (often after 60 s),
 * and a write is how a dead peer is noticed.
 */
export const STREAM_HEARTBEAT_MS = 15_000;

/** How long the tool waits before reconnecting (the SSE `retry` field). */
const RECONNECT_HINT_MS = 1000;

/** Starts a stream's answer: its headers flushed at once, and its socket set for a long-lived, chatty connection. */
export function startEventStream(req: Request, res: Response): void {
  res.statusCode = 200;
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Connection', 'keep-alive');
  // Proxies that buffer (nginx) would hold the events back.
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  req.socket.setNoDelay(true);
  req.socket.setKeepAlive(true, STREAM_HEARTBEAT_MS);
}

/** The stream's first event: the reconnect hint and the session it holds. */
export const openedEvent = (sessionId: string): string => `retry: ${RECONNECT_HINT_MS}\nevent: abierta\ndata: ${JSON.stringify({ id: sessionId })}\n\n`;

/** One attempt, as the stream carries it (`entrega`, its id the attempt's). */
export const forwardEvent = (forward: ListenForward): string => `event: entrega\nid: ${forward.intento}\ndata: ${JSON.stringify(forward)}\n\n`;

export interface ListenStreams {
  /**
   * Serves the session's stream on `res` until the client goes: every attempt published to the
   * session's channel, as an `entrega` event. When the client closes it, `onClosed` runs (the
   * session ends), unless another stream has taken the session over since or the gateway is
   * stopping (the tool reconnects elsewhere and the session lives on).
   */
  serve(req: Request, res: Response, sessionId: string, onClosed: () => Promise<void>): Promise<void>;
  /** Streams held now. */
  size(): number;
  /** Ends every stream without ending their sessions: the tools reconnect to another gateway. */
  stop(): Promise<void>;
}

/**
 * The streams of listening sessions this gateway holds. Each is the one subscriber of its
 * session's channel here; while it is open this gateway renews the session's lease, so the sweep
 * of any gateway leaves the session open. Server-Sent Events (decision 0013): one-way, plain
 * HTTP through the API's own guards; the tool answers each attempt with a request of its own.
 */
export function createListenStreams(deps: { redis: RedisClient; subscriber: RedisClient; prefix: string; logger: Logger }): ListenStreams {
  const held = new Set<Response>();
  let stopping = false;

  return {
    async serve(req, res, sessionId, onClosed) {
      const leaseKey = listenKeys.lease(deps.prefix, sessionId);
      const holderKey = listenKeys.holder(deps.prefix, sessionId);
      // A reconnect may reach a gateway before the old one has noticed its client gone: the newest
      // stream holds the session, and an older one's close does not end it.
      const holder = await deps.redis.incr(holderKey);
      await deps.redis.set(leaseKey, String(holder), 'PX', LISTEN_LEASE_MS);
      await deps.redis.pexpire(holderKey, LISTEN_LEASE_MS * 4);

      const write = (chunk: string): void => {
        if (!res.writableEnded) res.write(chunk);
      };
      let listener: ChannelListener | undefined;
      try {
        listener = await listenOn(deps.subscriber, listenKeys.forwards(deps.prefix, sessionId), (message) => {
          let forward: ListenForward;
          try {
            forward = JSON.parse(message) as ListenForward;
          } catch {
            return;
          }
          write(forwardEvent(forward));
        });
      } catch (err) {
        await deps.redis.del(leaseKey).catch(() => undefined);
        throw err;
      }

      startEventStream(req, res);
      held.add(res);
      write(openedEvent(sessionId));

      const heartbeat = setInterval(() => write(': ping\n\n'), STREAM_HEARTBEAT_MS);
      const renew = setInterval(() => {
        Promise.all([deps.redis.set(leaseKey, String(holder), 'PX', LISTEN_LEASE_MS), deps.redis.pexpire(holderKey, LISTEN_LEASE_MS * 4)]).catch((err: unknown) => {
          deps.logger.warn({ escucha: sessionId, err: (err as Error).message }, 'listening session lease not renewed');
        });
      }, LISTEN_LEASE_RENEW_MS);
      heartbeat.unref();
      renew.unref();
      deps.logger.info({ escucha: sessionId, holder }, 'listening session stream opened');

      res.on('close', () => {
        clearInterval(heartbeat);
        clearInterval(renew);
        held.delete(res);
        void (async () => {
          await listener?.close();
          if (stopping) return;
          try {
            const current = await deps.redis.get(holderKey);
            if (current !== null && current !== String(holder)) return;
            await deps.redis.del(leaseKey);
            await onClosed();
            deps.logger.info({ escucha: sessionId }, 'listening session ended: its stream closed');
          } catch (err) {
            // The sweep ends it once its lease lapses.
            deps.logger.warn({ escucha: sessionId, err: (err as Error).message }, 'listening session not ended at its stream close; its lease will lapse');
          }
        })();
      });
    },
    size: () => held.size,
    async stop() {
      stopping = true;
      for (const res of held) res.end();
      held.clear();
    },
  };
}
