// The bodies of SVC deliveries as types, by event name: generated (events.generated.ts) from the
// event catalog's schemas in the OpenAPI document, so they are what GET /api/v1/eventos describes.
import type { components } from './events.generated';
import type { DeliveryPayload } from './verify-delivery';

/** The body of any delivery, a union told apart by `event`: `switch (e.event)` narrows `e.data`. */
export type SvcEvent = components['schemas']['EventPayload'];

/** Every event name a delivery can carry. */
export type SvcEventName = SvcEvent['event'];

/** The body of a delivery of `E`: `SvcEventOf<'GUIA_ENTREGADA'>['data']['fechaEntrega']` is a string. */
export type SvcEventOf<E extends SvcEventName> = Extract<SvcEvent, { event: E }>;

/** A handler per event name, each given its own event's body; events without one are left alone. */
export type SvcEventHandlers = { [E in SvcEventName]?: (event: SvcEventOf<E>) => unknown };

/**
 * Calls the handler of `payload.event` (a verified delivery's body: `verifyDelivery(...).payload`)
 * and waits for it. Answers whether one ran: false for an event without a handler, including one
 * newer than this package, which a receiver should still acknowledge with a 2xx.
 */
export async function handleEvent(payload: DeliveryPayload, handlers: SvcEventHandlers): Promise<boolean> {
  const handler = (handlers as Record<string, ((event: SvcEvent) => unknown) | undefined>)[payload.event];
  if (handler === undefined) return false;
  // A verified body is one the platform signed; the catalog's types are what it sends.
  await handler(payload as unknown as SvcEvent);
  return true;
}
