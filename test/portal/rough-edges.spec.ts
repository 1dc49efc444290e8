import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { call, expect, test, type Portal } from './fixtures';

const SCREENS = join(__dirname, 'screens');

/** The page's own date format: "01 dic 2026, 15:27" in fields, seconds added where a time is shown. */
const FIELD_DATE = /^\d{2} (ene|feb|mar|abr|may|jun|jul|ago|sep|oct|nov|dic) \d{4}, \d{2}:\d{2}$/;
const SHOWN_DATE = /^\d{2} (ene|feb|mar|abr|may|jun|jul|ago|sep|oct|nov|dic) \d{4}, \d{2}:\d{2}:\d{2}$/;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

/** A company with 10 active live webhooks made with its API token, and an 11th deactivated. */
async function companyAtTheLimit(portal: Portal): Promise<{ empresaId: string; live: string; urls: string[]; inactiveUrl: string }> {
  const empresa = await portal.company({ nombre: 'Distribuidora Petén' });
  const tokens = await portal.admin('POST', `/empresas/${empresa.id}/tokens`);
  expect(tokens.status).toBe(201);
  const live = tokens.body.data.live as string;
  const make = async (path: string) => {
    const res = await call(portal.stack, 'POST', '/api/v1/webhooks', live, { url: portal.receiver.url(path) });
    expect(res.status).toBe(201);
    return res.body.data as { id: string; url: string };
  };
  const inactive = await make('/limite-00');
  expect((await call(portal.stack, 'DELETE', `/api/v1/webhooks/${inactive.id}`, live)).status).toBe(200);
  const urls: string[] = [];
  // Two digits: no URL is the start of another.
  for (let i = 1; i <= 10; i++) urls.push((await make(`/limite-${String(i).padStart(2, '0')}`)).url);
  // The API refuses the 11th active one: the limit the page announces.
  expect((await call(portal.stack, 'POST', '/api/v1/webhooks', live, { url: portal.receiver.url('/limite-11') })).body.error?.code).toBe('LIMIT_EXCEEDED');
  return { empresaId: empresa.id, live, urls, inactiveUrl: inactive.url };
}

test('at 10 active live webhooks: Crear webhook disabled with its reason, a refusal in Spanish with its code, Actividad naming webhooks by URL', async ({ page, portal }) => {
  const { empresaId, urls, inactiveUrl } = await companyAtTheLimit(portal);
  await portal.enter(page, empresaId);
  const navigation = page.getByRole('navigation', { name: 'Secciones' });
  await navigation.getByRole('link', { name: 'Webhooks' }).click();
  await expect(page.getByRole('table').getByRole('row')).toHaveCount(12);
  const create = page.getByRole('button', { name: 'Crear webhook' });
  await expect(create).toBeDisabled();
  await expect(create).toHaveAccessibleDescription('Ya tiene 10 webhooks activos de Producción, el máximo. Desactive uno para crear otro.');
  await expect(page.getByText('Ya tiene 10 webhooks activos de Producción, el máximo.')).toBeVisible();
  await portal.axe(page, 'Webhooks (en el límite)');
  await portal.docShot(page, 'limite');
  // At 375 px the reason stays beside the button, nothing beyond the screen's edge.
  await page.setViewportSize({ width: 375, height: 740 });
  await expect(page.getByText('Ya tiene 10 webhooks activos de Producción, el máximo.')).toBeInViewport();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(375);
  mkdirSync(SCREENS, { recursive: true });
  await page.evaluate(() => window.scrollTo(0, 420));
  await page.screenshot({ path: join(SCREENS, 'webhooks-limite-375.png') });
  await page.setViewportSize({ width: 1280, height: 900 });
  // The sandbox's limit is apart: none there yet.
  await page.getByRole('radio', { name: 'Sandbox' }).check();
  await expect(page.getByText('No hay webhooks todavía.')).toBeVisible();
  await expect(create).toBeEnabled();
  await expect(page.getByText('webhooks activos de', { exact: false })).toHaveCount(0);

  // Reactivating the 11th: the API's refusal, in the portal's words, with its code; never its English.
  await page.getByRole('radio', { name: 'Producción' }).check();
  await page.getByRole('link', { name: inactiveUrl, exact: true }).click();
  await page.getByRole('button', { name: 'Reactivar' }).click();
  const alert = page.getByRole('alert');
  await expect(alert).toHaveText('Se alcanzó el límite de webhooks activos (LIMIT_EXCEEDED). Desactive un webhook de este modo que ya no use y vuelva a intentarlo.');
  await expect(alert).not.toContainText(/\b(company|already|active)\b/);
  // Deactivating one frees a place: back on the list, Crear webhook works again.
  await page.getByRole('link', { name: '← Webhooks de Producción' }).click();
  await page.getByRole('link', { name: urls[0]!, exact: true }).click();
  await page.getByRole('button', { name: 'Desactivar' }).click();
  await page.getByRole('dialog', { name: '¿Desactivar el webhook?' }).getByRole('button', { name: 'Confirmar' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Webhook desactivado' })).toBeVisible();
  await navigation.getByRole('link', { name: 'Webhooks' }).click();
  await expect(create).toBeEnabled();
  await expect(page.getByText('Ya tiene 10 webhooks activos')).toHaveCount(0);

  // Actividad: each webhook by its URL, no id in sight.
  await navigation.getByRole('link', { name: 'Actividad' }).click();
  const entries = page.getByRole('region', { name: 'Actividad' }).getByRole('row').filter({ hasNot: page.getByRole('columnheader') });
  const created = entries.filter({ hasText: 'Webhook creado' });
  await expect(created).toHaveCount(11);
  for (const url of [inactiveUrl, ...urls]) await expect(created.filter({ hasText: `webhook ${url}` })).toHaveCount(1);
  await expect(entries.filter({ hasText: 'Webhook desactivado' }).first()).toContainText(`webhook ${urls[0]!}`);
  for (const text of await entries.allTextContents()) expect(text).not.toMatch(UUID);
});

test('a refused form: the portal’s own Spanish sentence and the code, never the API’s English message', async ({ page, portal }) => {
  const empresa = await portal.company();
  await portal.enter(page, empresa.id);
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('button', { name: 'Crear webhook' }).click();
  await page.getByLabel('URL').fill('https://localhost/hook');
  await page.getByRole('button', { name: 'Crear', exact: true }).click();
  await expect(page.getByRole('alert')).toHaveText(
    'La URL no está permitida (INVALID_URL). Use una dirección https:// pública, sin usuario ni contraseña, que no apunte a localhost ni a una red privada.',
  );
  // A refusal the page never expected (a code of the catalog it does not cause itself) reads the same way.
  await page.route('**/portal/v1/webhooks?modo=live', (route) =>
    route.request().method() === 'POST'
      ? route.fulfill({ status: 429, contentType: 'application/json', headers: { 'Retry-After': '30' }, body: JSON.stringify({ success: false, error: { code: 'RATE_LIMIT_EXCEEDED', message: 'rate limit of 60 requests per minute reached' } }) })
      : route.fallback(),
  );
  await page.getByLabel('URL').fill(portal.receiver.url('/ok'));
  await page.getByRole('button', { name: 'Crear', exact: true }).click();
  await expect(page.getByRole('alert')).toHaveText('Demasiadas peticiones en poco tiempo (RATE_LIMIT_EXCEEDED). Espere 30 segundos y vuelva a intentarlo.');
});

test('dates in the page’s format, on Guatemala’s clock, whatever the browser’s language and zone', async ({ browser, portal }) => {
  const { receiver, stack } = portal;
  const empresa = await portal.company({ nombre: 'Café de Cobán' });
  const tokens = await portal.admin('POST', `/empresas/${empresa.id}/tokens`);
  const live = tokens.body.data.live as string;
  const hook = await call(stack, 'POST', '/api/v1/webhooks', live, { url: receiver.url('/fechas') });
  expect(hook.status).toBe(201);
  expect((await call(stack, 'POST', `/api/v1/webhooks/${hook.body.data.id}/test`, live)).status).toBe(200);
  const context = await browser.newContext({ locale: 'en-US', timezoneId: 'Asia/Tokyo' });
  const page = await context.newPage();
  await portal.enter(page, empresa.id);
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('link', { name: hook.body.data.url }).click();

  // What the API said, on Guatemala's clock (the tz database's, not the page's own arithmetic).
  const created = new Date(hook.body.data.createdAt as string);
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-GB', { timeZone: 'America/Guatemala', day: '2-digit', month: 'numeric', year: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' })
      .formatToParts(created)
      .map((p) => [p.type, p.value]),
  );
  const month = ['ene', 'feb', 'mar', 'abr', 'may', 'jun', 'jul', 'ago', 'sep', 'oct', 'nov', 'dic'][Number(parts.month) - 1];
  await expect(page.locator('dl.facts dt:text-is("Creado") + dd')).toHaveText(`${parts.day} ${month} ${parts.year}, ${parts.hour}:${parts.minute}:${parts.second}`);
  const row = page.getByRole('region', { name: 'Entregas del webhook' }).getByRole('row').filter({ hasText: 'PING' });
  await expect(row.getByRole('cell').last()).toHaveText(SHOWN_DATE);

  // The filters: typed in the same format; what is not a date is said so, and filters nothing.
  const desde = page.getByRole('textbox', { name: 'Desde' });
  await expect(desde).toHaveAccessibleDescription('Como 01 dic 2026, 15:27, hora de Guatemala.');
  await desde.fill('mañana');
  await desde.blur();
  await expect(page.getByText('No es una fecha válida: escríbala como 01 dic 2026, 15:27.')).toBeVisible();
  await expect(row).toBeVisible();
  await desde.fill(`01 ene ${Number(parts.year) + 1}, 00:00`);
  await expect(page.getByText('No hay entregas con estos filtros.')).toBeVisible();
  await desde.fill('');
  await expect(row).toBeVisible();

  // Recuperar fallidas: its window in the same format, 24 hours back by default.
  await page.getByRole('button', { name: 'Recuperar fallidas' }).click();
  const dialog = page.getByRole('dialog', { name: 'Recuperar entregas fallidas' });
  await expect(dialog.getByLabel('Desde')).toHaveValue(FIELD_DATE);
  await dialog.getByLabel('Hasta').fill('ayer');
  await dialog.getByRole('button', { name: 'Recuperar' }).click();
  await expect(dialog.getByText('No es una fecha válida')).toBeVisible();
  await expect(dialog).toBeVisible();
  await dialog.getByLabel('Hasta').fill('');
  await dialog.getByRole('button', { name: 'Recuperar' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Se reenviaron 0 entregas fallidas.' })).toBeVisible();
  await expect(page.locator('body')).not.toContainText(/\b(AM|PM)\b|\d{1,2}\/\d{1,2}\/\d{4}/);
  await context.close();
});

test('a test shipment whose sandbox webhook exists: its page waits for the deliveries, never saying there is none', async ({ page, portal }) => {
  const empresa = await portal.company({ nombre: 'Tejidos Sololá' });
  const tokens = await portal.admin('POST', `/empresas/${empresa.id}/tokens`);
  expect((await call(portal.stack, 'POST', '/api/v1/webhooks', tokens.body.data.test as string, { url: portal.receiver.url('/espera') })).status).toBe(201);
  await portal.enter(page, empresa.id);
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Sandbox' }).click();
  await expect(page.getByText('tiene 1 activo')).toBeVisible();
  // Every text the page shows from here on, as it changes.
  await page.evaluate(() => {
    const seen: string[] = [];
    (window as unknown as { seen: string[] }).seen = seen;
    new MutationObserver(() => seen.push(document.body.innerText)).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  // The shipment's first two answers come before its first delivery is made, as on a busy stack.
  let early = 2;
  await page.route('**/portal/v1/sandbox/guias/SVC*', async (route) => {
    const res = await route.fetch();
    const body = (await res.json()) as { data: { entregas: unknown[] } };
    if (early > 0 && route.request().method() === 'GET') {
      early--;
      body.data.entregas = [];
    }
    await route.fulfill({ response: res, json: body });
  });
  await page.getByRole('button', { name: 'Crear guía de prueba' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Esperando las entregas a sus webhooks de Sandbox' })).toBeVisible();
  await expect(page.getByRole('region', { name: 'Entregas de la guía de prueba' }).getByRole('row').filter({ hasText: 'GUIA_CREADA' })).toBeVisible();
  expect(early).toBe(0);
  const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
  expect(seen.filter((t) => t.includes('Ninguna entrega'))).toEqual([]);
});

test('a test shipment without a sandbox webhook says so, once it knows', async ({ page, portal }) => {
  const empresa = await portal.company({ nombre: 'Cerámica Chinautla' });
  await portal.enter(page, empresa.id);
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Sandbox' }).click();
  await page.getByRole('button', { name: 'Crear guía de prueba' }).click();
  await expect(page.getByText('Ninguna entrega todavía.')).toBeVisible();
  await expect(page.getByRole('link', { name: 'Registre un webhook de Sandbox' })).toBeVisible();
});

test('Avisos de salud: a webhook for GUIA_ENTREGADA and WEBHOOK_DESACTIVADO, both checked when edited, and a list of notices only said so', async ({ page, portal }) => {
  const { stack } = portal;
  const empresa = await portal.company({ nombre: 'Mensajería Atitlán' });
  const tokens = await portal.admin('POST', `/empresas/${empresa.id}/tokens`);
  expect(tokens.status).toBe(201);
  const live = tokens.body.data.live as string;
  await portal.enter(page, empresa.id);
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('button', { name: 'Crear webhook' }).click();
  const form = page.getByRole('form', { name: 'Crear webhook' });
  const eventos = form.getByRole('group', { name: 'Eventos' });
  const avisos = form.getByRole('group', { name: 'Avisos de salud' });
  await expect(eventos).toHaveAccessibleDescription('Si no marca ninguno, ni aquí ni en Avisos de salud, el webhook recibe todos los eventos de guía.');
  await expect(avisos).toHaveAccessibleDescription('Avisos de la plataforma sobre sus otros webhooks. Se reciben solo si los marca.');
  // The notices are in their own group, each described; the shipment events' group has none of them.
  await expect(avisos.getByRole('checkbox')).toHaveCount(2);
  await expect(eventos.getByRole('checkbox', { name: /^WEBHOOK_/ })).toHaveCount(0);
  await expect(avisos.getByRole('checkbox', { name: 'WEBHOOK_FALLANDO', exact: true })).toHaveAccessibleDescription('el webhook lleva fallas continuas (a lo sumo uno por día)');
  const desactivado = avisos.getByRole('checkbox', { name: 'WEBHOOK_DESACTIVADO', exact: true });
  await expect(desactivado).toHaveAccessibleDescription('la plataforma desactivó el webhook');
  const onlyNotices = form.getByText('Este webhook solo recibirá avisos, ningún evento de guía.');
  await expect(onlyNotices).toHaveCount(0);

  // The notice ticked first: alone it leaves no shipment event, and the form says so until one is ticked.
  const url = portal.receiver.url('/avisos');
  await form.getByLabel('URL').fill(url);
  await desactivado.check();
  await expect(onlyNotices).toBeVisible();
  await eventos.getByRole('checkbox', { name: 'GUIA_ENTREGADA', exact: true }).check();
  await expect(onlyNotices).toHaveCount(0);
  await portal.axe(page, 'Webhooks (formulario con avisos)');
  await form.getByRole('button', { name: 'Crear', exact: true }).click();
  await expect(page.getByRole('textbox', { name: 'Secreto' })).toHaveValue(/^whsec_/);
  const row = page.getByRole('table').getByRole('row').filter({ has: page.getByRole('link', { name: url, exact: true }) });
  await expect(row.getByRole('cell').nth(1)).toHaveText('GUIA_ENTREGADA, WEBHOOK_DESACTIVADO');

  // What the API keeps: both names, in the form's order (shipment events first), whatever the ticking order.
  await row.getByRole('link', { name: url, exact: true }).click();
  await expect(page.getByRole('heading', { level: 1, name: url })).toBeVisible();
  const id = UUID.exec(new URL(page.url()).pathname)![0];
  const detail = await call(stack, 'GET', `/api/v1/webhooks/${id}`, live);
  expect(detail.status).toBe(200);
  expect(detail.body.data.eventos).toEqual(['GUIA_ENTREGADA', 'WEBHOOK_DESACTIVADO']);
  await expect(page.locator('dl.facts dt:text-is("Eventos") + dd')).toHaveText('GUIA_ENTREGADA, WEBHOOK_DESACTIVADO');

  // Editar shows what the webhook has; unticking the shipment event leaves notices only, said plainly.
  await page.getByRole('button', { name: 'Editar' }).click();
  const edit = page.getByRole('form', { name: 'Editar webhook' });
  await expect(edit.getByRole('checkbox', { name: 'GUIA_ENTREGADA', exact: true })).toBeChecked();
  await expect(edit.getByRole('checkbox', { name: 'WEBHOOK_DESACTIVADO', exact: true })).toBeChecked();
  await expect(edit.getByRole('checkbox', { name: 'WEBHOOK_FALLANDO', exact: true })).not.toBeChecked();
  await expect(edit.getByRole('checkbox', { checked: true })).toHaveCount(2);
  await edit.getByRole('checkbox', { name: 'GUIA_ENTREGADA', exact: true }).uncheck();
  const editOnlyNotices = edit.getByText('Este webhook solo recibirá avisos, ningún evento de guía.');
  await expect(editOnlyNotices).toBeVisible();
  await portal.axe(page, 'Editar webhook (solo avisos)');
  await page.screenshot({ path: join(__dirname, 'results', 'avisos-editar-1280.png'), fullPage: true });
  // At 375 px the two groups and the sentence stay within the screen.
  await page.setViewportSize({ width: 375, height: 740 });
  await expect(editOnlyNotices).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(375);
  await edit.screenshot({ path: join(__dirname, 'results', 'avisos-editar-375.png') });
  await page.setViewportSize({ width: 1280, height: 900 });
  await edit.getByRole('button', { name: 'Guardar' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Cambios guardados.' })).toBeVisible();
  expect((await call(stack, 'GET', `/api/v1/webhooks/${id}`, live)).body.data.eventos).toEqual(['WEBHOOK_DESACTIVADO']);
  await expect(page.locator('dl.facts dt:text-is("Eventos") + dd')).toHaveText('WEBHOOK_DESACTIVADO');
});
