import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from './env';

export function uniquePrefix(label = 't'): string {
  return `svctest:${label}:${randomBytes(5).toString('hex')}`;
}

/** Deletes every key under `prefix:` with the given connection. */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
}

/** Deletes every key under the prefix (a test file's whole Redis footprint). */
export async function dropPrefix(prefix: string): Promise<void> {
  const redis = new Redis(TEST_REDIS_URL);
  try {
    await deletePrefix(redis, prefix);
  } finally {
    redis.disconnect();
  }
}
