// Registers a webhook and creates a shipment through @svc/client, then reads the shipment's tracking.
// With a sandbox token (svc_test_...) nothing is charged, and the webhook receives the sandbox events.
//
//   SVC_API=http://localhost:3000 SVC_TOKEN=svc_test_... WEBHOOK_URL=https://your.host/hooks/svc \
//     SECRET_FILE=webhook-secret.txt node --import tsx packages/client/examples/create-webhook-and-shipment.ts
//
// The API shows the webhook's secret once: the example writes it to SECRET_FILE (readable by you
// only) for your receiver, and never prints it, so it stays out of terminals and logs.
import { writeFileSync } from 'node:fs';
import { createSvcClient } from '@svc/client';

const { SVC_API = 'http://localhost:3000', SVC_TOKEN = '', WEBHOOK_URL = '', SECRET_FILE = 'webhook-secret.txt' } = process.env;
if (SVC_TOKEN === '' || WEBHOOK_URL === '') {
  console.error('set SVC_TOKEN (a svc_test_... token) and WEBHOOK_URL (your receiver, https://...)');
  process.exit(2);
}

const client = createSvcClient({ baseUrl: SVC_API, token: SVC_TOKEN });

/** The `error` of an answer that is not 2xx: its code and message, the API's envelope. */
function fail(step: string, status: number, error: { error: { code: string; message: string } } | undefined): never {
  console.error(`${step}: ${status} ${error?.error.code ?? ''} ${error?.error.message ?? ''}`);
  process.exit(1);
}

async function main(): Promise<void> {
  const webhook = await client.POST('/api/v1/webhooks', {
    body: { url: WEBHOOK_URL, eventos: ['GUIA_CREADA', 'GUIA_ENTREGADA'], descripcion: 'Ejemplo de @svc/client' },
  });
  if (!webhook.data) fail('webhook', webhook.response.status, webhook.error);
  writeFileSync(SECRET_FILE, `${webhook.data.data.secret}\n`, { mode: 0o600 });
  // Only the id: where the signing value went is the caller's own SECRET_FILE, and nothing of it is logged.
  console.log(`webhook ${webhook.data.data.id} created`);

  const shipment = await client.POST('/api/v1/guias', {
    body: {
      destinatario: { nombre: 'Ana López', telefono: '+502 5555 0101', direccion: '6a Avenida 10-20, Zona 1, Guatemala' },
      paquete: { peso: 1.2 },
      referencia: 'PEDIDO-1001',
    },
    headers: { 'Idempotency-Key': `example-${Date.now()}` },
  });
  if (!shipment.data) fail('shipment', shipment.response.status, shipment.error);
  const { numeroGuia } = shipment.data.data;
  console.log(`shipment ${numeroGuia} estado=${shipment.data.data.estado}`);

  const tracking = await client.GET('/api/v1/guias/{numeroGuia}/tracking', { params: { path: { numeroGuia } } });
  if (!tracking.data) fail('tracking', tracking.response.status, tracking.error);
  console.log(`tracking ${numeroGuia} historial=${tracking.data.data.historial.map((h) => h.evento).join(',')}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
