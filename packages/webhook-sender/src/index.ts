export {
  createWebhookSender,
  createGuardedLookup,
  BlockedAddressError,
  DEFAULT_TIMEOUT_MS,
  type AttemptResult,
  type SendOutcome,
  type WebhookSender,
  type SenderOptions,
} from './webhook.sender';
export {
  attemptDelivery,
  deliveryBody,
  deliveryHeaders,
  USER_AGENT,
  type AttemptInput,
  type AttemptOutcome,
} from './delivery.attempt';
export { validateWebhookUrl, MAX_WEBHOOK_URL_LENGTH } from './webhook-url.validator';
export { parseHostMap } from './host-map.parser';
export {
  parseCidrs,
  isGuardedAddress,
  guardedRange,
  parseIp,
  type AllowList,
  type Cidr,
  type IpAddress,
} from './address.guard';
export * from './entrega.repository';
