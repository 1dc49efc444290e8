import { randomUUID } from 'node:crypto';
import { verify } from '@svc/webhook-signature';
import type { ReceivedRequest } from '../../../test/support/https-receiver';
import { createOne } from '../../../test/support/shipment-fixtures';
import { acceptedByStandard } from '../../../test/support/standard-webhooks';
import { bearer, createBranch, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { createWebhook } from '../../../test/support/webhook-fixtures';
import { sleep } from '../../../test/support/eventually';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
const HOUR = 3600_000;

interface Rotated {
  id: string;
  secret: string;
  secretoAnteriorExpiraEn: string | null;
  nota: string;
}

describe('POST /api/v1/webhooks/{id}/secreto (docs/integrators.md, Secrets and rotation)', () => {
  let fx: DispatcherFixture;
  let c: Company;
  const secrets: string[] = [];

  beforeAll(async () => {
    // The gateway sends PINGs: it reaches the loopback receiver as the dispatchers do.
    fx = await startDispatcherFixture('rotation', {
      gateway: { env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' } },
    });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 100, sucursalesHabilitadas: true });
  });
  afterAll(() => fx?.stop());

  const api = (method: 'get' | 'post' | 'delete', path: string, body?: unknown, token = c.live) => {
    const r = fx.gw.http[method](`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body as object);
  };
  const hook = async (path: string, eventos: string[] = []): Promise<{ id: string; secret: string }> => {
    const created = await createWebhook(fx.gw, c.live, fx.receiver.url(path), eventos);
    secrets.push(created.secret);
    return created;
  };
  const rotate = async (id: string, body?: unknown): Promise<Rotated> => {
    const res = await api('post', `/webhooks/${id}/secreto`, body);
    if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    secrets.push(res.body.data.secret as string);
    return res.body.data as Rotated;
  };
  /** The row's secrets, stored sealed (checked here), as they open. */
  const stored = async (id: string) => {
    const row = (
      await fx.pool.query<{ secret: string; secreto_anterior: string | null; secreto_anterior_expira_en: Date | null }>(
        'select secret, secreto_anterior, secreto_anterior_expira_en from webhooks where id = $1',
        [id],
      )
    ).rows[0]!;
    for (const value of [row.secret, row.secreto_anterior]) if (value !== null) expect(value).toMatch(/^v1:[0-9a-f]{8}:/);
    const open = (value: string) => fx.gw.deps.secrets.open(id, value);
    return { ...row, secret: open(row.secret), secreto_anterior: row.secreto_anterior === null ? null : open(row.secreto_anterior) };
  };
  const ping = async (id: string, path: string): Promise<ReceivedRequest> => {
    const before = fx.receiver.requestsTo(path).length;
    expect((await api('post', `/webhooks/${id}/test`)).body.data).toMatchObject({ exitoso: true });
    return (await fx.receiver.waitFor(before + 1, 5_000, path))[before]!;
  };
  /** What a receiver holding `secret` concludes, by either scheme. */
  const accepts = (r: ReceivedRequest, secret: string) => ({
    svc: verify(r.rawBody, r.headers['x-svc-signature'], secret) || verify(r.rawBody, r.headers['x-svc-signature-anterior'], secret),
    standard: acceptedByStandard(r, secret),
  });
  const both = { svc: true, standard: true };
  const neither = { svc: false, standard: false };

  it('issues a new whsec_ secret shown once: exactly { id, secret, secretoAnteriorExpiraEn, nota }, 24 h of overlap by default', async () => {
    const w = await hook('/shape');
    const start = Date.now();
    const res = await api('post', `/webhooks/${w.id}/secreto`, {});
    expect(res.status).toBe(200);
    const data = res.body.data as Rotated;
    secrets.push(data.secret);
    expect(res.body).toEqual({
      success: true,
      data: { id: w.id, secret: expect.stringMatching(SECRET), secretoAnteriorExpiraEn: expect.any(String), nota: expect.stringMatching(/secreto/i) },
    });
    expect(data.secret).not.toBe(w.secret);
    expect(Math.abs(Date.parse(data.secretoAnteriorExpiraEn!) - (start + 24 * HOUR))).toBeLessThan(60_000);
    expect(await stored(w.id)).toEqual({ secret: data.secret, secreto_anterior: w.secret, secreto_anterior_expira_en: new Date(data.secretoAnteriorExpiraEn!) });

    // No body: the default overlap; 72 h; 0: none, and the replaced secret is not kept.
    const noBody = await rotate(w.id);
    expect(Math.abs(Date.parse(noBody.secretoAnteriorExpiraEn!) - (start + 24 * HOUR))).toBeLessThan(60_000);
    const long = await rotate(w.id, { solaparHoras: 72 });
    expect(Math.abs(Date.parse(long.secretoAnteriorExpiraEn!) - (start + 72 * HOUR))).toBeLessThan(60_000);
    expect((await stored(w.id)).secreto_anterior).toBe(noBody.secret);
    const none = await rotate(w.id, { solaparHoras: 0 });
    expect(none.secretoAnteriorExpiraEn).toBeNull();
    expect(await stored(w.id)).toEqual({ secret: none.secret, secreto_anterior: null, secreto_anterior_expira_en: null });
    expect(new Set([w.secret, data.secret, noBody.secret, long.secret, none.secret]).size).toBe(5);

    // Never shown again: not in the detail, the list or the delivery log.
    for (const path of [`/webhooks/${w.id}`, '/webhooks', `/webhooks/${w.id}/entregas`]) {
      const text = JSON.stringify((await api('get', path)).body);
      for (const s of secrets) expect(text).not.toContain(s);
    }
    await api('delete', `/webhooks/${w.id}`);
  });

  it.each<[string, unknown]>([
    ['over 72 hours', { solaparHoras: 73 }],
    ['negative', { solaparHoras: -1 }],
    ['not whole hours', { solaparHoras: 1.5 }],
    ['a string', { solaparHoras: '24' }],
    ['null', { solaparHoras: null }],
    ['an unknown field', { solaparHoras: 1, secret: 'whsec_mine' }],
  ])('400 VALIDATION_ERROR for solaparHoras %s; the secret stays', async (_case, body) => {
    const w = await hook('/invalid');
    const res = await api('post', `/webhooks/${w.id}/secreto`, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
    expect(await stored(w.id)).toEqual({ secret: w.secret, secreto_anterior: null, secreto_anterior_expira_en: null });
    await api('delete', `/webhooks/${w.id}`);
  });

  it('403 FORBIDDEN for a branch token, 404 NOT_FOUND elsewhere; an inactive webhook rotates too', async () => {
    const branch = await createBranch(fx.gw, c.id);
    const other = await createCompany(fx.gw);
    const w = await hook('/who');
    const forbidden = await api('post', `/webhooks/${w.id}/secreto`, {}, branch.live);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toEqual(envelope('FORBIDDEN'));
    for (const [id, token] of [
      [w.id, other.live],
      [randomUUID(), c.live],
      ['not-a-uuid', c.live],
    ] as const) {
      const res = await api('post', `/webhooks/${id}/secreto`, {}, token);
      expect(res.status).toBe(404);
      expect(res.body).toEqual(envelope('NOT_FOUND'));
    }
    expect((await stored(w.id)).secret).toBe(w.secret);
    await api('delete', `/webhooks/${w.id}`);
    const rotated = await rotate(w.id, { solaparHoras: 1 });
    expect(rotated.secret).toMatch(SECRET);
    expect((await stored(w.id)).secret).toBe(rotated.secret);
  });

  it('signs with the new secret and, until the overlap ends, with the previous one too; a new rotation ends the older overlap', async () => {
    const w = await hook('/rot', ['GUIA_CREADA']);
    const original = w.secret;

    // Before: the only secret.
    const before = await ping(w.id, '/rot');
    expect(before.headers['x-svc-signature-anterior']).toBeUndefined();
    expect(String(before.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(accepts(before, original)).toEqual(both);

    // During the overlap: receivers holding either secret accept every delivery (PING, event, retry).
    const first = await rotate(w.id, { solaparHoras: 1 });
    const during = await ping(w.id, '/rot');
    expect(verify(during.rawBody, during.headers['x-svc-signature'], first.secret)).toBe(true);
    expect(verify(during.rawBody, during.headers['x-svc-signature'], original)).toBe(false);
    expect(verify(during.rawBody, during.headers['x-svc-signature-anterior'], original)).toBe(true);
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(accepts(during, first.secret)).toEqual(both);
    expect(accepts(during, original)).toEqual(both);
    expect(accepts(during, `whsec_${Buffer.alloc(32, 7).toString('base64')}`)).toEqual(neither);

    await sleep(1100); // the dispatcher reuses a webhook's secrets for up to a second (WEBHOOK_CACHE_MS)
    fx.receiver.respond('/rot', [{ status: 500 }, { status: 200 }]);
    const sent = fx.receiver.requestsTo('/rot').length;
    await createOne(fx.gw, c.live);
    const [attempt1, attempt2] = (await fx.receiver.waitFor(sent + 2, 10_000, '/rot')).slice(sent);
    for (const r of [attempt1!, attempt2!]) {
      expect(JSON.parse(r.rawBody.toString('utf8')).event).toBe('GUIA_CREADA');
      expect(accepts(r, first.secret)).toEqual(both);
      expect(accepts(r, original)).toEqual(both);
    }
    expect(attempt1!.headers['webhook-id']).toBe(attempt2!.headers['webhook-id']);
    fx.receiver.respond('/rot', { status: 200 });

    // A second rotation during the overlap: the first secret stops signing at once.
    const second = await rotate(w.id, { solaparHoras: 2 });
    const next = await ping(w.id, '/rot');
    expect(accepts(next, second.secret)).toEqual(both);
    expect(accepts(next, first.secret)).toEqual(both);
    expect(accepts(next, original)).toEqual(neither);

    // Without an overlap, only the newest secret signs.
    const third = await rotate(w.id, { solaparHoras: 0 });
    const alone = await ping(w.id, '/rot');
    expect(alone.headers['x-svc-signature-anterior']).toBeUndefined();
    expect(String(alone.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(accepts(alone, third.secret)).toEqual(both);
    expect(accepts(alone, second.secret)).toEqual(neither);

    // An overlap that has run out signs nothing more (its end moved to the past, as time would).
    const fourth = await rotate(w.id, { solaparHoras: 1 });
    await fx.pool.query(`update webhooks set secreto_anterior_expira_en = now() - interval '1 second' where id = $1`, [w.id]);
    const after = await ping(w.id, '/rot');
    expect(after.headers['x-svc-signature-anterior']).toBeUndefined();
    expect(accepts(after, fourth.secret)).toEqual(both);
    expect(accepts(after, third.secret)).toEqual(neither);
  }, 30_000);

  it('never writes a secret, old or new, to the gateway\'s or the dispatcher\'s logs', () => {
    const logs = fx.gw.logs.text() + fx.dispatcher.logs.text();
    expect(logs).toContain('webhook secret rotated');
    expect(secrets.length).toBeGreaterThan(10);
    for (const s of secrets) {
      expect(logs).not.toContain(s);
      expect(logs).not.toContain(s.slice('whsec_'.length));
    }
  });
});
