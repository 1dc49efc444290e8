import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { api, type Entrega } from '../api';
import { ESTADO_ENTREGA, formatDateTime } from '../format';
import { ActionButton, Alert, DataTable, LoadError, Loading, Page, Status } from '../ui';
import { useModo } from './WebhooksPage';

/** One delivery: every attempt with its reason, and **Reenviar**. */
export function DeliveryPage() {
  const { id = '', entregaId = '' } = useParams();
  const [modo] = useModo();
  const queryClient = useQueryClient();
  const back = `/webhooks/${id}?modo=${modo}`;
  const q = useQuery({
    queryKey: ['entrega', id, entregaId, modo],
    queryFn: () => api<Entrega>('GET', `/webhooks/${id}/entregas/${entregaId}?modo=${modo}`),
    refetchInterval: (query) => (query.state.data?.estado === 'pendiente' ? 2_000 : false),
  });
  const resend = useMutation({
    mutationFn: () => api<Entrega>('POST', `/webhooks/${id}/entregas/${entregaId}/reenviar?modo=${modo}`),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['entregas', id] }),
  });
  return (
    <Page title="Detalle de la entrega">
      <p>
        <Link to={back}>← Volver al webhook</Link>
      </p>
      {q.isPending ? (
        <Loading what="la entrega" />
      ) : q.isError ? (
        <LoadError error={q.error} retry={() => void q.refetch()} />
      ) : (
        <>
          <dl className="facts">
            <dt>Evento</dt>
            <dd>{q.data.evento}</dd>
            <dt>Guía</dt>
            <dd>{q.data.numeroGuia ?? '—'}</dd>
            <dt>Estado</dt>
            <dd>
              <span className={`badge badge-${q.data.estado}`}>{ESTADO_ENTREGA[q.data.estado]}</span>
            </dd>
            <dt>Creada</dt>
            <dd>{formatDateTime(q.data.createdAt)}</dd>
            <dt>Id de la entrega (webhookId, X-Request-Id)</dt>
            <dd>
              <code>{q.data.id}</code>
            </dd>
            <dt>Id del evento (webhook-id)</dt>
            <dd>
              <code>{q.data.eventoId}</code>
            </dd>
            {q.data.reenvioDe && (
              <>
                <dt>Reenvío de</dt>
                <dd>
                  <Link to={`/webhooks/${id}/entregas/${q.data.reenvioDe}?modo=${modo}`}>la entrega original</Link>
                </dd>
              </>
            )}
          </dl>
          <h2>Intentos</h2>
          {q.data.intentosDetalle.length === 0 ? (
            <p className="empty">Todavía no se ha hecho ningún intento.</p>
          ) : (
            <DataTable label="Intentos de la entrega" columns={['Intento', 'Fecha', 'Código', 'Duración', 'Error', 'Motivo', 'Respuesta']}>
              {q.data.intentosDetalle.map((a) => (
                <tr key={a.numero}>
                  <td>{a.numero}</td>
                  <td>{formatDateTime(a.fecha)}</td>
                  <td>{a.statusCode}</td>
                  <td>{a.duracionMs} ms</td>
                  <td>{a.error ?? '—'}</td>
                  <td>{a.mensaje ?? '—'}</td>
                  <td>{a.respuesta === null ? '—' : <pre className="excerpt">{a.respuesta.slice(0, 300)}</pre>}</td>
                </tr>
              ))}
            </DataTable>
          )}
          <div className="actions">
            <ActionButton busy={resend.isPending} label="Reenviar" busyLabel="Reenviando…" onClick={() => resend.mutate()} />
          </div>
          <Alert error={resend.error} />
          {resend.data && (
            <Status>
              Reenviada: se creó una entrega nueva.{' '}
              <Link to={`/webhooks/${id}/entregas/${resend.data.id}?modo=${modo}`}>Ver la entrega nueva</Link>
            </Status>
          )}
        </>
      )}
    </Page>
  );
}
