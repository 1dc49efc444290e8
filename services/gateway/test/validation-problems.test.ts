import { bearer, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { createOne } from '../../../test/support/shipment-fixtures';

describe('a body with several problems: every one in one answer', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let token: string;

  beforeAll(async () => {
    fx = await startGatewayFixture('validation-problems');
    ({ gw } = fx);
    token = (await createCompany(gw, { planActivo: true, creditos: 10 })).live;
  });
  afterAll(() => fx?.stop());

  it('lists each problem of a shipment with its path, in the envelope and nothing else', async () => {
    const res = await createOne(gw, token, { destinatario: { nombre: 'Ana', telefono: '' }, paquete: { peso: 'x' }, extra: 1 });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body).sort()).toEqual(['error', 'success']);
    expect(Object.keys(res.body.error).sort()).toEqual(['code', 'message']);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect((res.body.error.message as string).split('; ').sort()).toEqual(
      ['destinatario.direccion is required', 'destinatario.telefono must not be empty', 'extra is not an accepted field', 'paquete.peso must be of type number'].sort(),
    );
  });

  it('lists the problems of a webhook and of a portal body alike', async () => {
    const hook = await gw.http.post('/api/v1/webhooks').set('Authorization', bearer(token)).send({ url: 5, descripcion: 'x'.repeat(201) });
    expect(hook.status).toBe(400);
    expect(hook.body.error.message).toBe('url must be of type string; descripcion must be at most 200 characters');
    const company = await gw.admin('post', '/empresas', { nombre: '', limiteDiario: -1, planActivo: 'si' });
    expect(company.status).toBe(400);
    expect(company.body.error.message.split('; ')).toHaveLength(3);
  });
});
