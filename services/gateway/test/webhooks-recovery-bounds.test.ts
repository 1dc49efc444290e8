import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Queue } from 'bullmq';
import { sql } from 'kysely';
import { JOBS, type DeliveryJob } from '@svc/contracts';
import { RECOVERY_BATCH_SIZE, RECOVERY_CALL_LIMIT } from '../src/deliveries/delivery.service';
import { count } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture } from '../../../test/support/test-gateway';

const HOUR = 3600_000;
const MB = 1024 * 1024;

// A full collection before each reading, so that the heap measured is what is held, not garbage
// waiting for the collector (which alone varies by tens of MB from run to run).
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heldHeap = (): number => {
  gc();
  return process.memoryUsage().heapUsed;
};

/**
 * `recuperar` in bounded batches (issue 28): at most RECOVERY_BATCH_SIZE deliveries per statement,
 * each batch its own transaction, at most RECOVERY_CALL_LIMIT per call, `pendientes` saying what is
 * left. No dispatcher: the queue is looked at directly, failed deliveries written straight into
 * Postgres as a long outage leaves them.
 */
describe('POST /api/v1/webhooks/{id}/recuperar: bounded batches', () => {
  let fx: GatewayFixture;
  let c: Company;
  let queue: Queue<DeliveryJob>;

  beforeAll(async () => {
    fx = await startGatewayFixture('recoverybounds', { env: { RATE_LIMIT_PER_MINUTE: '100000' } });
    c = await createCompany(fx.gw);
    queue = fx.queue<DeliveryJob>(JOBS.delivery.queue);
  });
  afterAll(() => fx?.stop());

  const recover = (webhookId: string, body: unknown) => fx.gw.http.post(`/api/v1/webhooks/${webhookId}/recuperar`).set('Authorization', bearer(c.live)).send(body as object);
  const hook = async (): Promise<string> => {
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: 'https://receiver.test/hook' });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  /** `n` failed deliveries of their own events, one a second over the last `n` seconds before an hour ago. */
  const failedDeliveries = async (webhookId: string, n: number): Promise<void> => {
    await fx.pool.query(
      `with ev as (
         insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, created_at, enviado_en, repartido_en, secuencia, modo)
         select gen_random_uuid(), $2, null, 'GUIA_EN_RUTA', jsonb_build_object('numeroGuia', 'SVC' || lpad(g::text, 10, '0'), 'estado', 'EN_RUTA'),
                null, now() - interval '1 hour' - g * interval '1 second', now(), now(), 4, 'live'
         from generate_series(1, $3::int) g
         returning id, data, created_at
       )
       insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, numero_guia, created_at)
       select gen_random_uuid(), $1, id, 'GUIA_EN_RUTA', 'fallida', false, 500, 3, created_at, data ->> 'numeroGuia', created_at
       from ev`,
      [webhookId, c.id, n],
    );
  };
  const window = () => ({ desde: new Date(Date.now() - 13 * 24 * HOUR).toISOString() });
  const resendsOf = (webhookId: string) => count(fx.pool, 'select count(*) n from entregas where webhook_id = $1 and es_reenvio', [webhookId]);
  const resentTwice = (webhookId: string) =>
    count(fx.pool, 'select count(*) n from (select reenvio_de from entregas where webhook_id = $1 and es_reenvio group by 1 having count(*) > 1) x', [webhookId]);
  /**
   * The resends of each transaction: a resend is due at its transaction's `now()` (no dispatcher
   * has attempted it), which no two transactions here share.
   */
  const perTransaction = async (webhookId: string): Promise<number[]> =>
    (
      await fx.pool.query<{ n: string }>(
        'select count(*) n from entregas where webhook_id = $1 and es_reenvio group by proximo_intento_en order by proximo_intento_en',
        [webhookId],
      )
    ).rows.map((r) => Number(r.n));
  const recoveryEntries = async (webhookId: string) =>
    (
      await fx.pool.query<{ detalle: { reenviadas: number } }>(
        `select detalle from actividad where webhook_id = $1 and accion = 'deliveries.recovered' order by id`,
        [webhookId],
      )
    ).rows.map((r) => r.detalle.reenviadas);

  it('resends 20,000 failed deliveries call after call until none is left: each call bounded, each once, in bounded memory', async () => {
    expect([RECOVERY_BATCH_SIZE, RECOVERY_CALL_LIMIT]).toEqual([500, 2000]);
    const webhookId = await hook();
    const total = 20_000;
    await failedDeliveries(webhookId, total);
    // The gateway runs in this process: its heap is this heap. Read as each answer arrives, when the
    // call's rows and the jobs still being queued behind it are held.
    const before = heldHeap();
    let peak = before;
    const answers: Array<{ reenviadas: number; pendientes: number }> = [];
    for (let calls = 0; ; calls++) {
      if (calls > 20) throw new Error('the recovery did not end');
      const res = await recover(webhookId, window());
      expect(res.status).toBe(202);
      answers.push(res.body.data as { reenviadas: number; pendientes: number });
      peak = Math.max(peak, heldHeap());
      if (res.body.data.pendientes === 0) break;
    }
    expect(answers.map((a) => a.reenviadas)).toEqual(Array.from({ length: 10 }, () => RECOVERY_CALL_LIMIT));
    expect(answers.map((a) => a.pendientes)).toEqual([18_000, 16_000, 14_000, 12_000, 10_000, 8_000, 6_000, 4_000, 2_000, 0]);
    expect(answers.reduce((sum, a) => sum + a.reenviadas, 0)).toBe(total);
    expect(await resendsOf(webhookId)).toBe(total);
    expect(await resentTwice(webhookId)).toBe(0);
    // 40 transactions of 500: each batch was written on its own.
    expect(await perTransaction(webhookId)).toEqual(Array.from({ length: 40 }, () => RECOVERY_BATCH_SIZE));
    // One entry in the activity log per call, with its count.
    expect(await recoveryEntries(webhookId)).toEqual(answers.map((a) => a.reenviadas));
    // A generous bound: runs hold about 3.5 MB more. The whole window in one call held 16 MB here,
    // growing with the window, and its one statement ran past DB_STATEMENT_TIMEOUT_MS's 10 s.
    expect((peak - before) / MB).toBeLessThan(100);

    await fx.gw.deps.resendRelay.drain();
    const jobs = (await queue.getJobs(['waiting', 'prioritized', 'delayed'], 0, -1)).filter((j) => j.data.webhookId === webhookId);
    expect(jobs).toHaveLength(total);
    expect(new Set(jobs.map((j) => j.data.deliveryId)).size).toBe(total);
    expect(new Set(jobs.map((j) => j.data.eventId)).size).toBe(total);

    const again = await recover(webhookId, window());
    expect(again.body).toEqual({ success: true, data: { reenviadas: 0, pendientes: 0 } });
    expect(await resendsOf(webhookId)).toBe(total);
  }, 180_000);

  it('a batch that fails is written not at all, the batches before it whole; the next call goes on from there, resending nothing twice', async () => {
    const webhookId = await hook();
    await failedDeliveries(webhookId, 1500);
    // The 1,201st oldest delivery's resend fails: the third batch (1,001-1,500) of the first call.
    const doomed = (
      await fx.pool.query<{ id: string }>(
        'select id from entregas where webhook_id = $1 and not es_reenvio order by created_at, id offset 1200 limit 1',
        [webhookId],
      )
    ).rows[0]!.id;
    await fx.pool.query(`create function svc_test_refuse_resend() returns trigger language plpgsql as $$ begin raise exception 'refused by the test'; end $$`);
    await fx.pool.query(
      `create trigger svc_test_refuse_resend before insert on entregas for each row when (new.reenvio_de = '${doomed}') execute function svc_test_refuse_resend()`,
    );
    try {
      const failed = await recover(webhookId, window());
      expect(failed.status).toBe(500);
      expect(failed.body).toEqual({ success: false, error: { code: 'INTERNAL_ERROR', message: expect.any(String) } });
      expect(await perTransaction(webhookId)).toEqual([500, 500]);
      expect(await count(fx.pool, 'select count(*) n from entregas where reenvio_de = $1', [doomed])).toBe(0);
    } finally {
      await fx.pool.query('drop trigger svc_test_refuse_resend on entregas');
      await fx.pool.query('drop function svc_test_refuse_resend()');
    }
    const rest = await recover(webhookId, window());
    expect(rest.body).toEqual({ success: true, data: { reenviadas: 500, pendientes: 0 } });
    expect(await resendsOf(webhookId)).toBe(1500);
    expect(await resentTwice(webhookId)).toBe(0);
    await fx.gw.deps.resendRelay.drain();
  }, 60_000);

  it('a webhook deactivated between two batches ends the call there: what was resent, what is left; then 409', async () => {
    const webhookId = await hook();
    await failedDeliveries(webhookId, 1200);
    // The first batch's last resend deactivates the webhook in that batch's own transaction.
    const fifth = (
      await fx.pool.query<{ id: string }>('select id from entregas where webhook_id = $1 and not es_reenvio order by created_at, id offset 499 limit 1', [webhookId])
    ).rows[0]!.id;
    await fx.pool.query(
      `create function svc_test_deactivate() returns trigger language plpgsql as $$ begin update webhooks set activo = false where id = new.webhook_id; return new; end $$`,
    );
    await fx.pool.query(`create trigger svc_test_deactivate after insert on entregas for each row when (new.reenvio_de = '${fifth}') execute function svc_test_deactivate()`);
    try {
      const res = await recover(webhookId, window());
      expect(res.status).toBe(202);
      expect(res.body.data).toEqual({ reenviadas: 500, pendientes: 700 });
    } finally {
      await fx.pool.query('drop trigger svc_test_deactivate on entregas');
      await fx.pool.query('drop function svc_test_deactivate()');
    }
    expect(await recoveryEntries(webhookId)).toEqual([500]);
    const refused = await recover(webhookId, window());
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('WEBHOOK_INACTIVE');
    expect(await resendsOf(webhookId)).toBe(500);
    await fx.gw.deps.resendRelay.drain();
  }, 60_000);

  it('counts as left only what a call would resend: not a delivery whose event is gone, nor one already resent by hand', async () => {
    const webhookId = await hook();
    await failedDeliveries(webhookId, 2100);
    const [gone, byHand] = (
      await fx.pool.query<{ id: string; evento_id: string }>(
        'select id, evento_id from entregas where webhook_id = $1 order by created_at desc, id desc limit 2',
        [webhookId],
      )
    ).rows;
    await fx.pool.query('delete from outbox where id = $1', [gone!.evento_id]);
    expect((await fx.gw.http.post(`/api/v1/webhooks/${webhookId}/entregas/${byHand!.id}/reenviar`).set('Authorization', bearer(c.live))).status).toBe(202);
    const first = await recover(webhookId, window());
    expect(first.body.data).toEqual({ reenviadas: 2000, pendientes: 98 });
    const second = await recover(webhookId, window());
    expect(second.body.data).toEqual({ reenviadas: 98, pendientes: 0 });
    expect(await count(fx.pool, 'select count(*) n from entregas where reenvio_de = $1', [gone!.id])).toBe(0);
    expect(await resentTwice(webhookId)).toBe(0);
    // The pool the recovery ran on has the statement_timeout of DB_STATEMENT_TIMEOUT_MS's default.
    expect((await sql<{ t: string }>`select current_setting('statement_timeout') as t`.execute(fx.gw.deps.db)).rows).toEqual([{ t: '10s' }]);
    await fx.gw.deps.resendRelay.drain();
  }, 60_000);
});
