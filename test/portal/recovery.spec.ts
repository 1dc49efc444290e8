import pg from 'pg';
import { call, expect, test } from './fixtures';

/**
 * **Recuperar fallidas** past one call's bound: a call resends at most 2,000 and says how many are
 * left, and the page offers **Continuar** until none is.
 */
test('Recuperar fallidas: 2,100 failed deliveries, 2,000 at a time, then Continuar for the rest', async ({ page, portal }) => {
  const { stack, receiver } = portal;
  const empresa = await portal.company({ nombre: 'Mensajería Atitlán' });
  const tokens = await portal.admin('POST', `/empresas/${empresa.id}/tokens`);
  expect(tokens.status).toBe(201);
  const url = receiver.url('/recuperadas');
  const hook = await call(stack, 'POST', '/api/v1/webhooks', tokens.body.data.live as string, { url });
  expect(hook.status).toBe(201);
  const webhookId = hook.body.data.id as string;
  // What a receiver's outage two hours ago left: 2,100 failed deliveries of as many events.
  const db = new pg.Client({ connectionString: stack.databaseUrl });
  await db.connect();
  try {
    await db.query(
      `with ev as (
         insert into outbox (id, empresa_id, sucursal_id, evento, data, created_at, enviado_en, repartido_en, secuencia, modo)
         select gen_random_uuid(), $2, null, 'GUIA_CREADA', jsonb_build_object('numeroGuia', 'SVCREC' || lpad(g::text, 6, '0'), 'estado', 'CREADA'),
                now() - interval '2 hours' - g * interval '1 second', now(), now(), 1, 'live'
         from generate_series(1, 2100) g
         returning id, data, created_at
       )
       insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, numero_guia, created_at)
       select gen_random_uuid(), $1, id, 'GUIA_CREADA', 'fallida', false, 503, 3, created_at, data ->> 'numeroGuia', created_at from ev`,
      [webhookId, empresa.id],
    );

    await portal.enter(page, empresa.id);
    await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('link', { name: url }).click();
    await expect(page.getByRole('heading', { level: 1, name: url })).toBeVisible();
    await page.getByRole('button', { name: 'Recuperar fallidas' }).click();
    await page.getByRole('dialog', { name: 'Recuperar entregas fallidas' }).getByRole('button', { name: 'Recuperar' }).click();
    const status = page.getByRole('status').filter({ hasText: 'Se reenviaron' });
    await expect(status).toHaveText('Se reenviaron 2000 entregas fallidas. Quedan 100 por reenviar: se reenvían hasta 2000 cada vez.');
    await portal.axe(page, 'Recuperar fallidas, con pendientes');
    await page.getByRole('button', { name: 'Continuar' }).click();
    await expect(status).toHaveText('Se reenviaron 2100 entregas fallidas.');
    await expect(page.getByRole('button', { name: 'Continuar' })).toHaveCount(0);
    const made = await db.query<{ n: string; twice: string }>(
      `select count(*) n, count(*) - count(distinct reenvio_de) twice from entregas where webhook_id = $1 and es_reenvio`,
      [webhookId],
    );
    expect(made.rows[0]).toEqual({ n: '2100', twice: '0' });
  } finally {
    await db.end();
  }
});
