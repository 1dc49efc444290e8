import { guia } from '../support/shipment-fixtures';
import { call, expect, test } from './fixtures';

test('Sucursales: a branch’s tokens and its webhook, which gets the events of the branch’s shipments', async ({ page, portal }) => {
  const { receiver, stack } = portal;
  const empresa = await portal.company({ nombre: 'Farmacias Unidas', sucursalesHabilitadas: true });
  expect((await portal.admin('POST', `/empresas/${empresa.id}/sucursales`, { nombre: 'Zona 10' })).status).toBe(201);
  expect((await portal.admin('POST', `/empresas/${empresa.id}/sucursales`, { nombre: 'Antigua Guatemala' })).status).toBe(201);
  await portal.enter(page, empresa.id);

  await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Sucursales' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Sucursales' })).toBeVisible();
  const zona10 = page.getByRole('region', { name: 'Zona 10' });
  await expect(page.getByRole('region', { name: 'Antigua Guatemala' })).toBeVisible();
  await zona10.getByRole('button', { name: 'Generar tokens' }).click();
  const live = await zona10.getByRole('textbox', { name: 'Token live' }).inputValue();
  expect(live).toMatch(/^svc_live_/);
  await expect(zona10.getByRole('textbox', { name: 'Token test' })).toHaveValue(/^svc_test_/);
  const who = await call(stack, 'GET', '/api/v1/empresa', live);
  expect(who.body.data.sucursal).toMatchObject({ nombre: 'Zona 10' });

  await zona10.getByRole('button', { name: 'Crear webhook' }).click();
  await zona10.getByLabel('URL').fill(receiver.url('/zona10'));
  await zona10.getByRole('checkbox', { name: 'GUIA_CREADA' }).check();
  await zona10.getByLabel('Descripción').fill('Bodega zona 10');
  await zona10.getByRole('button', { name: 'Crear', exact: true }).click();
  await expect(zona10.getByRole('textbox', { name: 'Secreto' })).toHaveValue(/^whsec_/);
  await expect(zona10.getByRole('row').filter({ hasText: 'Bodega zona 10' })).toContainText('GUIA_CREADA');
  await portal.axe(page, 'Sucursales');
  await portal.docShot(page, 'sucursales');

  // A shipment of the branch reaches the branch's webhook.
  const created = await call(stack, 'POST', '/api/v1/guias', live, guia(7));
  expect(created.status).toBe(201);
  const [got] = await receiver.waitFor(1, 10_000, '/zona10');
  expect(JSON.parse(got!.rawBody.toString('utf8'))).toMatchObject({ event: 'GUIA_CREADA', data: { numeroGuia: created.body.data.numeroGuia } });

  // Regenerating the branch's pair stops the old one.
  await zona10.getByRole('button', { name: 'Regenerar tokens' }).click();
  await page.getByRole('dialog', { name: '¿Regenerar los tokens?' }).getByRole('button', { name: 'Confirmar' }).click();
  await expect(zona10.getByRole('textbox', { name: 'Token live' })).not.toHaveValue(live);
  expect((await call(stack, 'GET', '/api/v1/empresa', live)).status).toBe(401);
  await zona10.getByRole('button', { name: 'Eliminar tokens' }).click();
  await page.getByRole('dialog', { name: '¿Eliminar los tokens?' }).getByRole('button', { name: 'Confirmar' }).click();
  await expect(zona10.getByRole('status').filter({ hasText: 'Tokens eliminados' })).toBeVisible();
  await expect(zona10.getByRole('button', { name: 'Generar tokens' })).toBeVisible();
});

test('a company without branches has no Sucursales in its navigation', async ({ page, portal }) => {
  const empresa = await portal.company({ nombre: 'Sin Sucursales' });
  await portal.enter(page, empresa.id);
  await expect(page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Sucursales' })).toHaveCount(0);
});
