/** Where tests find Postgres and Redis: the machine's own services (never mocks). */
export const TEST_DATABASE_BASE = (process.env.TEST_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const TEMPLATE_ENV = 'SVC_TEST_TEMPLATE_DB';
export const adminUrl = (): string => `${TEST_DATABASE_BASE}/postgres`;
