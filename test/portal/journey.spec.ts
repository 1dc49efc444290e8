import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { verify } from '@svc/webhook-signature';
import { guia } from '../support/shipment-fixtures';
import { acceptedByStandard } from '../support/standard-webhooks';
import { call, expect, test } from './fixtures';

/**
 * A new integrator's first hour, in the browser: a link from the internal route, tokens, a live webhook
 * on an HTTPS receiver, a PING, a shipment through /api/v1, its delivery in the log with its attempts,
 * a resend, a secret rotation with both signatures arriving, deactivation and reactivation.
 */
test('link → session → tokens → live webhook → PING → shipment → delivery log → resend → rotation → deactivate and reactivate', async ({ browser, page, portal }) => {
  const { receiver, stack } = portal;
  receiver.respond('/hook', { status: 200, body: 'recibido' });
  const empresa = await portal.company({ nombre: 'Transportes Quetzal' });
  // A running browser and a running server, as a person coming from the courier's website meets them:
  // one visit in another context (its own cache) first. The page below still loads everything afresh.
  const warm = await browser.newContext();
  const warmPage = await warm.newPage();
  await warmPage.goto(await portal.link((await portal.company({ nombre: 'Calentamiento' })).id));
  await expect(warmPage.getByText('Empresa verificada')).toBeVisible();
  const coldMs = Math.round(await warmPage.evaluate(() => performance.now()));
  await warm.close();

  // ---- the first page, and how long until it can be used --------------------------------------------
  await page.goto(await portal.link(empresa.id, 'ana@transportesquetzal.gt'));
  await expect(page.getByText('Empresa verificada')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Cerrar sesión' })).toBeEnabled();
  const interactiveMs = Math.round(await page.evaluate(() => performance.now()));
  const nav = await page.evaluate(() => {
    const n = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming | undefined;
    const api = performance
      .getEntriesByType('resource')
      .map((r) => r as PerformanceResourceTiming)
      .filter((r) => r.name.includes('/portal/v1/') || r.name.includes('/assets/'))
      .map((r) => ({ url: new URL(r.name).pathname, start: Math.round(r.startTime), end: Math.round(r.responseEnd) }));
    return n ? { domInteractive: Math.round(n.domInteractive), loadEvent: Math.round(n.loadEventEnd), requests: api } : null;
  });
  writeFileSync(join(__dirname, 'results', 'first-page.json'), JSON.stringify({ interactiveMs, coldBrowserMs: coldMs, ...nav, at: new Date().toISOString() }, null, 2));
  test.info().annotations.push({ type: 'first page interactive (ms)', description: String(interactiveMs) });
  console.log(`portal: the first page (link → session → Resumen with its data) was usable ${interactiveMs} ms after navigation (budget 1000 ms; ${coldMs} ms for the first visit of a browser just started); DOM interactive at ${nav?.domInteractive} ms; ${JSON.stringify(nav?.requests)}`);

  await expect(page.getByRole('heading', { level: 1, name: 'Resumen' })).toBeFocused();
  const navigation = page.getByRole('navigation', { name: 'Secciones' });
  for (const name of ['Resumen', 'Tokens', 'Webhooks', 'Sandbox', 'Actividad']) await expect(navigation.getByRole('link', { name, exact: true })).toBeVisible();
  await expect(navigation.getByRole('link', { name: 'Sucursales' })).toHaveCount(0);
  await expect(page.getByText('Transportes Quetzal')).toBeVisible();
  await expect(page.getByRole('img', { name: /Entregas por hora/ })).toBeVisible();
  await portal.axe(page, 'Resumen');
  await portal.docShot(page, 'resumen');

  // ---- Tokens -------------------------------------------------------------------------------------------
  await navigation.getByRole('link', { name: 'Tokens' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Tokens de API' })).toBeVisible();
  await page.getByRole('button', { name: 'Generar tokens' }).click();
  const liveField = page.getByRole('textbox', { name: 'Token live' });
  await expect(liveField).toHaveValue(/^svc_live_/);
  await expect(page.getByRole('textbox', { name: 'Token test' })).toHaveValue(/^svc_test_/);
  await expect(page.getByText('no se volverán a mostrar')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Copiar' })).toHaveCount(2);
  const firstLive = await liveField.inputValue();
  expect((await call(stack, 'GET', '/api/v1/empresa', firstLive)).status).toBe(200);
  await portal.axe(page, 'Tokens (par nuevo)');
  await portal.docShot(page, 'tokens');

  await page.getByRole('button', { name: 'Regenerar tokens' }).click();
  const confirm = page.getByRole('dialog', { name: '¿Regenerar los tokens?' });
  await expect(confirm).toContainText('deja de funcionar de inmediato');
  await portal.axe(page, 'Tokens (confirmación)');
  await confirm.getByRole('button', { name: 'Confirmar' }).click();
  await expect(confirm).toBeHidden();
  await expect(page.getByRole('status').filter({ hasText: 'Tokens regenerados' })).toBeVisible();
  await expect(liveField).not.toHaveValue(firstLive);
  const live = await liveField.inputValue();
  // The old pair stopped at once; the new one works.
  expect((await call(stack, 'GET', '/api/v1/empresa', firstLive)).status).toBe(401);
  expect((await call(stack, 'GET', '/api/v1/empresa', live)).body.data.id).toBe(empresa.id);

  // ---- Webhooks: a live webhook on the loopback receiver -----------------------------------------------
  await navigation.getByRole('link', { name: 'Webhooks' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Webhooks' })).toBeVisible();
  const modo = page.getByRole('radiogroup', { name: 'Modo' });
  await expect(modo.getByRole('radio', { name: 'Producción' })).toBeChecked();
  await expect(modo.getByRole('radio', { name: 'Sandbox' })).not.toBeChecked();
  await page.getByRole('button', { name: 'Crear webhook' }).click();
  const url = receiver.url('/hook');
  await page.getByLabel('URL').fill(url);
  await page.getByLabel('Descripción').fill('ERP central');
  await portal.axe(page, 'Webhooks (formulario)');
  await page.getByRole('button', { name: 'Crear', exact: true }).click();
  const secretField = page.getByRole('textbox', { name: 'Secreto' });
  await expect(secretField).toHaveValue(/^whsec_/);
  const firstSecret = await secretField.inputValue();
  const table = page.getByRole('table');
  for (const column of ['URL', 'Eventos', 'Descripción', 'Estado', 'Última entrega']) await expect(table.getByRole('columnheader', { name: column, exact: true })).toBeVisible();
  await expect(table.getByRole('row').filter({ hasText: 'ERP central' })).toContainText('Activo');
  await portal.axe(page, 'Webhooks');
  await portal.docShot(page, 'webhooks');

  // ---- the webhook's page: PING ------------------------------------------------------------------------
  await table.getByRole('link', { name: url }).click();
  await expect(page.getByRole('heading', { level: 1, name: url })).toBeVisible();
  await page.getByRole('button', { name: 'Enviar PING' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Resultado del PING' })).toContainText(/exitoso · código 200 · \d+ ms/);
  const [ping] = await receiver.waitFor(1, 5_000, '/hook');
  expect(ping!.headers['x-svc-event']).toBe('PING');
  expect(verify(ping!.rawBody, ping!.headers['x-svc-signature'], firstSecret)).toBe(true);
  await portal.axe(page, 'Webhook');

  // ---- a shipment with the new live token, its delivery in the log ---------------------------------------
  const created = await call(stack, 'POST', '/api/v1/guias', live, guia(1, { referencia: 'PED-1001' }));
  expect(created.status).toBe(201);
  const numeroGuia = created.body.data.numeroGuia as string;
  const received = await receiver.waitFor(2, 10_000, '/hook');
  const delivered = received[1]!;
  expect(JSON.parse(delivered.rawBody.toString('utf8'))).toMatchObject({ event: 'GUIA_CREADA', data: { numeroGuia, estado: 'CREADA' } });
  const log = page.getByRole('region', { name: 'Entregas del webhook' });
  await expect(async () => {
    await page.getByRole('button', { name: 'Actualizar' }).click();
    await expect(log.getByRole('row').filter({ hasText: numeroGuia })).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
  for (const column of ['Evento', 'Guía', 'Estado', 'Intentos', 'Código', 'Fecha']) await expect(log.getByRole('columnheader', { name: column, exact: true })).toBeVisible();
  const row = log.getByRole('row').filter({ hasText: numeroGuia });
  await expect(row).toContainText('Exitosa');
  await expect(row).toContainText('200');
  // Times in Guatemala, with the date.
  await expect(row).toContainText(/\d{2} \w+\.? \d{4},? \d{2}:\d{2}:\d{2}/);
  await portal.docShot(page, 'webhook');

  // ---- its attempts, then Reenviar ---------------------------------------------------------------------
  await row.getByRole('link').click();
  await expect(page.getByRole('heading', { level: 1, name: 'Detalle de la entrega' })).toBeVisible();
  const attempts = page.getByRole('region', { name: 'Intentos de la entrega' });
  await expect(attempts.getByRole('row')).toHaveCount(2);
  await expect(attempts.getByRole('row').nth(1)).toContainText('200');
  await expect(attempts.getByRole('row').nth(1)).toContainText('recibido');
  await portal.axe(page, 'Entrega');
  await portal.docShot(page, 'entrega');
  await page.getByRole('button', { name: 'Reenviar' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Reenviada' })).toBeVisible();
  const resent = (await receiver.waitFor(3, 10_000, '/hook'))[2]!;
  expect(JSON.parse(resent.rawBody.toString('utf8'))).toMatchObject({ event: 'GUIA_CREADA', data: { numeroGuia } });
  // The same event (webhook-id), a new delivery (X-Request-Id).
  expect(resent.headers['webhook-id']).toBe(delivered.headers['webhook-id']);
  expect(resent.headers['x-request-id']).not.toBe(delivered.headers['x-request-id']);
  await page.getByRole('link', { name: 'Ver la entrega nueva' }).click();
  await expect(page.getByText('Reenvío de')).toBeVisible();

  // ---- Rotar secreto: both signatures arrive ---------------------------------------------------------------
  await page.getByRole('link', { name: '← Volver al webhook' }).click();
  await expect(page.getByRole('heading', { level: 1, name: url })).toBeVisible();
  await page.getByRole('button', { name: 'Rotar secreto' }).click();
  const rotate = page.getByRole('dialog', { name: 'Rotar el secreto' });
  await expect(rotate.getByLabel('Horas de solapamiento')).toHaveValue('24');
  await portal.axe(page, 'Webhook (rotar secreto)');
  await rotate.getByRole('button', { name: 'Confirmar' }).click();
  await expect(secretField).toHaveValue(/^whsec_/);
  const newSecret = await secretField.inputValue();
  expect(newSecret).not.toBe(firstSecret);
  await expect(page.getByRole('status').filter({ hasText: 'Secreto rotado' })).toBeVisible();
  await page.getByRole('button', { name: 'Enviar PING' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Resultado del PING' })).toContainText('exitoso');
  const rotatedPing = (await receiver.waitFor(4, 5_000, '/hook'))[3]!;
  expect(verify(rotatedPing.rawBody, rotatedPing.headers['x-svc-signature'], newSecret)).toBe(true);
  expect(verify(rotatedPing.rawBody, rotatedPing.headers['x-svc-signature-anterior'], firstSecret)).toBe(true);
  expect(verify(rotatedPing.rawBody, rotatedPing.headers['x-svc-signature'], firstSecret)).toBe(false);
  expect(String(rotatedPing.headers['webhook-signature']).split(' ')).toHaveLength(2);
  expect(acceptedByStandard(rotatedPing, newSecret)).toBe(true);
  expect(acceptedByStandard(rotatedPing, firstSecret)).toBe(true);

  // ---- Desactivar, then Reactivar ---------------------------------------------------------------------------
  await page.getByRole('button', { name: 'Desactivar' }).click();
  const deactivate = page.getByRole('dialog', { name: '¿Desactivar el webhook?' });
  await deactivate.getByRole('button', { name: 'Confirmar' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Webhook desactivado' })).toBeVisible();
  await expect(page.getByText('Inactivo', { exact: true })).toBeVisible();
  await page.getByRole('button', { name: 'Enviar PING' }).click();
  await expect(page.getByRole('alert')).toContainText('WEBHOOK_INACTIVE');
  const shipmentsBefore = receiver.requestsTo('/hook').length;
  expect((await call(stack, 'POST', '/api/v1/guias', live, guia(2))).status).toBe(201);
  await page.getByRole('button', { name: 'Reactivar' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Webhook reactivado' })).toBeVisible();
  await expect(page.getByText('Activo', { exact: true })).toBeVisible();
  await expect(page.getByRole('button', { name: 'Desactivar' })).toBeVisible();
  // The shipment made while it was inactive did not reach it.
  expect(receiver.requestsTo('/hook').length).toBe(shipmentsBefore);

  // ---- the log's filters, Cargar más, Recuperar fallidas --------------------------------------------------------
  for (let i = 0; i < 20; i++) expect((await call(stack, 'POST', `/api/v1/webhooks/${page.url().split('/webhooks/')[1]!.split('?')[0]}/test`, live)).status).toBe(200);
  await page.getByRole('button', { name: 'Actualizar' }).click();
  await expect(log.getByRole('row')).toHaveCount(21); // a page of 20, and the header
  await page.getByRole('button', { name: 'Cargar más' }).click();
  await expect(log.getByRole('row')).toHaveCount(25); // 20 + the 2 PINGs sent from the page + GUIA_CREADA + its resend, and the header
  await expect(page.getByRole('button', { name: 'Cargar más' })).toHaveCount(0);
  await page.getByLabel('Evento', { exact: true }).selectOption('GUIA_CREADA');
  await expect(log.getByRole('row')).toHaveCount(3);
  await page.getByLabel('Estado', { exact: true }).selectOption('fallida');
  await expect(page.getByText('No hay entregas con estos filtros.')).toBeVisible();
  await page.getByRole('button', { name: 'Recuperar fallidas' }).click();
  const recover = page.getByRole('dialog', { name: 'Recuperar entregas fallidas' });
  await expect(recover.getByLabel('Desde')).not.toHaveValue('');
  await recover.getByRole('button', { name: 'Recuperar' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Se reenviaron 0 entregas fallidas.' })).toBeVisible();

  // ---- Actividad --------------------------------------------------------------------------------------------
  await navigation.getByRole('link', { name: 'Actividad' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Actividad' })).toBeVisible();
  // Everything above, newest first, each once: the person's actions as the link's usuario, the company's
  // creation as the courier's.
  const activity = page.getByRole('region', { name: 'Actividad' });
  for (const column of ['Fecha', 'Acción', 'Usuario', 'Detalle']) await expect(activity.getByRole('columnheader', { name: column, exact: true })).toBeVisible();
  const entries = activity.getByRole('row').filter({ hasNot: page.getByRole('columnheader') });
  const ana = 'ana@transportesquetzal.gt';
  const expected = [
    ['Entregas fallidas recuperadas', ana],
    ['Webhook reactivado', ana],
    ['Webhook desactivado', ana],
    ['Secreto rotado', ana],
    ['Entrega reenviada', ana],
    ['Webhook creado', ana],
    ['Tokens regenerados', ana],
    ['Tokens generados', ana],
    ['Sesión iniciada', ana],
    ['Empresa creada', 'Courier (operador)'],
  ];
  await expect(entries).toHaveCount(expected.length);
  for (const [i, [accion, usuario]] of expected.entries()) {
    await expect(entries.nth(i).getByRole('cell').nth(1)).toHaveText(accion!);
    await expect(entries.nth(i).getByRole('cell').nth(2)).toHaveText(usuario!);
  }
  await expect(entries.nth(0)).toContainText('reenviadas: 0');
  await expect(entries.nth(3)).toContainText('horas de solapamiento: 24');
  await expect(entries.nth(5)).toContainText('modo: Producción');
  // Times in Guatemala, with the date; never a token or a secret.
  await expect(entries.nth(0).getByRole('cell').nth(0)).toHaveText(/\d{2} \w+\.? \d{4},? \d{2}:\d{2}:\d{2}/);
  await expect(activity).not.toContainText(/svc_(live|test)_|whsec_/);
  await expect(page.getByRole('button', { name: 'Cargar más' })).toHaveCount(0);
  await portal.axe(page, 'Actividad');
});
