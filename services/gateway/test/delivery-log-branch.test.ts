import { eventually } from '../../../test/support/eventually';
import { createOne, guia } from '../../../test/support/shipment-fixtures';
import { bearer, createBranch, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { createWebhook, type EntregaDetalle } from '../../../test/support/webhook-fixtures';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

/**
 * In a company webhook's log a branch token sees only the deliveries of its own branch's events and
 * no PING (docs/integrators.md, The delivery log). Real shipments of the head account and of two
 * branches, fanned out and delivered by a real dispatcher to the company's webhook and to one
 * branch's own.
 */
describe('a branch reading a company webhook\'s delivery log', () => {
  let fx: DispatcherFixture;
  let c: Company;
  let norte: Company;
  let sur: Company;
  let companyHook: string;
  let norteHook: string;
  /** numeroGuia of each owner's shipments. */
  const guias: Record<'head' | 'norte' | 'sur', string[]> = { head: [], norte: [], sur: [] };

  const get = (path: string, token: string) => fx.gw.http.get(`/api/v1${path}`).set('Authorization', bearer(token));
  const log = async (webhookId: string, token: string, query = ''): Promise<{ entregas: EntregaDetalle[]; nextCursor: string | null }> => {
    const res = await get(`/webhooks/${webhookId}/entregas${query}`, token);
    expect(res.status).toBe(200);
    return res.body.data as { entregas: EntregaDetalle[]; nextCursor: string | null };
  };
  /** Every page of the log, one delivery a page, following the cursor. */
  const everyPage = async (webhookId: string, token: string, query = ''): Promise<EntregaDetalle[]> => {
    const seen: EntregaDetalle[] = [];
    for (let cursor: string | null = null, pages = 0; ; pages++) {
      if (pages > 20) throw new Error('the log did not end');
      const page = await log(webhookId, token, `?limit=1${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      seen.push(...page.entregas);
      if (page.nextCursor === null) return seen;
      cursor = page.nextCursor;
    }
  };
  const shipmentsOf = (entregas: EntregaDetalle[]) => entregas.map((e) => e.numeroGuia).sort();

  beforeAll(async () => {
    // The gateway sends PINGs: it reaches the loopback receiver as the dispatchers do.
    fx = await startDispatcherFixture('logbranch', {
      gateway: { env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' } },
    });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 100, sucursalesHabilitadas: true });
    norte = await createBranch(fx.gw, c.id, 'Norte');
    sur = await createBranch(fx.gw, c.id, 'Sur');
    fx.receiver.respond('/company', [{ status: 200, body: 'recibido por la empresa' }]);
    companyHook = (await createWebhook(fx.gw, c.live, fx.receiver.url('/company'))).id;
    const branchHook = await fx.gw.admin('post', `/empresas/${c.id}/sucursales/${norte.id}/webhooks`, { url: fx.receiver.url('/norte') });
    expect(branchHook.status).toBe(201);
    norteHook = branchHook.body.data.id as string;
    for (const hook of [companyHook, norteHook]) {
      expect((await fx.gw.http.post(`/api/v1/webhooks/${hook}/test`).set('Authorization', bearer(c.live))).status).toBe(200);
    }
    const owners = [
      ['head', c.live],
      ['norte', norte.live],
      ['norte', norte.live],
      ['sur', sur.live],
    ] as const;
    for (const [i, [owner, token]] of owners.entries()) {
      const res = await createOne(fx.gw, token, guia(i + 1));
      expect(res.status).toBe(201);
      guias[owner].push(res.body.data.numeroGuia as string);
    }
    // The company webhook gets every event and its PING; Norte's own webhook Norte's events and its PING.
    await eventually(
      async () => {
        const [all, own] = await Promise.all([log(companyHook, c.live, '?estado=exitosa'), log(norteHook, c.live, '?estado=exitosa')]);
        return all.entregas.length === 5 && own.entregas.length === 3;
      },
      15_000,
      'every delivery made',
    );
  }, 60_000);
  afterAll(() => fx?.stop());

  it('the head account sees every delivery of the company webhook, PING included', async () => {
    const all = await everyPage(companyHook, c.live);
    expect(all.map((e) => e.evento).sort()).toEqual(['GUIA_CREADA', 'GUIA_CREADA', 'GUIA_CREADA', 'GUIA_CREADA', 'PING']);
    expect(shipmentsOf(all)).toEqual([...guias.head, ...guias.norte, ...guias.sur, null].sort());
  });

  it("a branch sees only its own events' deliveries there, in every page and filter, and no PING", async () => {
    const seen = await everyPage(companyHook, norte.live);
    expect(shipmentsOf(seen)).toEqual([...guias.norte].sort());
    expect(seen.every((e) => e.intentosDetalle.length === 1 && e.intentosDetalle[0]!.respuesta === 'recibido por la empresa')).toBe(true);
    expect(shipmentsOf((await log(companyHook, sur.live)).entregas)).toEqual(guias.sur);
    expect((await log(companyHook, norte.live, '?evento=PING')).entregas).toEqual([]);
    expect(shipmentsOf((await log(companyHook, norte.live, '?estado=exitosa&evento=GUIA_CREADA')).entregas)).toEqual([...guias.norte].sort());
    expect(shipmentsOf((await log(companyHook, norte.live, '?exitoso=true&desde=2000-01-01')).entregas)).toEqual([...guias.norte].sort());
  });

  it("a branch's detail of another branch's delivery, the head's or a PING is 404; its own is the head's view of it", async () => {
    const all = await everyPage(companyHook, c.live);
    for (const d of all) {
      const mine = guias.norte.includes(d.numeroGuia ?? '');
      const res = await get(`/webhooks/${companyHook}/entregas/${d.id}`, norte.live);
      if (mine) expect({ status: res.status, data: res.body.data }).toEqual({ status: 200, data: d });
      else expect({ evento: d.evento, status: res.status, body: res.body }).toEqual({ evento: d.evento, status: 404, body: envelope('NOT_FOUND') });
    }
  });

  it('a resend of its event is its to see, wherever it came from', async () => {
    const [original] = (await log(companyHook, norte.live)).entregas;
    const resent = await fx.gw.http.post(`/api/v1/webhooks/${companyHook}/entregas/${original!.id}/reenviar`).set('Authorization', bearer(c.live));
    expect(resent.status).toBe(202);
    const seen = await everyPage(companyHook, norte.live);
    expect(seen.map((e) => e.id)).toContain(resent.body.data.id);
    expect(seen.filter((e) => e.reenvioDe === original!.id)).toHaveLength(1);
    expect(shipmentsOf(seen)).toEqual([...guias.norte, original!.numeroGuia].sort());
    expect((await get(`/webhooks/${companyHook}/entregas/${resent.body.data.id as string}`, sur.live)).status).toBe(404);
  });

  it('its own webhook\'s log is whole, PING included', async () => {
    const own = await everyPage(norteHook, norte.live);
    expect(own.map((e) => e.evento).sort()).toEqual(['GUIA_CREADA', 'GUIA_CREADA', 'PING']);
    const ping = own.find((e) => e.evento === 'PING')!;
    expect((await get(`/webhooks/${norteHook}/entregas/${ping.id}`, norte.live)).status).toBe(200);
    // Another branch does not see that webhook at all.
    expect((await get(`/webhooks/${norteHook}/entregas`, sur.live)).status).toBe(404);
  });
});
