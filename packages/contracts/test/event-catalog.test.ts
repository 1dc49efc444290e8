import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { CATALOG_EVENTS, CATALOG_SCHEMA_DIALECT, EVENT_CATALOG, EVENT_NAMES, eventBodyProblems, SHIPMENT_EVENTS } from '@svc/contracts';

const byName = (evento: string) => EVENT_CATALOG.find((e) => e.evento === evento)!;

describe('the event catalog', () => {
  it('has one item per event name: the shipment events, PING and the two notices, every name a delivery can carry', () => {
    expect(EVENT_CATALOG.map((e) => e.evento)).toEqual([...SHIPMENT_EVENTS, 'PING', 'WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO']);
    expect(EVENT_CATALOG.map((e) => e.evento)).toEqual([...CATALOG_EVENTS]);
    expect(EVENT_NAMES.filter((n) => !(CATALOG_EVENTS as readonly string[]).includes(n))).toEqual([]);
  });

  it('each schema compiles strictly as draft 2020-12, and its example validates against it and no other', () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(ajv);
    for (const e of EVENT_CATALOG) {
      expect(e.descripcion).toMatch(/^[A-ZÁÉÍÓÚ].{10,}\.$/);
      const validate = ajv.compile({ $schema: CATALOG_SCHEMA_DIALECT, ...e.schema });
      expect({ evento: e.evento, valid: validate(e.ejemplo), errors: validate.errors ?? null }).toEqual({ evento: e.evento, valid: true, errors: null });
      for (const other of EVENT_CATALOG.filter((o) => o !== e)) expect({ [other.evento]: validate(other.ejemplo) }).toEqual({ [other.evento]: false });
    }
  });

  it("is exact about data's fields: a field missing, one more, the wrong status or type is refused", () => {
    const entregada = byName('GUIA_ENTREGADA').ejemplo;
    const devolucion = byName('GUIA_DEVOLUCION').ejemplo;
    const fallando = byName('WEBHOOK_FALLANDO').ejemplo;
    const desactivado = byName('WEBHOOK_DESACTIVADO').ejemplo;
    const refused = (body: unknown) => expect(eventBodyProblems(body)).not.toEqual([]);
    expect(eventBodyProblems(entregada)).toEqual([]);
    refused({ ...entregada, data: { numeroGuia: 'SVC1', estado: 'ENTREGADO' } });
    refused({ ...entregada, data: { ...entregada.data, estado: 'EN_RUTA' } });
    refused({ ...entregada, data: { ...entregada.data, motivo: 'x' } });
    refused({ ...entregada, extra: 1 });
    refused({ ...entregada, webhookId: 'not-a-uuid' });
    refused({ ...devolucion, data: { numeroGuia: 'SVC1', estado: 'DEVOLUCION' } });
    refused({ ...byName('PING').ejemplo, data: { numeroGuia: 'SVC1' } });
    refused({ ...fallando, data: { ...fallando.data, motivo: 'GONE' } });
    refused({ ...desactivado, data: { ...desactivado.data, motivo: null } });
    refused({ ...desactivado, data: { ...desactivado.data, webhook: { id: '3f0c1a52-8d4e-4b8a-9a61-2c7d9e0b5f14', url: 'https://x.example' } } });
    expect(eventBodyProblems({ ...entregada, event: 'GUIA_PERDIDA' })).toEqual(['event "GUIA_PERDIDA" is not in the catalog']);
    // GUIA_ACTUALIZADA keeps the shipment's status, whichever it is.
    for (const estado of ['CREADA', 'EN_RUTA']) expect(eventBodyProblems({ ...byName('GUIA_ACTUALIZADA').ejemplo, data: { numeroGuia: 'SVC1', estado } })).toEqual([]);
  });
});
