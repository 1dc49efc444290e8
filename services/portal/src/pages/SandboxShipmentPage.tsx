import { useId, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { api, type GuiaSandbox, type WebhookRow } from '../api';
import { formatDateInput, formatDateTime, parseDateInput } from '../format';
import { ActionButton, Alert, ConfirmDialog, DataTable, DateTimeField, LoadError, Loading, Page, Status } from '../ui';
import { DeliveryCells } from './DeliveryCells';

/** A sandbox shipment: its history, a button per event its status allows next, the deliveries its events made. */
export function SandboxShipmentPage() {
  const { numeroGuia = '' } = useParams();
  const queryClient = useQueryClient();
  const id = useId();
  const [asking, setAsking] = useState<'GUIA_DEVOLUCION' | 'GUIA_ENTREGADA' | null>(null);
  const [motivo, setMotivo] = useState('');
  const [entrega, setEntrega] = useState('');
  const [outcome, setOutcome] = useState('');
  const [entregaChecked, setEntregaChecked] = useState(false);
  // The sandbox's webhooks: whether the shipment's events are to be delivered at all.
  const hooks = useQuery({ queryKey: ['webhooks', 'test'], queryFn: () => api<WebhookRow[]>('GET', '/webhooks?modo=test') });
  const q = useQuery({
    queryKey: ['sandbox-guia', numeroGuia],
    queryFn: () => api<GuiaSandbox>('GET', `/sandbox/guias/${encodeURIComponent(numeroGuia)}`),
    // The deliveries of a move arrive within a second or two: the page follows them closely while
    // one is pending or awaited, and at a walk otherwise.
    refetchInterval: (query) => {
      const g = query.state.data;
      return g && (g.entregas.some((e) => e.estado === 'pendiente') || awaited(g, hooks.data ?? [])) ? 1_000 : 5_000;
    },
  });
  const move = useMutation({
    mutationFn: (body: { evento: string; motivo?: string; fechaEntrega?: string }) =>
      api<{ numeroGuia: string; estado: string }>('POST', `/sandbox/guias/${encodeURIComponent(numeroGuia)}/simular`, body),
    onSuccess: (r, body) => {
      setAsking(null);
      setOutcome(`${body.evento} aplicado: la guía está en ${r.estado}.`);
      void queryClient.invalidateQueries({ queryKey: ['sandbox-guia', numeroGuia] });
      void queryClient.invalidateQueries({ queryKey: ['sandbox-guias'] });
    },
  });
  const press = (evento: string) => {
    move.reset();
    setOutcome('');
    if (evento === 'GUIA_DEVOLUCION') setAsking('GUIA_DEVOLUCION');
    else if (evento === 'GUIA_ENTREGADA') {
      setEntrega(formatDateInput(new Date()));
      setEntregaChecked(false);
      setAsking('GUIA_ENTREGADA');
    } else move.mutate({ evento });
  };
  return (
    <Page title={`Guía de prueba ${numeroGuia}`}>
      <p>
        <Link to="/sandbox">← Sandbox</Link>
      </p>
      {q.isPending ? (
        <Loading what="la guía" />
      ) : q.isError ? (
        <LoadError error={q.error} retry={() => void q.refetch()} />
      ) : (
        <>
          <p>
            Estado actual: <strong data-testid="estado-guia">{q.data.estado}</strong>
          </p>
          <section className="section" aria-labelledby={`${id}-ev`}>
            <h2 id={`${id}-ev`}>Mover la guía</h2>
            {q.data.eventosPermitidos.length === 0 ? (
              <p>La guía llegó a un estado final: no admite más eventos.</p>
            ) : (
              <div className="actions wrap">
                {q.data.eventosPermitidos.map((evento) => (
                  <ActionButton
                    key={evento}
                    busy={move.isPending && move.variables?.evento === evento}
                    label={evento}
                    busyLabel={`${evento}…`}
                    disabled={move.isPending}
                    onClick={() => press(evento)}
                    variant="secondary"
                  />
                ))}
              </div>
            )}
            {asking === null && <Alert error={move.error} />}
            {outcome && <Status>{outcome}</Status>}
          </section>
          <section className="section" aria-labelledby={`${id}-hist`}>
            <h2 id={`${id}-hist`}>Historial</h2>
            <ol className="history">
              {q.data.historial.map((h, i) => (
                <li key={i}>
                  <strong>{h.evento}</strong> → {h.estado} · {formatDateTime(h.fecha)}
                  {h.motivo ? ` · motivo: ${h.motivo}` : ''}
                </li>
              ))}
            </ol>
          </section>
          <section className="section" aria-labelledby={`${id}-ent`}>
            <h2 id={`${id}-ent`}>Entregas a sus webhooks de Sandbox</h2>
            {q.data.entregas.length > 0 ? (
              <DataTable label="Entregas de la guía de prueba" columns={['Evento', 'Webhook', 'Estado', 'Intentos', 'Código', 'Fecha']}>
                {q.data.entregas.map((d) => (
                  <tr key={d.id}>
                    <td>
                      <Link to={`/webhooks/${d.webhookId}/entregas/${d.id}?modo=test`}>{d.evento}</Link>
                    </td>
                    <td className="url">{d.url}</td>
                    <DeliveryCells d={d} />
                  </tr>
                ))}
              </DataTable>
            ) : hooks.isPending ? (
              <Loading what="las entregas" />
            ) : hooks.isError ? (
              <LoadError error={hooks.error} retry={() => void hooks.refetch()} />
            ) : awaited(q.data, hooks.data) ? (
              <p className="loading" role="status">
                Esperando las entregas a sus webhooks de Sandbox: llegan en unos segundos…
              </p>
            ) : hooks.data.some((w) => w.activo) ? (
              <p className="empty">Ninguna entrega todavía: sus webhooks de Sandbox activos recibirán los próximos eventos de esta guía a los que estén suscritos.</p>
            ) : (
              <p className="empty">
                Ninguna entrega todavía. {''}
                <Link to="/webhooks?modo=test">Registre un webhook de Sandbox</Link> para recibir los eventos.
              </p>
            )}
          </section>
        </>
      )}
      <ConfirmDialog
        open={asking === 'GUIA_DEVOLUCION'}
        title="GUIA_DEVOLUCION: motivo de la devolución"
        onConfirm={() => move.mutate({ evento: 'GUIA_DEVOLUCION', motivo })}
        onCancel={() => setAsking(null)}
        busy={move.isPending}
        error={move.error}
      >
        <div className="field">
          <label htmlFor={`${id}-motivo`}>Motivo</label>
          <input id={`${id}-motivo`} type="text" required maxLength={500} value={motivo} onChange={(e) => setMotivo(e.target.value)} />
        </div>
      </ConfirmDialog>
      <ConfirmDialog
        open={asking === 'GUIA_ENTREGADA'}
        title="GUIA_ENTREGADA: fecha de entrega"
        onConfirm={() => {
          // Empty: the API takes now. Anything else must read as a date.
          setEntregaChecked(true);
          const at = parseDateInput(entrega);
          if (entrega.trim() === '') move.mutate({ evento: 'GUIA_ENTREGADA' });
          else if (at) move.mutate({ evento: 'GUIA_ENTREGADA', fechaEntrega: at.toISOString() });
        }}
        onCancel={() => setAsking(null)}
        busy={move.isPending}
        error={move.error}
      >
        <DateTimeField label="Fecha de entrega" value={entrega} onChange={setEntrega} showError={entregaChecked} />
      </ConfirmDialog>
    </Page>
  );
}

/** How long after an event the page keeps waiting for its first delivery (they come within seconds). */
const AWAIT_MS = 5 * 60_000;

/**
 * Whether a delivery of the shipment is on its way though none is listed yet: an active sandbox
 * webhook subscribed to one of its recent events (none listed: every event) existed when it happened.
 */
function awaited(g: GuiaSandbox, hooks: WebhookRow[]): boolean {
  if (g.entregas.length > 0) return false;
  return g.historial.some((h) => {
    const at = new Date(h.fecha).getTime();
    if (Date.now() - at > AWAIT_MS) return false;
    return hooks.some((w) => w.activo && (w.eventos.length === 0 || w.eventos.includes(h.evento)) && new Date(w.createdAt).getTime() <= at);
  });
}
