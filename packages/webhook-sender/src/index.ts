// The guarded, signed HTTPS transport of a webhook delivery: URL rules, address guard, host map,
// the body and headers of one attempt, and the sender. It knows no database and no HTTP API: it
// returns outcomes and reasons, and its callers record and answer them.
export {
  createWebhookSender,
  DEFAULT_TIMEOUT_MS,
  MAX_RESPONSE_LENGTH,
  type SendOutcome,
  type WebhookSender,
  type SenderOptions,
} from './webhook.sender';
export { MAX_MESSAGE_LENGTH, type AttemptResult } from './send-failure.classifier';
export {
  attemptDelivery,
  attemptOperatorNotice,
  deliveryBody,
  deliveryHeaders,
  type AttemptInput,
  type AttemptOutcome,
  type OperatorNoticeInput,
} from './delivery.attempt';
export { checkWebhookUrl, MAX_WEBHOOK_URL_LENGTH, type UrlCheck } from './webhook-url.validator';
export { parseHostMap } from './host-map.parser';
export {
  createNameResolver,
  DEFAULT_DNS_TIMEOUT_MS,
  NameResolutionError,
  type NameResolver,
  type NameResolverOptions,
  type ResolvedAddress,
} from './dns.resolver';
export { parseCidrs, isGuardedAddress, type AllowList } from './address.guard';
