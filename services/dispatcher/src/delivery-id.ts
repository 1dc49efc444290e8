import { createHash } from 'node:crypto';

/** Namespace of delivery ids: keeps them apart from any other name-based id. */
export const DELIVERY_ID_NAMESPACE = 'svc-delivery';

/**
 * The delivery id of (event, webhook): a name-based UUID (RFC 9562 layout, version 3: MD5 of the
 * namespace and the pair). The same pair always gives the same id, so a fan-out that runs twice
 * finds its deliveries instead of making new ones, and a receiver sees one `webhookId` however
 * often a delivery is retried. MD5 rather than SHA-1 (version 5) because Postgres computes it too:
 * the fan-out's single statement derives the ids itself (see `deliveryIdSql`), and both must agree.
 */
export function deliveryIdFor(eventId: string, webhookId: string): string {
  const h = createHash('md5').update(`${DELIVERY_ID_NAMESPACE}/${eventId.toLowerCase()}/${webhookId.toLowerCase()}`).digest('hex');
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-3${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
