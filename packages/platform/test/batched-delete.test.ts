import type pg from 'pg';
import { createLogger } from '@svc/observability';
import { createBatchedRetention, createRetentionTask, type DeleteBatch } from '../src';
import { createTestDatabase, testPool, type TestDatabase } from '../../../test/support/test-database';

/**
 * The one batched-delete loop every retention runs, on a scratch table of a real Postgres: batch
 * after batch from where the last left off, until one comes back short; a stop ends a pass after
 * its current batch.
 */

describe('batched deletes', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  const logger = createLogger('batched-delete-test', 'silent');

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = testPool(database.url);
    await pool.query('create table scratch (id int primary key)');
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const fill = async (n: number): Promise<void> => {
    await pool.query('truncate scratch');
    await pool.query('insert into scratch select g from generate_series(1, $1) g', [n]);
  };
  const left = async (): Promise<number> => Number((await pool.query<{ n: string }>('select count(*) n from scratch')).rows[0]!.n);

  /** Deletes the next `limit` ids after `after` (a keyset walk, as the dispatcher's retention does), recording each batch's size. */
  const keysetBatch =
    (sizes: number[]): DeleteBatch<number> =>
    async (after, limit) => {
      const { rows } = await pool.query<{ id: number }>(
        'delete from scratch where id in (select id from scratch where id > $1 order by id limit $2) returning id',
        [after, limit],
      );
      sizes.push(rows.length);
      return { seen: rows.length, next: Math.max(after, ...rows.map((r) => r.id)) };
    };

  /** A retention of the scratch table that never runs on its own: each test runs its passes. */
  const scratch = { name: 'scratch retention', logger, defaults: { intervalMs: 3_600_000, firstDelayMs: 3_600_000, batchSize: 5 } };

  it('walks batch after batch from the cursor until one comes back short, pausing between two', async () => {
    await fill(23);
    const sizes: number[] = [];
    const retention = createRetentionTask({
      ...scratch,
      tuning: { pauseMs: 30 },
      pass: async (walk) => {
        await walk(0, keysetBatch(sizes));
        return sizes.reduce((a, b) => a + b, 0);
      },
    });
    const started = Date.now();
    expect(await retention.runOnce()).toBe(23);
    expect(sizes).toEqual([5, 5, 5, 5, 3]);
    // Four pauses: after each full batch, none after the short one.
    expect(Date.now() - started).toBeGreaterThanOrEqual(4 * 30 - 5);
    expect(await left()).toBe(0);
  });

  it('ends a pass after its current batch once stopped, and runs no walk of a stopped task', async () => {
    await fill(50);
    const sizes: number[] = [];
    const retention = createRetentionTask({
      ...scratch,
      tuning: { batchSize: 10, pauseMs: 1 },
      pass: async (walk) => {
        const batch = keysetBatch(sizes);
        await walk(0, async (after, limit) => {
          const done = await batch(after, limit);
          if (sizes.length === 2) void retention.stop();
          return done;
        });
        return sizes.length;
      },
    });
    expect(await retention.runOnce()).toBe(2);
    expect(await left()).toBe(30);
    expect(await retention.runOnce()).toBe(2);
    expect(await left()).toBe(30);
  });

  it('counts a pass of a retention without a cursor, and tells of it only when it removed rows', async () => {
    await fill(12);
    const told: number[] = [];
    const retention = createBatchedRetention({
      ...scratch,
      tuning: { pauseMs: 1 },
      removeBatch: async (limit) => {
        const result = await pool.query('delete from scratch where id in (select id from scratch order by id limit $1)', [limit]);
        return result.rowCount ?? 0;
      },
      removed: (total) => told.push(total),
    });
    expect(await retention.runOnce()).toBe(12);
    expect(await retention.runOnce()).toBe(0);
    expect(told).toEqual([12]);
    expect(await left()).toBe(0);
  });
});
