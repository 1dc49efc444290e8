import { randomBytes, randomUUID } from 'node:crypto';
import { createSecretBox, loadSettings, sealedKeyIdOf } from '@svc/platform';
import { verify } from '@svc/webhook-signature';
import { eventually } from '../../../test/support/eventually';
import type { ReceivedRequest } from '../../../test/support/https-receiver';
import { createOne } from '../../../test/support/shipment-fixtures';
import { verifyStandard } from '../../../test/support/standard-webhooks';
import { rowsContaining, webhookTexts } from '../../../test/support/stored-secrets';
import { bearer, createBranch, createCompany, type Company, type TestGateway } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture, type TestDispatcher } from '../../../test/support/test-dispatcher';
import { createWebhook } from '../../../test/support/webhook-fixtures';

/**
 * Webhook secrets sealed at rest under SECRETS_KEY (issue 28), end to end: a real gateway and
 * dispatcher, Postgres and an HTTPS receiver that verifies every signature with the secrets the API
 * issued. The stack restarts with the keys rotated and then with one dropped.
 */

const OLD = randomBytes(32).toString('base64');
const NEW = randomBytes(32).toString('base64');
const keyIdOf = (key: string) => createSecretBox(loadSettings('test', { SECRETS_KEY: key }, () => ({})).secretsKeys).sealingKeyId;
const OLD_ID = keyIdOf(OLD);
const NEW_ID = keyIdOf(NEW);
/** Both services reach the loopback receiver; private.test stands for an address inside the operator's network. */
const NETWORK = { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1,private.test=10.1.2.3', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const bodyOf = (r: ReceivedRequest) => JSON.parse(r.rawBody.toString('utf8')) as { event: string; data: { numeroGuia?: string } };

describe('webhook secrets sealed at rest (SECRETS_KEY)', () => {
  let fx: DispatcherFixture;
  let gw: TestGateway;
  let dispatcher: TestDispatcher;
  let c: Company;
  /** Every secret the API issued in this file, by webhook: what the receiver verifies with. */
  const issued = new Map<string, { secret: string; previous?: string; path: string }>();

  const startWith = async (keys: string): Promise<void> => {
    gw = await fx.addGateway({ env: { SECRETS_KEY: keys, RATE_LIMIT_PER_MINUTE: '100000', ...NETWORK } });
    dispatcher = await fx.addDispatcher({ env: { SECRETS_KEY: keys, ...NETWORK } });
  };
  const stopBoth = async (): Promise<void> => {
    await dispatcher.stop();
    await gw.stop();
  };

  beforeAll(async () => {
    fx = await startDispatcherFixture('sealed', { dispatchers: 0, gateway: { env: { SECRETS_KEY: OLD, ...NETWORK } } });
    gw = fx.gw;
    dispatcher = await fx.addDispatcher({ env: { SECRETS_KEY: OLD, ...NETWORK } });
    c = await createCompany(gw, { planActivo: true, creditos: 10_000, sucursalesHabilitadas: true });
  });
  afterAll(() => fx?.stop());

  const api = (method: 'get' | 'post' | 'delete', path: string, body?: object) => {
    const r = gw.http[method](`/api/v1${path}`).set('Authorization', bearer(c.live));
    return body === undefined ? r : r.send(body);
  };
  const hook = async (path: string): Promise<string> => {
    const w = await createWebhook(gw, c.live, fx.receiver.url(path));
    issued.set(w.id, { secret: w.secret, path });
    return w.id;
  };
  const rotate = async (id: string, solaparHoras: number): Promise<void> => {
    const res = await api('post', `/webhooks/${id}/secreto`, { solaparHoras });
    expect(res.status).toBe(200);
    const before = issued.get(id)!;
    issued.set(id, { ...before, secret: res.body.data.secret as string, ...(solaparHoras > 0 ? { previous: before.secret } : {}) });
  };
  const ship = async (): Promise<string> => (await createOne(gw, c.live).expect(201)).body.data.numeroGuia as string;
  const stored = async (id: string) =>
    (await fx.pool.query<{ secret: string; secreto_anterior: string | null; secreto_anterior_expira_en: Date | null }>('select secret, secreto_anterior, secreto_anterior_expira_en from webhooks where id = $1', [id])).rows[0]!;
  /** The webhooks that are active, each one's delivery of `numeroGuia` once it came, checked against the issued secrets. */
  const expectSigned = async (numeroGuia: string, ids: readonly string[]): Promise<void> => {
    for (const id of ids) {
      const { secret, previous, path } = issued.get(id)!;
      await eventually(async () => fx.receiver.requestsTo(path).some((r) => bodyOf(r).data.numeroGuia === numeroGuia), 15_000, `${path} gets ${numeroGuia}`);
      const r = fx.receiver.requestsTo(path).find((x) => bodyOf(x).data.numeroGuia === numeroGuia)!;
      expect(verify(r.rawBody, r.headers['x-svc-signature'], secret)).toBe(true);
      expect(verifyStandard(r, secret)).toEqual(bodyOf(r));
      if (previous !== undefined) expect(verify(r.rawBody, r.headers['x-svc-signature-anterior'], previous)).toBe(true);
    }
  };
  /** Every secret issued, and every body of one, is nowhere in the database. */
  const expectNothingInTheClear = async (): Promise<void> => {
    const secrets = [...issued.values()].flatMap((w) => [w.secret, ...(w.previous ? [w.previous] : [])]);
    expect((await webhookTexts(fx.pool)).filter((t) => t.includes('whsec_'))).toEqual([]);
    expect(await rowsContaining(fx.pool, ['whsec_', ...secrets.map((s) => s.slice('whsec_'.length))])).toEqual([]);
  };

  it('creating, rotating and migrating plaintext rows leave no secret in the clear anywhere in the database', async () => {
    const a = await hook('/a');
    const b = await hook('/b');
    await rotate(a, 24);
    await rotate(b, 0);
    // Through the operator's route, for a branch: the same sealing.
    const branch = await createBranch(gw, c.id);
    const viaAdmin = await gw.admin('post', `/empresas/${c.id}/sucursales/${branch.id}/webhooks`, { url: fx.receiver.url('/branch') });
    expect(viaAdmin.status).toBe(201);
    issued.set(viaAdmin.body.data.id as string, { secret: viaAdmin.body.data.secret as string, path: '/branch' });
    for (const id of [a, b]) expect(sealedKeyIdOf((await stored(id)).secret)).toBe(OLD_ID);
    expect(sealedKeyIdOf((await stored(a)).secreto_anterior!)).toBe(OLD_ID);
    await expectNothingInTheClear();

    // Rows as a version before sealing left them, with a previous secret in its overlap: a gateway
    // that starts seals them before it serves.
    const legacy = [randomUUID(), randomUUID()];
    for (const [i, id] of legacy.entries()) {
      const secret = `whsec_${randomBytes(32).toString('base64')}`;
      const previous = `whsec_${randomBytes(32).toString('base64')}`;
      await fx.pool.query(
        `insert into webhooks (id, empresa_id, url, secret, secreto_anterior, secreto_anterior_expira_en, eventos) values ($1, $2, $3, $4, $5, now() + interval '1 hour', '{}')`,
        [id, c.id, fx.receiver.url(`/legacy-${i}`), secret, previous],
      );
      issued.set(id, { secret, previous, path: `/legacy-${i}` });
    }
    await fx.addGateway({ env: { SECRETS_KEY: OLD, ...NETWORK } });
    await expectNothingInTheClear();
    // They sign as they did: every webhook of the company gets the event, signed with what was issued.
    await expectSigned(await ship(), [a, b, ...legacy]);
    const logs = fx.gw.logs.text() + gw.logs.text() + dispatcher.logs.text();
    for (const { secret } of issued.values()) expect(logs).not.toContain(secret.slice('whsec_'.length));
  }, 40_000);

  it('a previous secret is erased once its overlap has ended; one still running stays', async () => {
    const ended = await hook('/ended');
    const running = await hook('/running');
    await rotate(ended, 1);
    await rotate(running, 1);
    await fx.pool.query(`update webhooks set secreto_anterior_expira_en = now() - interval '1 second' where id = $1`, [ended]);
    const done = await gw.secretsUpkeep.runOnce();
    expect(done.erased).toBe(1);
    expect(await stored(ended)).toMatchObject({ secreto_anterior: null, secreto_anterior_expira_en: null });
    expect((await stored(running)).secreto_anterior).toMatch(/^v1:/);
    issued.set(ended, { ...issued.get(ended)!, previous: undefined });
    await expectSigned(await ship(), [ended, running]);
    for (const id of [ended, running]) expect((await api('delete', `/webhooks/${id}`)).status).toBe(200);
  }, 30_000);

  it('a refused address leaves no address or range in the delivery log, nor in the logs', async () => {
    const w = await createWebhook(gw, c.live, 'https://private.test/hook');
    const numeroGuia = await ship();
    await eventually(
      async () => (await fx.pool.query('select 1 from entregas e join entrega_intentos i on i.entrega_id = e.id where e.webhook_id = $1', [w.id])).rowCount! > 0,
      10_000,
      'the refused attempt recorded',
    );
    const log = await api('get', `/webhooks/${w.id}/entregas`);
    expect(log.status).toBe(200);
    const [entrega] = log.body.data.entregas as Array<{ numeroGuia: string; intentosDetalle: Array<Record<string, unknown>> }>;
    expect(entrega!.numeroGuia).toBe(numeroGuia);
    expect(entrega!.intentosDetalle[0]).toMatchObject({ statusCode: 0, error: 'BLOCKED_ADDRESS', mensaje: 'private.test resolves to a non-public address', respuesta: null });
    expect(JSON.stringify(log.body)).not.toMatch(/10\.1\.2\.3|private range/);
    expect(dispatcher.logs.text()).not.toContain('10.1.2.3');
    expect((await api('delete', `/webhooks/${w.id}`)).status).toBe(200);
  }, 20_000);

  it('an altered sealed secret is never used to sign: nothing is sent to its webhook until it is fixed, then the delivery goes', async () => {
    const victim = await hook('/victim');
    const healthy = await hook('/healthy');
    const good = (await stored(victim)).secret;
    // One character of the tag changed: still well formed, no longer authentic.
    const altered = good.replace(/.(?=.{3}$)/, (ch) => (ch === 'A' ? 'B' : 'A'));
    await fx.pool.query('update webhooks set secret = $2 where id = $1', [victim, altered]);

    // An event: the healthy webhook gets it at once, the victim nothing.
    const numeroGuia = await ship();
    await expectSigned(numeroGuia, [healthy]);
    await sleep(1500);
    expect(fx.receiver.requestsTo('/victim')).toHaveLength(0);
    expect(dispatcher.logs.text()).toContain(`webhook ${victim}: its sealed secret does not verify under key ${OLD_ID}`);
    // A PING: refused with a 500, nothing sent.
    const ping = await api('post', `/webhooks/${victim}/test`);
    expect(ping.status).toBe(500);
    expect(fx.receiver.requestsTo('/victim')).toHaveLength(0);

    // Fixed (the value restored): the owed delivery goes, signed with the issued secret.
    await fx.pool.query('update webhooks set secret = $2 where id = $1', [victim, good]);
    await expectSigned(numeroGuia, [victim]);
    expect(fx.receiver.requestsTo('/victim')).toHaveLength(1);

    // A resend (a delivery's own job, through the pipeline's first stage) is held back the same way.
    // The receiver has it before its row commits (sent first, then recorded): wait for the row.
    let entrega: { id: string } | undefined;
    await eventually(async () => {
      [entrega] = (await api('get', `/webhooks/${victim}/entregas`)).body.data.entregas as Array<{ id: string }>;
      return entrega !== undefined;
    }, 5000, "the victim's delivery recorded");
    await fx.pool.query('update webhooks set secret = $2 where id = $1', [victim, altered]);
    await sleep(1100); // past the dispatcher's one-second reuse of a webhook's target
    expect((await api('post', `/webhooks/${victim}/entregas/${entrega!.id}/reenviar`)).status).toBe(202);
    await sleep(1500);
    expect(fx.receiver.requestsTo('/victim')).toHaveLength(1);
    await fx.pool.query('update webhooks set secret = $2 where id = $1', [victim, good]);
    await fx.receiver.waitFor(2, 15_000, '/victim');
    const resent = fx.receiver.requestsTo('/victim')[1]!;
    expect(verify(resent.rawBody, resent.headers['x-svc-signature'], issued.get(victim)!.secret)).toBe(true);
    for (const id of [victim, healthy]) expect((await api('delete', `/webhooks/${id}`)).status).toBe(200);
  }, 60_000);

  it('a key rotation (SECRETS_KEY="new,old", restart) re-seals every row under the new key and every webhook keeps delivering, verified', async () => {
    const active = [...issued.keys()].filter((id) => !['/ended', '/running', '/victim', '/healthy', '/branch'].includes(issued.get(id)!.path));
    await expectSigned(await ship(), active);

    await stopBoth();
    await startWith(`${NEW},${OLD}`);
    const keyIds = await fx.pool.query<{ secret: string; secreto_anterior: string | null }>('select secret, secreto_anterior from webhooks');
    expect(new Set(keyIds.rows.flatMap((r) => [r.secret, ...(r.secreto_anterior ? [r.secreto_anterior] : [])]).map(sealedKeyIdOf))).toEqual(new Set([NEW_ID]));
    expect(gw.logs.text() + dispatcher.logs.text()).toContain('webhook secrets sealed under the first key of SECRETS_KEY');
    await expectNothingInTheClear();
    await expectSigned(await ship(), active);

    // Every row re-sealed: the old key can go.
    await stopBoth();
    await startWith(NEW);
    await expectSigned(await ship(), active);
    await expectNothingInTheClear();
  }, 60_000);

  it('a start without a key that sealed stored secrets refuses, naming the missing key id (gateway and dispatcher)', async () => {
    const elsewhere = randomBytes(32).toString('base64');
    const missing = new RegExp(`SECRETS_KEY lacks keys that sealed stored webhook secrets: key ids ${NEW_ID} \\(\\d+ webhooks\\)`);
    await expect(fx.addGateway({ env: { SECRETS_KEY: elsewhere } })).rejects.toThrow(missing);
    await expect(fx.addGateway({ env: { SECRETS_KEY: OLD } })).rejects.toThrow(missing);
    await expect(fx.addDispatcher({ env: { SECRETS_KEY: `${elsewhere},${OLD}` } })).rejects.toThrow(missing);
    // Nothing was lost: the running stack still delivers, and the secrets stay under the key that sealed them.
    expect(new Set((await fx.pool.query<{ secret: string }>('select secret from webhooks')).rows.map((r) => sealedKeyIdOf(r.secret)))).toEqual(new Set([NEW_ID]));
  }, 30_000);
});
