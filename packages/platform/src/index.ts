// @svc/platform: the plumbing both services run on: Postgres (driver, migrations), queues, settings,
// Redis clients, lifecycle. One line per module of src/, but for entry points (*.main.ts) and
// db/migrations/ (loaded by db/migrate.ts).
export * from './db/database';
export * from './db/ensure-database';
export * from './db/migrate';
export * from './db/open-database';
export * from './db/queue-shards';
export * from './db/partitions';
export * from './db/sealed-secrets';
export * from './db/secrets-at-rest';
export * from './db/tables/deliveries.table';
export * from './db/tables/delivery-attempts.table';
export * from './db/tables/outbox.table';
export * from './db/tables/webhooks.table';
export * from './job-queue';
export * from './lifecycle';
export * from './metrics-server';
export * from './periodic-task';
export * from './pubsub';
export * from './redis';
export * from './settings';
