import { EVENT_CATALOG } from '@svc/contracts';
import { handleEvent, type DeliveryPayload, type SvcEvent, type SvcEventName, type SvcEventOf } from '@svc/webhook-signature';

// The receiver kit's event types, generated from the catalog: a handler is typed by its event's name.
// The type-level lines are checked by `tsc` (the root typecheck includes the tests).

const example = (evento: SvcEventName): DeliveryPayload => EVENT_CATALOG.find((e) => e.evento === evento)!.ejemplo as unknown as DeliveryPayload;

it('calls the handler of the event, with its body typed by the event name', async () => {
  const seen: string[] = [];
  const handled = await handleEvent(example('GUIA_ENTREGADA'), {
    GUIA_ENTREGADA: (e) => {
      // `data.fechaEntrega` is a string here, and `motivo` no field at all.
      const when: string = e.data.fechaEntrega;
      // @ts-expect-error GUIA_ENTREGADA has no motivo
      void e.data.motivo;
      seen.push(`${e.event} ${when}`);
    },
    GUIA_DEVOLUCION: (e) => {
      seen.push(e.data.motivo);
    },
    WEBHOOK_DESACTIVADO: (e) => {
      const motivo: 'FALLAS_CONTINUAS' | 'GONE' = e.data.motivo;
      seen.push(motivo);
    },
  });
  expect(handled).toBe(true);
  expect(seen).toEqual(['GUIA_ENTREGADA 2026-11-23T18:00:00.000Z']);
});

it('answers false for an event without a handler (a newer one too), and awaits an async handler', async () => {
  expect(await handleEvent(example('PING'), {})).toBe(false);
  expect(await handleEvent({ ...example('PING'), event: 'GUIA_DEL_FUTURO' }, { PING: () => undefined })).toBe(false);
  let done = false;
  await handleEvent(example('WEBHOOK_FALLANDO'), {
    WEBHOOK_FALLANDO: async (e) => {
      await new Promise((r) => setTimeout(r, 5));
      const motivo: null = e.data.motivo;
      done = motivo === null && e.data.fallasConsecutivas === 12;
    },
  });
  expect(done).toBe(true);
});

it('a switch on `event` narrows the union, and every catalog event is one of its names', () => {
  const describe = (e: SvcEvent): string => {
    switch (e.event) {
      case 'GUIA_ENTREGADA':
        return e.data.fechaEntrega;
      case 'PING':
        return 'ping';
      default:
        return e.event;
    }
  };
  const names: SvcEventName[] = EVENT_CATALOG.map((e) => e.evento);
  expect(names).toHaveLength(12);
  expect(describe(example('PING') as unknown as SvcEventOf<'PING'>)).toBe('ping');
});
