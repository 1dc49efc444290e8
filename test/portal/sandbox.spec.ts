import { expect, test } from './fixtures';

/** The Sandbox walk-through: a test webhook, a test shipment moved through its states, every event watched arriving. */
test('the sandbox walk-through: a test webhook receives every event of a test shipment moved by hand', async ({ page, portal }) => {
  const { receiver } = portal;
  const empresa = await portal.company({ nombre: 'Librería Antigua' });
  await portal.enter(page, empresa.id, 'luis@libreria.gt');
  const navigation = page.getByRole('navigation', { name: 'Secciones' });

  await navigation.getByRole('link', { name: 'Sandbox' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Sandbox' })).toBeVisible();
  await expect(page.getByText('todavía no tiene ninguno activo')).toBeVisible();

  // A webhook of the sandbox.
  await page.getByRole('link', { name: 'Webhooks, modo Sandbox' }).click();
  await expect(page.getByRole('radiogroup', { name: 'Modo' }).getByRole('radio', { name: 'Sandbox' })).toBeChecked();
  await page.getByRole('button', { name: 'Crear webhook' }).click();
  await page.getByLabel('URL').fill(receiver.url('/sandbox'));
  await page.getByRole('button', { name: 'Crear', exact: true }).click();
  await expect(page.getByRole('textbox', { name: 'Secreto' })).toHaveValue(/^whsec_/);
  // Production lists none: the modes are apart.
  await page.getByRole('radio', { name: 'Producción' }).check();
  await expect(page.getByText('No hay webhooks todavía.')).toBeVisible();

  await navigation.getByRole('link', { name: 'Sandbox' }).click();
  await expect(page.getByText('tiene 1 activo')).toBeVisible();
  await portal.axe(page, 'Sandbox');
  await page.getByRole('button', { name: 'Crear guía de prueba' }).click();
  await expect(page.getByRole('heading', { level: 1, name: /^Guía de prueba / })).toBeVisible();
  const numeroGuia = (await page.getByRole('heading', { level: 1 }).textContent())!.replace('Guía de prueba ', '');
  const estado = page.getByTestId('estado-guia');
  await expect(estado).toHaveText('CREADA');

  for (const [evento, next] of [
    ['GUIA_RECOLECTADA', 'RECOLECTADA'],
    ['GUIA_EN_BODEGA', 'EN_BODEGA'],
    ['GUIA_EN_RUTA', 'EN_RUTA'],
  ] as const) {
    await page.getByRole('button', { name: evento, exact: true }).click();
    await expect(estado).toHaveText(next);
  }
  // GUIA_ENTREGADA asks for the delivery time.
  await page.getByRole('button', { name: 'GUIA_ENTREGADA', exact: true }).click();
  const dialog = page.getByRole('dialog', { name: /GUIA_ENTREGADA/ });
  await expect(dialog.getByLabel('Fecha de entrega')).not.toHaveValue('');
  await portal.axe(page, 'Sandbox (fecha de entrega)');
  await dialog.getByRole('button', { name: 'Confirmar' }).click();
  await expect(estado).toHaveText('ENTREGADO');
  await expect(page.getByText('no admite más eventos')).toBeVisible();

  // Every event reached the sandbox webhook, as a test event, in order.
  const received = await receiver.waitFor(5, 15_000, '/sandbox');
  expect(received.map((r) => JSON.parse(r.rawBody.toString('utf8')).event)).toEqual(['GUIA_CREADA', 'GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA']);
  expect(new Set(received.map((r) => r.headers['x-svc-modo']))).toEqual(new Set(['test']));
  expect(received.map((r) => r.headers['x-svc-secuencia'])).toEqual(['1', '2', '3', '4', '5']);
  // ...and the page shows each delivery and its outcome.
  const deliveries = page.getByRole('region', { name: 'Entregas de la guía de prueba' });
  await expect(deliveries.getByRole('row').filter({ hasText: 'Exitosa' })).toHaveCount(5, { timeout: 15_000 });
  await expect(page.getByRole('list').filter({ hasText: 'GUIA_ENTREGADA' })).toBeVisible();
  await portal.axe(page, 'Sandbox (guía)');
  await portal.docShot(page, 'sandbox');

  // A return asks for its reason.
  await page.getByRole('link', { name: '← Sandbox' }).click();
  await expect(page.getByRole('link', { name: numeroGuia })).toBeVisible();
  await page.getByRole('button', { name: 'Crear guía de prueba' }).click();
  await page.getByRole('button', { name: 'GUIA_RECOLECTADA', exact: true }).click();
  await page.getByRole('button', { name: 'GUIA_EN_BODEGA', exact: true }).click();
  await expect(page.getByTestId('estado-guia')).toHaveText('EN_BODEGA');
  await page.getByRole('button', { name: 'GUIA_DEVOLUCION', exact: true }).click();
  const motivo = page.getByRole('dialog', { name: /GUIA_DEVOLUCION/ });
  await motivo.getByLabel('Motivo').fill('Dirección no encontrada');
  await motivo.getByRole('button', { name: 'Confirmar' }).click();
  await expect(page.getByTestId('estado-guia')).toHaveText('DEVOLUCION');
  await expect(page.getByText('motivo: Dirección no encontrada')).toBeVisible();
});
