import { createHash } from 'node:crypto';

/** Namespace of delivery ids (a fixed random UUID): keeps them apart from any other v5 space. */
const NAMESPACE = Buffer.from('6f1c2a8e4b7d4e0a9c3f5d2b8a1e7c40', 'hex');

/**
 * The delivery id of (event, webhook): a name-based UUID (RFC 9562 version 5, SHA-1). The same
 * pair always gives the same id, so a fan-out that runs twice finds its deliveries instead of
 * making new ones, and a receiver sees one `webhookId` however often a delivery is retried.
 */
export function deliveryIdFor(eventId: string, webhookId: string): string {
  const hash = createHash('sha1').update(NAMESPACE).update(`${eventId.toLowerCase()}/${webhookId.toLowerCase()}`).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
