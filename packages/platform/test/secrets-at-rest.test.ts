import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import {
  createDb,
  createPool,
  createSecretBox,
  eraseEndedPreviousSecrets,
  loadSettings,
  missingSealingKeys,
  prepareSecretsAtRest,
  sealedKeyIdOf,
  sealStoredSecrets,
  type Db,
  type SealingLog,
  type SecretBox,
} from '@svc/platform';
import { createTestDatabase, testPool, type TestDatabase } from '../../../test/support/test-database';
import { rowsContaining, webhookTexts } from '../../../test/support/stored-secrets';

/**
 * The passes every gateway and dispatcher runs over `webhooks` as it starts (and the gateway's
 * upkeep), against a real Postgres: rows written in plaintext before sealing, a change of
 * SECRETS_KEY, a key dropped too early, concurrent starts.
 */

const keysOf = (...keys: Buffer[]) => loadSettings('test', { SECRETS_KEY: keys.map((k) => k.toString('base64')).join(',') }, () => ({})).secretsKeys;
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/** What a start logs, kept. */
function recordingLog(): SealingLog & { lines: Array<{ level: string; fields: object; message: string }> } {
  const lines: Array<{ level: string; fields: object; message: string }> = [];
  return {
    lines,
    info: (fields, message) => lines.push({ level: 'info', fields, message }),
    error: (fields, message) => lines.push({ level: 'error', fields, message }),
  };
}

describe('webhook secrets at rest: the start-up passes', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let db: Db;
  let empresaId: string;
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  const oldBox = createSecretBox(keysOf(oldKey));

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = testPool(database.url);
    db = createDb(createPool({ connectionString: database.url, max: 4 }));
    empresaId = (await pool.query<{ id: string }>(`insert into empresas (nombre, verificada) values ('sealing', true) returning id`)).rows[0]!.id;
  });
  afterAll(async () => {
    await db?.destroy();
    await pool?.end();
    await database?.drop();
  });

  /** Rows as a version before sealing wrote them: plaintext, with and without a previous secret. */
  async function plaintextRows(n: number, previous?: 'running' | 'ended'): Promise<Array<{ id: string; secret: string; previous: string | null }>> {
    const rows: Array<{ id: string; secret: string; previous: string | null }> = [];
    for (let i = 0; i < n; i++) {
      const secret = newSecret();
      const prev = previous ? newSecret() : null;
      const ends = previous === 'ended' ? `now() - interval '1 minute'` : previous === 'running' ? `now() + interval '1 hour'` : 'null';
      const { id } = (
        await pool.query<{ id: string }>(
          `insert into webhooks (empresa_id, url, secret, secreto_anterior, secreto_anterior_expira_en, eventos) values ($1, 'https://receiver.test/hook', $2, $3, ${ends}, '{}') returning id`,
          [empresaId, secret, prev],
        )
      ).rows[0]!;
      rows.push({ id, secret, previous: prev });
    }
    return rows;
  }

  async function storedOf(id: string) {
    return (await pool.query<{ secret: string; secreto_anterior: string | null }>('select secret, secreto_anterior from webhooks where id = $1', [id])).rows[0]!;
  }

  it('seals every plaintext row, current and previous, in batches; erases ended previous secrets; leaves nothing in the clear', async () => {
    await pool.query('delete from webhooks');
    const running = await plaintextRows(7, 'running');
    const ended = await plaintextRows(3, 'ended');
    const plain = await plaintextRows(5);
    const version = async () => Number((await pool.query<{ v: string }>('select version as v from webhook_versions where empresa_id = $1', [empresaId])).rows[0]!.v);
    const before = await version();

    // Batches of 4 along the primary key: 15 rows take four of them.
    const erased = await eraseEndedPreviousSecrets(db);
    expect(erased).toBe(3);
    const report = await sealStoredSecrets(db, oldBox, { wait: true, batchSize: 4 });
    expect(report).toEqual({ sealed: 7 * 2 + 3 + 5, resealed: 0, unopened: [] });

    for (const w of [...running, ...ended, ...plain]) {
      const stored = await storedOf(w.id);
      expect(sealedKeyIdOf(stored.secret)).toBe(oldBox.sealingKeyId);
      expect(oldBox.open(w.id, stored.secret)).toBe(w.secret);
      const expectedPrevious = running.includes(w) ? w.previous : null;
      expect(stored.secreto_anterior === null ? null : oldBox.open(w.id, stored.secreto_anterior)).toBe(expectedPrevious);
    }
    // Nothing of any secret left anywhere in the database: not `whsec_`, not a secret's body.
    const all = [...running, ...ended, ...plain].flatMap((w) => [w.secret, ...(w.previous ? [w.previous] : [])]);
    expect((await webhookTexts(pool)).filter((t) => t.includes('whsec_'))).toEqual([]);
    expect(await rowsContaining(pool, ['whsec_', ...all.map((s) => s.slice('whsec_'.length))])).toEqual([]);
    // Each sealed row counted as a change of its company's webhooks: the dispatchers read their routes again.
    expect(await version()).toBeGreaterThan(before);

    // Idempotent: a second pass finds nothing to do and changes nothing.
    const sealed = await webhookTexts(pool);
    expect(await sealStoredSecrets(db, oldBox, { wait: true, batchSize: 4 })).toEqual({ sealed: 0, resealed: 0, unopened: [] });
    expect(await webhookTexts(pool)).toEqual(sealed);
  });

  it('a new first key (SECRETS_KEY="new,old"): the start re-seals every row under it; then the old key can go', async () => {
    await pool.query('delete from webhooks');
    const rows = await plaintextRows(6, 'running');
    await prepareSecretsAtRest(db, oldBox, recordingLog());
    const rotated = createSecretBox(keysOf(newKey, oldKey));
    const log = recordingLog();
    const done = await prepareSecretsAtRest(db, rotated, log);
    expect(done).toMatchObject({ sealed: 0, resealed: 12, erased: 0, unopened: [] });
    expect(log.lines).toEqual([{ level: 'info', fields: { sealed: 0, resealed: 12, erased: 0, keyId: rotated.sealingKeyId }, message: expect.any(String) }]);

    const alone = createSecretBox(keysOf(newKey));
    expect(await missingSealingKeys(db, alone)).toEqual([]);
    for (const w of rows) {
      const stored = await storedOf(w.id);
      expect([sealedKeyIdOf(stored.secret), sealedKeyIdOf(stored.secreto_anterior!)]).toEqual([alone.sealingKeyId, alone.sealingKeyId]);
      expect(alone.open(w.id, stored.secret)).toBe(w.secret);
      expect(alone.open(w.id, stored.secreto_anterior!)).toBe(w.previous);
    }
    // A start with the keys in the old order puts nothing back (the periodic pass never re-seals).
    expect(await sealStoredSecrets(db, createSecretBox(keysOf(oldKey, newKey)), { plaintextOnly: true })).toEqual({ sealed: 0, resealed: 0, unopened: [] });
  });

  it('refuses to start when SECRETS_KEY lacks a key that sealed a stored secret, naming each missing key id', async () => {
    await pool.query('delete from webhooks');
    await plaintextRows(2, 'running');
    await prepareSecretsAtRest(db, oldBox, recordingLog());
    const third = randomBytes(32);
    const elsewhere = createSecretBox(keysOf(third));
    const withNew = createSecretBox(keysOf(newKey, third));
    const before = await webhookTexts(pool);

    await expect(prepareSecretsAtRest(db, elsewhere, recordingLog())).rejects.toThrow(
      new RegExp(`SECRETS_KEY lacks keys that sealed stored webhook secrets: key ids ${oldBox.sealingKeyId} \\(2 webhooks\\)`),
    );
    await expect(prepareSecretsAtRest(db, withNew, recordingLog())).rejects.toThrow(new RegExp(`it lists ${withNew.keyIds.join(', ')}`));
    // Nothing was touched: the secrets are still there for a start with the right keys.
    expect(await webhookTexts(pool)).toEqual(before);
    expect((await prepareSecretsAtRest(db, createSecretBox(keysOf(third, oldKey)), recordingLog())).resealed).toBe(4);
  });

  it('an ended previous secret sealed under a dropped key is erased, not a reason to refuse', async () => {
    await pool.query('delete from webhooks');
    const [w] = await plaintextRows(1, 'running');
    await prepareSecretsAtRest(db, oldBox, recordingLog());
    await prepareSecretsAtRest(db, createSecretBox(keysOf(newKey, oldKey)), recordingLog());
    // Everything is under the new key now but one previous secret, still under the old one, whose
    // overlap has just ended (a gateway still listing only the old key rotated it, say).
    await pool.query(`update webhooks set secreto_anterior = $2, secreto_anterior_expira_en = now() - interval '1 second' where id = $1`, [w!.id, oldBox.seal(w!.id, w!.previous!)]);
    const done = await prepareSecretsAtRest(db, createSecretBox(keysOf(newKey)), recordingLog());
    expect(done).toMatchObject({ erased: 1, resealed: 0 });
    expect(await storedOf(w!.id)).toEqual({ secret: expect.stringMatching(/^v1:/), secreto_anterior: null });
  });

  it('a value that does not open is left as it is and said, never re-sealed into something else; the rest go on', async () => {
    await pool.query('delete from webhooks');
    const rows = await plaintextRows(3);
    await prepareSecretsAtRest(db, oldBox, recordingLog());
    const victim = rows[1]!;
    const altered = (await storedOf(victim.id)).secret.replace(/.(?=.{4}$)/, (c) => (c === 'A' ? 'B' : 'A'));
    await pool.query('update webhooks set secret = $2 where id = $1', [victim.id, altered]);

    const log = recordingLog();
    const done = await prepareSecretsAtRest(db, createSecretBox(keysOf(newKey, oldKey)), log);
    expect(done.resealed).toBe(2);
    expect(done.unopened).toEqual([{ webhookId: victim.id, reason: 'altered', keyId: oldBox.sealingKeyId }]);
    expect(log.lines).toContainEqual({ level: 'error', fields: { webhookId: victim.id, reason: 'altered', keyId: oldBox.sealingKeyId }, message: expect.stringContaining('does not open') });
    expect((await storedOf(victim.id)).secret).toBe(altered);
  });

  it('concurrent starts seal each row once: one waits for the other', async () => {
    await pool.query('delete from webhooks');
    const rows = await plaintextRows(40, 'running');
    const boxes: SecretBox[] = [oldBox, oldBox, oldBox];
    const reports = await Promise.all(boxes.map((b) => prepareSecretsAtRest(db, b, recordingLog())));
    expect(reports.reduce((n, r) => n + r.sealed, 0)).toBe(80);
    for (const w of rows) expect(oldBox.open(w.id, (await storedOf(w.id)).secret)).toBe(w.secret);
    // A periodic pass that finds the lock taken does nothing rather than wait.
    const holder = await pool.connect();
    try {
      await holder.query('select pg_advisory_lock(720493511822631)');
      await plaintextRows(1);
      expect(await sealStoredSecrets(db, oldBox, { plaintextOnly: true, wait: false })).toEqual({ sealed: 0, resealed: 0, unopened: [] });
    } finally {
      await holder.query('select pg_advisory_unlock(720493511822631)');
      holder.release();
    }
    expect((await sealStoredSecrets(db, oldBox, { plaintextOnly: true, wait: false })).sealed).toBe(1);
  });

  it('the periodic pass can find plaintext rows through its partial index', async () => {
    // The table is too small for the planner to prefer an index unless told: what is checked is that
    // the query's condition matches the index's predicate, so that it can use it.
    const client = await pool.connect();
    try {
      await client.query('set enable_seqscan = off');
      const forced = await client.query<{ 'QUERY PLAN': string }>(
        `explain select id from webhooks where (secret not like 'v1:%' or secreto_anterior not like 'v1:%') and id > '00000000-0000-0000-0000-000000000000' order by id limit 500`,
      );
      expect(forced.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('webhooks_plaintext_idx');
    } finally {
      await client.query('reset enable_seqscan');
      client.release();
    }
  });
});
