import { TEST_REDIS_URL } from './env';
import { dropPrefix, uniquePrefix } from './redis-prefix';
import { createTestDatabase, type TestDatabase } from './test-database';

/**
 * For tests that start a service's real entry as a child process: a database and a Redis prefix of
 * their own for the describe block (made in beforeAll, dropped in afterAll), and the settings that
 * point a service at them on free ports, logging at info. Read `env()` inside a test or hook.
 */
export function serviceStartEnv(label: string): { env: () => Record<string, string> } {
  let database: TestDatabase | undefined;
  let prefix: string | undefined;
  let env: Record<string, string> | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    prefix = uniquePrefix(label);
    env = {
      DATABASE_URL: database.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: prefix,
      PORT: '0',
      GATEWAY_METRICS_PORT: '0',
      DISPATCHER_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    };
  });
  afterAll(async () => {
    if (prefix) await dropPrefix(prefix);
    await database?.drop();
  });

  return {
    env: () => {
      if (!env) throw new Error('serviceStartEnv: read env() in a test or hook, after beforeAll');
      return env;
    },
  };
}
