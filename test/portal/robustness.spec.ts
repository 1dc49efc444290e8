import { gzipSync } from 'node:zlib';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from './fixtures';

test('a refused URL shows why in an alert, with the API’s code, and keeps the form filled', async ({ page, portal }) => {
  const empresa = await portal.company();
  await portal.enter(page, empresa.id);
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('button', { name: 'Crear webhook' }).click();
  await page.getByLabel('URL').fill('https://127.0.0.1/hook');
  await page.getByRole('checkbox', { name: 'GUIA_ENTREGADA' }).check();
  await page.getByLabel('Descripción').fill('Mi ERP');
  await page.getByRole('button', { name: 'Crear', exact: true }).click();
  const alert = page.getByRole('alert');
  await expect(alert).toContainText('INVALID_URL');
  await expect(alert).toContainText('La URL no está permitida');
  // The portal's own words: the API's English message (for integrators) never shows.
  await expect(alert).not.toContainText('url must');
  await expect(page.getByLabel('URL')).toHaveValue('https://127.0.0.1/hook');
  await expect(page.getByLabel('Descripción')).toHaveValue('Mi ERP');
  await expect(page.getByRole('checkbox', { name: 'GUIA_ENTREGADA' })).toBeChecked();
  await portal.axe(page, 'Webhooks (rechazo)');
  await portal.docShot(page, 'rechazo');
  // Corrected, it goes through.
  await page.getByLabel('URL').fill(portal.receiver.url('/ok'));
  await page.getByRole('button', { name: 'Crear', exact: true }).click();
  await expect(page.getByRole('textbox', { name: 'Secreto' })).toBeVisible();
  await expect(page.getByRole('alert')).toHaveCount(0);
});

test('a company that is not verified cannot generate tokens, and is told why', async ({ page, portal }) => {
  const empresa = await portal.company({ verificada: false });
  await portal.enter(page, empresa.id);
  await expect(page.getByText('Empresa no verificada')).toBeVisible();
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Tokens' }).click();
  await expect(page.getByRole('button', { name: 'Generar tokens' })).toBeDisabled();
  await expect(page.getByText(/verificada/)).toBeVisible();
  await portal.axe(page, 'Tokens (no verificada)');
});

test('when the API cannot be reached: a message and Reintentar, never a blank page', async ({ page, portal }) => {
  const empresa = await portal.company();
  await portal.enter(page, empresa.id);
  await page.route('**/portal/v1/resumen', (route) => route.abort('connectionrefused'));
  await page.reload();
  await expect(page.getByRole('alert')).toContainText('No se pudo conectar');
  await expect(page.getByRole('heading', { level: 1, name: 'Resumen' })).toBeVisible();
  await page.unroute('**/portal/v1/resumen');
  await page.getByRole('button', { name: 'Reintentar' }).click();
  await expect(page.getByText('Empresa verificada')).toBeVisible();
  // A 503 of the API: its message, and a way to try again.
  await page.route('**/portal/v1/tokens', (route) =>
    route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ success: false, error: { code: 'SERVICE_UNAVAILABLE', message: 'a backing service is unavailable; retry shortly' } }) }),
  );
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Tokens' }).click();
  await expect(page.getByRole('alert')).toContainText('SERVICE_UNAVAILABLE');
  await expect(page.getByRole('button', { name: 'Reintentar' })).toBeVisible();
  // Everything down, the session included: still a page that says so.
  await page.route('**/portal/v1/**', (route) => route.abort('connectionrefused'));
  await page.reload();
  await expect(page.getByRole('alert')).toContainText('No se pudo conectar');
  await expect(page.getByRole('button', { name: 'Reintentar' })).toBeVisible();
  await portal.axe(page, 'Sin conexión');
});

test('Actividad: a long log a page at a time with Cargar más, and what an empty one says', async ({ page, portal }) => {
  const empresa = await portal.company({ planActivo: true });
  // 55 of the courier's actions (company.created and 54 credits), then the person's session: 56 entries.
  for (let i = 1; i <= 54; i++) expect((await portal.admin('POST', `/empresas/${empresa.id}/creditos`, { cantidad: i })).status).toBe(200);
  await portal.enter(page, empresa.id, 'luis@transportesquetzal.gt');
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Actividad' }).click();
  const entries = page.getByRole('region', { name: 'Actividad' }).getByRole('row').filter({ hasNot: page.getByRole('columnheader') });
  await expect(entries).toHaveCount(50);
  await expect(entries.first()).toContainText('Sesión iniciada');
  await expect(entries.first()).toContainText('luis@transportesquetzal.gt');
  await expect(entries.nth(1)).toContainText('Créditos agregados');
  await expect(entries.nth(1)).toContainText('cantidad: 54 · créditos:');
  await page.getByRole('button', { name: 'Cargar más' }).click();
  await expect(entries).toHaveCount(56);
  await expect(entries.last()).toContainText('Empresa creada');
  await expect(entries.last()).toContainText('Courier (operador)');
  await expect(page.getByRole('button', { name: 'Cargar más' })).toHaveCount(0);
  // A log with nothing in it (a session always starts one, so this is the page's own text, served here).
  await page.route('**/portal/v1/actividad*', (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ success: true, data: { actividades: [], nextCursor: null } }) }),
  );
  await page.reload();
  await expect(page.getByRole('heading', { level: 1, name: 'Actividad' })).toBeVisible();
  await expect(page.getByText('Sin actividad registrada todavía.')).toBeVisible();
  await expect(page.getByRole('region', { name: 'Actividad' })).toHaveCount(0);
  await portal.axe(page, 'Actividad (vacía)');
});

test('keyboard only: skip link, navigation, a confirmation dialog closed with Escape', async ({ page, portal }) => {
  const empresa = await portal.company();
  await portal.enter(page, empresa.id);
  // Each page puts the focus on its heading; backwards from it, through the navigation, is the skip link.
  await expect(page.getByRole('heading', { level: 1, name: 'Resumen' })).toBeFocused();
  const skip = page.getByRole('link', { name: 'Saltar al contenido' });
  for (let i = 0; i < 12 && !(await skip.evaluate((el) => el === document.activeElement)); i++) await page.keyboard.press('Shift+Tab');
  await expect(skip).toBeFocused();
  await expect(skip).toBeInViewport();
  await page.getByRole('link', { name: 'Tokens', exact: true }).focus();
  await page.keyboard.press('Enter');
  await expect(page.getByRole('heading', { level: 1, name: 'Tokens de API' })).toBeFocused();
  // The page's data first, as a person sees it; the focus stays on the heading meanwhile.
  await expect(page.getByRole('button', { name: 'Generar tokens' })).toBeVisible();
  await page.keyboard.press('Tab');
  await expect(page.getByRole('button', { name: 'Generar tokens' })).toBeFocused();
  await page.keyboard.press('Enter');
  await expect(page.getByRole('textbox', { name: 'Token live' })).toHaveValue(/^svc_live_/);
  await page.getByRole('button', { name: 'Eliminar tokens' }).focus();
  await page.keyboard.press('Enter');
  const dialog = page.getByRole('dialog', { name: '¿Eliminar los tokens?' });
  await expect(dialog.getByRole('button', { name: 'Confirmar' })).toBeFocused();
  await page.keyboard.press('Escape');
  await expect(dialog).toBeHidden();
  await expect(page.getByRole('textbox', { name: 'Token live' })).toBeVisible();
});

test('usable at 375 px: no page is wider than the screen', async ({ page, portal }) => {
  const empresa = await portal.company({ sucursalesHabilitadas: true });
  expect((await portal.admin('POST', `/empresas/${empresa.id}/sucursales`, { nombre: 'Xela' })).status).toBe(201);
  await page.setViewportSize({ width: 375, height: 740 });
  await portal.enter(page, empresa.id);
  for (const [link, heading] of [
    ['Resumen', 'Resumen'],
    ['Tokens', 'Tokens de API'],
    ['Webhooks', 'Webhooks'],
    ['Sucursales', 'Sucursales'],
    ['Sandbox', 'Sandbox'],
    ['Actividad', 'Actividad'],
  ] as const) {
    await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: link, exact: true }).click();
    await expect(page.getByRole('heading', { level: 1, name: heading })).toBeVisible();
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect({ page: heading, width }).toEqual({ page: heading, width: 375 });
    await portal.axe(page, `${heading} (375 px)`);
  }
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Resumen', exact: true }).click();
  await expect(page.getByText('Empresa verificada')).toBeVisible();
  await portal.docShot(page, 'movil');
});

test('the portal’s JavaScript is at most 250 KB gzipped in all', () => {
  const assets = join(__dirname, '../../services/portal/dist/assets');
  const scripts = readdirSync(assets).filter((f) => f.endsWith('.js'));
  const gzipped = scripts.reduce((sum, f) => sum + gzipSync(readFileSync(join(assets, f)), { level: 9 }).length, 0);
  writeFileSync(join(__dirname, 'results', 'bundle.json'), JSON.stringify({ scripts, gzippedBytes: gzipped }, null, 2));
  console.log(`portal: ${scripts.length} script(s), ${(gzipped / 1024).toFixed(1)} KB gzipped (budget 250 KB)`);
  expect(gzipped).toBeLessThanOrEqual(250 * 1024);
});
