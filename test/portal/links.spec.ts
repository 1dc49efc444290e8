import { expect, test } from './fixtures';

const invalid = (page: import('@playwright/test').Page) => expect(page.getByRole('heading', { level: 1, name: 'Enlace no válido' })).toBeVisible();

test('a used link shows Enlace no válido', async ({ browser, page, portal }) => {
  const empresa = await portal.company();
  const link = await portal.link(empresa.id);
  await page.goto(link);
  await expect(page.getByRole('heading', { level: 1, name: 'Resumen' })).toBeVisible();
  // The fragment is gone from the address bar and the history.
  expect(new URL(page.url()).hash).toBe('');
  const other = await browser.newContext();
  const second = await other.newPage();
  await second.goto(link);
  await invalid(second);
  await expect(second.getByText('sitio del courier')).toBeVisible();
  await portal.axe(second, 'Enlace no válido');
  await portal.docShot(second, 'enlace-no-valido');
  await other.close();
});

test('an expired link shows Enlace no válido', async ({ page, portal }) => {
  const empresa = await portal.company();
  const link = await portal.link(empresa.id);
  await page.waitForTimeout((portal.stack.linkTtlSeconds + 1) * 1000);
  await page.goto(link);
  await invalid(page);
});

test('a session ended by the operator, or by Cerrar sesión, sends the person to Enlace no válido', async ({ page, portal }) => {
  const empresa = await portal.company();
  await portal.enter(page, empresa.id);
  expect((await portal.admin('DELETE', `/empresas/${empresa.id}/portal`)).body.data.sesionesTerminadas).toBe(1);
  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Tokens' }).click();
  await invalid(page);

  await portal.enter(page, empresa.id);
  await page.getByRole('button', { name: 'Cerrar sesión' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Sesión cerrada' })).toBeVisible();
  await portal.axe(page, 'Sesión cerrada');
  await page.goto(`${portal.stack.baseUrl}/portal/`);
  await invalid(page);
  // A link without its secret opens nothing either.
  await page.goto(`${portal.stack.baseUrl}/portal/entrar`);
  await invalid(page);
});
