import { createHash } from 'node:crypto';
import { listenKeys } from '@svc/contracts';
import type pg from 'pg';
import { testRedisClient } from '../../../test/support/redis-prefix';
import { guia } from '../../../test/support/shipment-fixtures';
import { bearer, createBranch, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

type Res = { status: number; headers: Record<string, string>; body: { error?: { code: string } } };

const empresa = (gw: TestGateway, token: string) => gw.http.get('/api/v1/empresa').set('Authorization', bearer(token));

function rateHeaders(res: Res): { limit: number; remaining: number; reset: number } {
  for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
    expect(res.headers[h]).toMatch(/^\d+$/);
  }
  return {
    limit: Number(res.headers['x-ratelimit-limit']),
    remaining: Number(res.headers['x-ratelimit-remaining']),
    reset: Number(res.headers['x-ratelimit-reset']),
  };
}

describe('rate limit: 100 requests per sliding minute per token', () => {
  let fx: GatewayFixture;
  let a: TestGateway;
  let b: TestGateway;
  let pool: pg.Pool;

  beforeAll(async () => {
    fx = await startGatewayFixture('ratelimit');
    ({ gw: a, pool } = fx);
    b = await fx.addGateway(); // the same database and Redis prefix: one window across instances
  });
  afterAll(() => fx?.stop());

  it('allows exactly 100 sequential requests, counting Remaining down, then 429 with Retry-After', async () => {
    const c = await createCompany(a);
    const started = Math.floor(Date.now() / 1000);
    for (let i = 1; i <= 100; i++) {
      const res = await empresa(a, c.live);
      expect(res.status).toBe(200);
      const h = rateHeaders(res);
      expect(h).toMatchObject({ limit: 100, remaining: 100 - i });
      // The oldest request of the window frees its slot 60 s after it was made.
      expect(h.reset).toBeGreaterThanOrEqual(started + 59);
      expect(h.reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 61);
    }
    for (let i = 0; i < 3; i++) {
      const res = await empresa(a, c.live);
      expect(res.status).toBe(429);
      expect(res.body).toEqual({ success: false, error: { code: 'RATE_LIMIT_EXCEEDED', message: expect.any(String) } });
      expect(rateHeaders(res)).toMatchObject({ limit: 100, remaining: 0 });
      const retryAfter = Number(res.headers['retry-after']);
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }
    // Every route of /api/v1 is refused while the window is full, the other instance included.
    const create = await b.http.post('/api/v1/guias').set('Authorization', bearer(c.live)).send(guia());
    expect(create.status).toBe(429);
    expect(create.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
  });

  it('renews the window as it slides: slots free as the oldest requests turn 60 s old', async () => {
    const c = await createCompany(a);
    for (let i = 0; i < 100; i++) expect((await empresa(a, c.live)).status).toBe(200);
    expect((await empresa(a, c.live)).status).toBe(429);
    // Age the 30 oldest entries of the token's window by a minute, as if that time had passed.
    const hash = createHash('sha256').update(c.live).digest('hex');
    const tokenId = (await pool.query<{ id: string }>('select id from tokens where hash = $1', [hash])).rows[0]!.id;
    const redis = testRedisClient();
    try {
      const key = a.deps.rateLimiter.keys.of('rl', tokenId, hash);
      const oldest = await redis.zrange(key, 0, 29, 'WITHSCORES');
      expect(oldest).toHaveLength(60);
      for (let i = 0; i < oldest.length; i += 2) await redis.zadd(key, Number(oldest[i + 1]) - 61_000, oldest[i]!);
    } finally {
      redis.disconnect();
    }
    for (let i = 1; i <= 30; i++) {
      const res = await empresa(b, c.live);
      expect(res.status).toBe(200);
      expect(rateHeaders(res).remaining).toBe(30 - i);
    }
    expect((await empresa(a, c.live)).status).toBe(429);
  });

  it('puts the three headers on every /api/v1 answer: errors, 404s, 405s and failed authentication', async () => {
    const c = await createCompany(a, { planActivo: false });
    const answers: Array<[string, Res]> = [
      ['402', await a.http.post('/api/v1/guias').set('Authorization', bearer(c.live)).send(guia())],
      ['400', await a.http.post('/api/v1/guias').set('Authorization', bearer(c.live)).send({})],
      ['404', await a.http.get('/api/v1/nada').set('Authorization', bearer(c.live))],
      ['405', await a.http.delete('/api/v1/empresa').set('Authorization', bearer(c.live))],
      ['415', await a.http.post('/api/v1/guias').set('Authorization', bearer(c.live)).type('text').send('x')],
      ['200', await a.http.get('/api/v1/guias').set('Authorization', bearer(c.live))],
    ];
    expect(answers.map(([, r]) => r.status)).toEqual([402, 400, 404, 405, 415, 200]);
    answers.forEach(([, res], i) => expect(rateHeaders(res)).toMatchObject({ limit: 100, remaining: 99 - i }));
    // A request that fails authentication shows an untouched window.
    for (const header of [undefined, 'Bearer nope', `Bearer ${c.live}x`]) {
      const req = a.http.get('/api/v1/empresa');
      const res = header === undefined ? await req : await req.set('Authorization', header);
      expect(res.status).toBe(401);
      expect(rateHeaders(res)).toMatchObject({ limit: 100, remaining: 100 });
    }
  });

  it('does not count requests that fail authentication against any token', async () => {
    const c = await createCompany(a);
    for (let i = 0; i < 20; i++) {
      expect((await a.http.get('/api/v1/empresa').set('Authorization', bearer(`${c.live}x`))).status).toBe(401);
      expect((await a.http.get('/api/v1/empresa').set('Authorization', 'Basic abc')).status).toBe(401);
    }
    expect(rateHeaders(await empresa(a, c.live)).remaining).toBe(99);
  });

  it('keeps a separate window for the live, the test and each branch token', async () => {
    const c = await createCompany(a, { sucursalesHabilitadas: true });
    const s = await createBranch(a, c.id);
    for (let i = 0; i < 100; i++) expect((await empresa(a, c.live)).status).toBe(200);
    expect((await empresa(a, c.live)).status).toBe(429);
    for (const token of [c.test, s.live, s.test]) {
      const res = await empresa(b, token);
      expect(res.status).toBe(200);
      expect(rateHeaders(res).remaining).toBe(99);
    }
  });

  it("svc listen's answer to an attempt a dispatcher waits for is let through uncounted, once: a second, or one for no attempt, is counted", async () => {
    const c = await createCompany(a);
    const opened = await a.http.post('/api/v1/escuchas').set('Authorization', bearer(c.test)).send({});
    expect(opened.status).toBe(201);
    const sid = opened.body.data.id as string;
    for (let i = 0; i < 99; i++) expect((await empresa(a, c.test)).status).toBe(200);
    expect((await empresa(a, c.test)).status).toBe(429);
    // The mark a dispatcher sets when it forwards an attempt and waits for its answer (listen.relay.ts).
    const intento = 'instancia.intento-1';
    const redis = testRedisClient();
    try {
      // Named as the services name it: on a cluster the prefix is hash-tagged (`{prefix}`).
      await redis.set(listenKeys.waiting(a.deps.config.redisPrefix, sid, intento), '1', 'PX', 7000);
    } finally {
      redis.disconnect();
    }
    const answer = (gw: TestGateway) =>
      gw.http.post(`/api/v1/escuchas/${sid}/respuestas/${intento}`).set('Authorization', bearer(c.test)).send({ intento, statusCode: 200, duracionMs: 4 });
    const taken = await answer(b);
    expect(taken.status).toBe(200);
    // The window as it stands, full, and not added to.
    expect(rateHeaders(taken as unknown as Res)).toMatchObject({ limit: 100, remaining: 0 });
    const again = await answer(a);
    expect(again.status).toBe(429);
    expect(again.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
    expect((await empresa(b, c.test)).status).toBe(429);
  });

  it('150 concurrent requests with a fresh token: exactly 100 are not 429', async () => {
    const c = await createCompany(a);
    const answers = await Promise.all(Array.from({ length: 150 }, () => empresa(a, c.live)));
    expect(answers.filter((r) => r.status !== 429)).toHaveLength(100);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(100);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(50);
    // Each allowed request saw a different count: remaining 0..99, once each.
    const remaining = answers.filter((r) => r.status === 200).map((r) => Number(r.headers['x-ratelimit-remaining']));
    expect(remaining.sort((x, y) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });

  it('150 concurrent requests spread over two gateway instances on one prefix: exactly 100 are not 429', async () => {
    const c = await createCompany(a);
    const answers = await Promise.all(Array.from({ length: 150 }, (_, i) => empresa(i % 2 ? a : b, c.live)));
    expect(answers.filter((r) => r.status !== 429)).toHaveLength(100);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(50);
  });
});
