import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { call, expect, test } from './fixtures';

/**
 * Every page of the portal, at 1280 and at 375 px: nothing wider than the screen, no table cut off on
 * the right, and a picture of each in test/portal/screens/ (git-ignored) to look at.
 */
// Not in results/: Playwright empties that folder at the start of every run.
const SCREENS = join(__dirname, 'screens');
const WIDTHS = [1280, 375] as const;

/** Nothing sticks out: the page is as wide as the screen, and so is every table's region. */
async function fits(page: Page, name: string, width: number): Promise<void> {
  const sizes = await page.evaluate(() => ({
    page: document.documentElement.scrollWidth,
    regions: Array.from(document.querySelectorAll('.table-wrap')).map((r) => ({ label: r.getAttribute('aria-label'), scroll: r.scrollWidth, client: r.clientWidth, right: r.getBoundingClientRect().right })),
  }));
  expect({ name, page: sizes.page }).toEqual({ name, page: width });
  for (const r of sizes.regions) {
    expect({ name, table: r.label, cut: r.scroll > r.client }).toEqual({ name, table: r.label, cut: false });
    expect(r.right, `${name}: ${r.label ?? ''} ends inside the screen`).toBeLessThanOrEqual(width);
  }
}

test('every page at 1280 and 375 px fits the screen, and is pictured', async ({ browser, portal }) => {
  test.setTimeout(180_000);
  mkdirSync(SCREENS, { recursive: true });
  const { receiver, stack } = portal;
  receiver.respond('/pantallas', { status: 200, body: 'recibido' });
  const empresa = await portal.company({ nombre: 'Transportes Quetzal', sucursalesHabilitadas: true });
  expect((await portal.admin('POST', `/empresas/${empresa.id}/sucursales`, { nombre: 'Zona 10' })).status).toBe(201);
  const tokens = await portal.admin('POST', `/empresas/${empresa.id}/tokens`);
  const live = tokens.body.data.live as string;
  const sandboxToken = tokens.body.data.test as string;
  const hook = await call(stack, 'POST', '/api/v1/webhooks', live, {
    url: receiver.url('/pantallas/un-camino-largo-para-ver-una-url-larga'),
    descripcion: 'ERP central de la empresa',
    eventos: ['GUIA_CREADA', 'GUIA_ENTREGADA'],
  });
  expect(hook.status).toBe(201);
  const webhookId = hook.body.data.id as string;
  expect((await call(stack, 'POST', '/api/v1/webhooks', sandboxToken, { url: receiver.url('/pantallas/sandbox') })).status).toBe(201);
  expect((await call(stack, 'POST', `/api/v1/webhooks/${webhookId}/test`, live)).status).toBe(200);

  for (const width of WIDTHS) {
    const context = await browser.newContext({ viewport: { width, height: width === 375 ? 740 : 900 }, locale: 'es-GT', timezoneId: 'America/Guatemala' });
    const page = await context.newPage();
    const shot = async (name: string) => {
      await fits(page, name, width);
      await page.screenshot({ path: join(SCREENS, `${name}-${width}.png`), fullPage: true });
    };
    const go = async (link: string, heading: string) => {
      await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: link, exact: true }).click();
      await expect(page.getByRole('heading', { level: 1, name: heading })).toBeVisible();
    };
    await portal.enter(page, empresa.id);
    await expect(page.getByRole('img', { name: /Entregas por hora/ })).toBeVisible();
    await shot('resumen');
    await go('Tokens', 'Tokens de API');
    await expect(page.getByRole('button', { name: 'Regenerar tokens' })).toBeVisible();
    await shot('tokens');
    await go('Webhooks', 'Webhooks');
    await expect(page.getByRole('table').getByRole('row')).toHaveCount(2);
    await shot('webhooks');
    await page.getByRole('button', { name: 'Crear webhook' }).click();
    await shot('webhooks-formulario');
    await page.getByRole('link', { name: hook.body.data.url }).click();
    await expect(page.getByRole('region', { name: 'Entregas del webhook' }).getByRole('row')).toHaveCount(2);
    await shot('webhook');
    await page.getByRole('button', { name: 'Recuperar fallidas' }).click();
    await shot('webhook-recuperar');
    await page.getByRole('dialog').getByRole('button', { name: 'Cancelar' }).click();
    await page.getByRole('region', { name: 'Entregas del webhook' }).getByRole('link').first().click();
    await expect(page.getByRole('region', { name: 'Intentos de la entrega' }).getByRole('row')).toHaveCount(2);
    await shot('entrega');
    await go('Sucursales', 'Sucursales');
    await expect(page.getByRole('region', { name: 'Zona 10' })).toBeVisible();
    await shot('sucursales');
    await go('Sandbox', 'Sandbox');
    await expect(page.getByText('tiene 1 activo')).toBeVisible();
    await page.getByRole('button', { name: 'Crear guía de prueba' }).click();
    await expect(page.getByRole('region', { name: 'Entregas de la guía de prueba' }).getByRole('row').filter({ hasText: 'Exitosa' })).toHaveCount(1, { timeout: 15_000 });
    await shot('sandbox-guia');
    await go('Sandbox', 'Sandbox');
    await expect(page.getByRole('region', { name: 'Guías de prueba', exact: true })).toBeVisible();
    await shot('sandbox');
    await go('Actividad', 'Actividad');
    await expect(page.getByRole('region', { name: 'Actividad' })).toBeVisible();
    await shot('actividad');
    await page.getByRole('button', { name: 'Cerrar sesión' }).click();
    await expect(page.getByRole('heading', { level: 1, name: 'Sesión cerrada' })).toBeVisible();
    await shot('sesion-cerrada');
    await page.goto(`${stack.baseUrl}/portal/`);
    await expect(page.getByRole('heading', { level: 1, name: 'Enlace no válido' })).toBeVisible();
    await shot('enlace-no-valido');
    await context.close();
  }
});
