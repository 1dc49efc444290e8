import type { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { coalesceWrites } from '@svc/platform';
import { TEST_REDIS_URL } from '../../../test/support/env';
import { eventually } from '../../../test/support/eventually';
import { deletePrefix, uniquePrefix } from '../../../test/support/redis-prefix';
import { countSocketWrites } from '../../../test/support/socket-writes';

/** `n` commands called in one turn, each with its own key, value and reply. */
async function setAndGetInOneTurn(client: Redis, prefix: string, n: number): Promise<(string | null)[]> {
  const keys = Array.from({ length: n }, (_, i) => `${prefix}:k${i}`);
  await Promise.all(keys.map((k, i) => client.set(k, `v${i}`)));
  return Promise.all(keys.map((k) => client.get(k)));
}

describe('coalesceWrites', () => {
  const prefix = uniquePrefix('writes');
  const clients: Redis[] = [];
  const connected = async (): Promise<Redis> => {
    const client = new Redis(TEST_REDIS_URL, { lazyConnect: true });
    clients.push(client);
    await client.connect();
    return client;
  };

  afterAll(async () => {
    const admin = new Redis(TEST_REDIS_URL);
    await deletePrefix(admin, prefix);
    admin.disconnect();
    for (const c of clients) c.disconnect();
  });

  it('sends the commands of one turn in one write, each with its own reply', async () => {
    const plain = await connected();
    const plainWrites = countSocketWrites(plain);
    expect(await setAndGetInOneTurn(plain, `${prefix}:plain`, 20)).toEqual(Array.from({ length: 20 }, (_, i) => `v${i}`));
    // ioredis alone: one write per command (the loopback socket takes each at once).
    expect(plainWrites).toEqual({ writes: 40, chunks: 40 });

    const client = await connected();
    coalesceWrites(client);
    const writes = countSocketWrites(client);
    expect(await setAndGetInOneTurn(client, `${prefix}:one`, 20)).toEqual(Array.from({ length: 20 }, (_, i) => `v${i}`));
    // The 20 SETs in one write, then (their replies awaited) the 20 GETs in another.
    expect(writes).toEqual({ writes: 2, chunks: 40 });
  });

  it('holds no command back: one a turn is written in its own turn', async () => {
    const client = await connected();
    coalesceWrites(client);
    const writes = countSocketWrites(client);
    for (let i = 0; i < 5; i++) {
      await client.set(`${prefix}:seq`, String(i));
      expect(writes.writes).toBe(i + 1);
    }
    expect(await client.get(`${prefix}:seq`)).toBe('4');
  });

  it('covers the socket of a reconnect', async () => {
    const client = await connected();
    coalesceWrites(client);
    const first = (client as unknown as { stream: Writable }).stream;
    first.destroy();
    await eventually(async () => client.status === 'ready' && (client as unknown as { stream: Writable }).stream !== first, 5000, 'reconnected');
    const writes = countSocketWrites(client);
    expect(await setAndGetInOneTurn(client, `${prefix}:again`, 10)).toEqual(Array.from({ length: 10 }, (_, i) => `v${i}`));
    expect(writes).toEqual({ writes: 2, chunks: 20 });
  });
});
