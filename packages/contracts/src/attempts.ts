/**
 * Why an attempt failed, in the delivery log's words: the classes a receiver's owner can act on.
 * The sender names them, the delivery log stores them (its `error` column's check lists the same),
 * and the API shows them.
 */
export const ATTEMPT_ERROR_CLASSES = ['TIMEOUT', 'DNS', 'CONNECTION', 'TLS', 'BLOCKED_ADDRESS', 'HTTP_STATUS'] as const;

export type AttemptErrorClass = (typeof ATTEMPT_ERROR_CLASSES)[number];
