import type { Logger } from '@svc/observability';
import type { Db, RedisClient, SecretBox } from '@svc/platform';
import type { Clock } from '@svc/contracts';
import type { WebhookSender } from '@svc/webhook-sender';
import type { GatewayConfig } from './config';
import type { TokenCache } from './auth/token-cache';
import type { AdminAuthLimiter } from './auth/admin-auth.limiter';
import type { AuthFailureLimiter } from './auth/auth-failure.limiter';
import type { ClientAddress } from './http/client-address';
import type { RateLimiter } from './rate-limit/rate-limiter';
import type { GatewayMetrics } from './observability/gateway-metrics';
import type { OutboxRelay } from './outbox/outbox.relay';
import type { ResendRelay } from './deliveries/resend.relay';
import type { ListenStreams } from './listen/listen-streams';

/** What the app is built from: made once by main.ts, or by a test, and passed down as arguments. */
export interface GatewayDeps {
  config: GatewayConfig;
  db: Db;
  /** Commands (rate limit, revocations, publish); fails fast when Redis is down. */
  redis: RedisClient;
  tokenCache: TokenCache;
  rateLimiter: RateLimiter;
  /** The customer portal's: the same sliding window per session (PORTAL_RATE_LIMIT_PER_MINUTE). */
  portalRateLimiter: RateLimiter;
  /** Resends of one event to one webhook per hour (`RESENDS_PER_HOUR`), API and portal alike. */
  resendLimiter: RateLimiter;
  /** Failed admin authentications per client address. */
  adminAuthLimiter: AdminAuthLimiter;
  /** Failed `/api/v1` authentications per client address, checked before a token lookup. */
  authFailureLimiter: AuthFailureLimiter;
  /** Portal session starts per client address. */
  portalSessionLimiter: RateLimiter;
  /** The client's address for every per-address limit: the peer's, or what a trusted proxy forwarded (TRUSTED_PROXIES). */
  clientAddress: ClientAddress;
  outboxRelay: OutboxRelay;
  /** Queues the first attempts of resends (`reenviar`, `recuperar`) in batches. */
  resendRelay: ResendRelay;
  /** The streams of listening sessions (`svc listen`) this process holds. */
  listenStreams: ListenStreams;
  /** The same sending code as the dispatcher, for the synchronous PING. */
  sender: WebhookSender;
  /** Seals webhook secrets as they are written, opens them to sign a PING (SECRETS_KEY). */
  secrets: SecretBox;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  /**
   * The public listener's port (PORT, or the one it took when PORT is 0): the default origin of a
   * portal link, which is for a customer and so never names ADMIN_PORT.
   */
  publicPort(): number;
}
