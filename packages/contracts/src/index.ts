// @svc/contracts: what the services agree on, with no I/O (test/no-io.test.ts holds it to that):
// events, errors, request and job schemas, table types, time. One line per module of src/.
export * from './attempts';
export * from './db/types';
export * from './errors';
export * from './event-body.validator';
export * from './event-catalog';
export * from './events';
export * from './jobs';
export * from './listen-sessions';
export * from './previous-secret';
export * from './requests/schemas';
export * from './requests/validator';
export * from './time';
export * from './wire-shapes';
