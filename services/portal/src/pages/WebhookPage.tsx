import { useId, useState } from 'react';
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { api, EVENTOS, type EntregasPage, type Modo, type WebhookDetail } from '../api';
import { formatDateInput, formatDateTime, MODO_NOMBRE, parseDateInput } from '../format';
import { ActionButton, Alert, ConfirmDialog, DataTable, DateTimeField, LoadError, Loading, Page, PagedRows, SecretField, Status } from '../ui';
import { DeliveryCells } from './DeliveryCells';
import { WebhookForm, type WebhookFields } from './WebhookForm';
import { HealthSection } from './WebhookHealth';
import { describeEventos } from './WebhookTable';
import { useModo } from './WebhooksPage';

interface Rotated {
  id: string;
  secret: string;
  secretoAnteriorExpiraEn: string | null;
  nota: string;
}

export function WebhookPage() {
  const { id = '' } = useParams();
  const [modo] = useModo();
  const q = useQuery({ queryKey: ['webhook', id, modo], queryFn: () => api<WebhookDetail>('GET', `/webhooks/${id}?modo=${modo}`) });
  if (q.isPending) return <Loading what="el webhook" />;
  if (q.isError) {
    return (
      <Page title="Webhook">
        <LoadError error={q.error} retry={() => void q.refetch()} />
        <p>
          <Link to={`/webhooks${modo === 'test' ? '?modo=test' : ''}`}>Volver a Webhooks</Link>
        </p>
      </Page>
    );
  }
  return <WebhookView w={q.data} modo={modo} />;
}

function WebhookView({ w, modo }: { w: WebhookDetail; modo: Modo }) {
  const queryClient = useQueryClient();
  const base = `/webhooks/${w.id}`;
  const qs = `?modo=${modo}`;
  const [editing, setEditing] = useState(false);
  const [asking, setAsking] = useState<'rotar' | 'desactivar' | null>(null);
  const [hours, setHours] = useState('24');
  const [rotated, setRotated] = useState<Rotated | null>(null);
  const [outcome, setOutcome] = useState('');
  const hoursId = useId();
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: ['webhook', w.id] });
    void queryClient.invalidateQueries({ queryKey: ['webhooks'] });
    void queryClient.invalidateQueries({ queryKey: ['resumen'] });
    void queryClient.invalidateQueries({ queryKey: ['salud', w.id] });
  };
  const clear = () => {
    setOutcome('');
    setRotated(null);
    for (const m of [edit, ping, rotate, toggle]) m.reset();
  };

  const edit = useMutation({
    mutationFn: (b: WebhookFields) => api<WebhookDetail>('PATCH', `${base}${qs}`, b),
    onSuccess: () => {
      setEditing(false);
      setOutcome('Cambios guardados.');
      refresh();
    },
  });
  const ping = useMutation({
    mutationFn: () => api<{ exitoso: boolean; statusCode: number; durationMs: number }>('POST', `${base}/test${qs}`),
    onSuccess: (r) => {
      setOutcome(`Resultado del PING: ${r.exitoso ? 'exitoso' : 'fallido'} · código ${r.statusCode} · ${r.durationMs} ms`);
      void queryClient.invalidateQueries({ queryKey: ['entregas', w.id] });
      refresh();
    },
  });
  const rotate = useMutation({
    mutationFn: (solaparHoras: number) => api<Rotated>('POST', `${base}/secreto${qs}`, { solaparHoras }),
    onSuccess: (r) => {
      setAsking(null);
      setRotated(r);
      setOutcome(r.secretoAnteriorExpiraEn ? `Secreto rotado. El anterior sigue firmando hasta ${formatDateTime(r.secretoAnteriorExpiraEn)}.` : 'Secreto rotado. El anterior ya no firma.');
    },
  });
  const toggle = useMutation({
    mutationFn: (activo: boolean) => (activo ? api<WebhookDetail>('PATCH', `${base}${qs}`, { activo: true }) : api('DELETE', `${base}${qs}`)),
    onSuccess: (_r, activo) => {
      setAsking(null);
      setOutcome(activo ? 'Webhook reactivado.' : 'Webhook desactivado: ya no recibe eventos.');
      refresh();
    },
  });
  const hoursValue = Number(hours);
  const hoursOk = /^\d{1,2}$/.test(hours) && hoursValue >= 0 && hoursValue <= 72;

  return (
    <Page title={w.url}>
      <p>
        <Link to={`/webhooks${modo === 'test' ? '?modo=test' : ''}`}>← Webhooks de {MODO_NOMBRE[modo]}</Link>
      </p>
      <dl className="facts">
        <dt>Modo</dt>
        <dd>{MODO_NOMBRE[modo]}</dd>
        <dt>Estado</dt>
        <dd>
          <span className={`badge ${w.activo ? 'badge-ok' : 'badge-off'}`}>{w.activo ? 'Activo' : 'Inactivo'}</span>
        </dd>
        <dt>Eventos</dt>
        <dd>{describeEventos(w.eventos)}</dd>
        <dt>Descripción</dt>
        <dd>{w.descripcion ?? '—'}</dd>
        <dt>Creado</dt>
        <dd>{formatDateTime(w.createdAt)}</dd>
      </dl>
      <div className="actions">
        <button
          type="button"
          className="btn btn-secondary"
          onClick={() => {
            clear();
            setEditing(true);
          }}
          disabled={editing}
        >
          Editar
        </button>
        <ActionButton
          busy={ping.isPending}
          label="Enviar PING"
          busyLabel="Enviando PING…"
          onClick={() => {
            clear();
            ping.mutate();
          }}
          variant="secondary"
        />
        <button
          type="button"
          className="btn btn-secondary"
          onClick={() => {
            clear();
            setAsking('rotar');
          }}
        >
          Rotar secreto
        </button>
        {w.activo ? (
          <button
            type="button"
            className="btn btn-danger"
            onClick={() => {
              clear();
              setAsking('desactivar');
            }}
          >
            Desactivar
          </button>
        ) : (
          <ActionButton
            busy={toggle.isPending}
            label="Reactivar"
            busyLabel="Reactivando…"
            onClick={() => {
              clear();
              toggle.mutate(true);
            }}
          />
        )}
      </div>
      {editing && (
        <WebhookForm
          initial={{ url: w.url, eventos: w.eventos, descripcion: w.descripcion }}
          submitLabel="Guardar"
          busy={edit.isPending}
          error={edit.error}
          onSubmit={(b) => edit.mutate(b)}
          onCancel={() => setEditing(false)}
        />
      )}
      {asking === null && <Alert error={ping.error ?? toggle.error ?? rotate.error} />}
      {outcome && <Status>{outcome}</Status>}
      {rotated && (
        <div className="shown-once">
          <p className="warn">{rotated.nota}</p>
          <SecretField label="Secreto" value={rotated.secret} />
        </div>
      )}
      <ConfirmDialog
        open={asking === 'rotar'}
        title="Rotar el secreto"
        onConfirm={() => hoursOk && rotate.mutate(hoursValue)}
        onCancel={() => setAsking(null)}
        busy={rotate.isPending}
        error={rotate.error}
      >
        <p>Se emitirá un secreto nuevo, que se muestra una sola vez. Durante el solapamiento cada entrega lleva también la firma con el secreto anterior.</p>
        <div className="field">
          <label htmlFor={hoursId}>Horas de solapamiento</label>
          <input id={hoursId} type="number" min={0} max={72} step={1} required value={hours} onChange={(e) => setHours(e.target.value)} aria-describedby={`${hoursId}-hint`} />
          <p id={`${hoursId}-hint`} className="hint">
            De 0 a 72 horas (0: el secreto anterior deja de firmar de inmediato).
          </p>
          {!hoursOk && (
            <p role="alert" className="alert">
              Indique un número entero de horas de 0 a 72.
            </p>
          )}
        </div>
      </ConfirmDialog>
      <ConfirmDialog
        open={asking === 'desactivar'}
        title="¿Desactivar el webhook?"
        onConfirm={() => toggle.mutate(false)}
        onCancel={() => setAsking(null)}
        busy={toggle.isPending}
        error={toggle.error}
      >
        <p>Dejará de recibir eventos. Su historial se conserva y puede reactivarlo después.</p>
      </ConfirmDialog>
      <HealthSection webhookId={w.id} modo={modo} />
      <DeliveryLog webhookId={w.id} modo={modo} />
    </Page>
  );
}

interface Filters {
  estado: string;
  evento: string;
  desde: string;
  hasta: string;
}

function queryString(f: Filters, modo: Modo, cursor: string | null): string {
  const p = new URLSearchParams({ modo, limit: '20' });
  if (f.estado) p.set('estado', f.estado);
  if (f.evento) p.set('evento', f.evento);
  // A date still being typed filters nothing until it reads as one.
  const desde = parseDateInput(f.desde);
  const hasta = parseDateInput(f.hasta);
  if (desde) p.set('desde', desde.toISOString());
  if (hasta) p.set('hasta', hasta.toISOString());
  if (cursor) p.set('cursor', cursor);
  return p.toString();
}

/** A recovery's answer: how many deliveries it resent, how many of the window are left. */
interface Recovered {
  reenviadas: number;
  pendientes: number;
}

function recoveredText({ reenviadas, pendientes }: Recovered): string {
  const sent = reenviadas === 1 ? 'Se reenvió 1 entrega fallida.' : `Se reenviaron ${reenviadas} entregas fallidas.`;
  if (pendientes === 0) return sent;
  return `${sent} ${pendientes === 1 ? 'Queda 1 por reenviar' : `Quedan ${pendientes} por reenviar`}: se reenvían hasta 2000 cada vez.`;
}

/** **Entregas**: the webhook's deliveries, newest first, filtered, a page at a time (**Cargar más**). */
function DeliveryLog({ webhookId, modo }: { webhookId: string; modo: Modo }) {
  const queryClient = useQueryClient();
  const id = useId();
  const [filters, setFilters] = useState<Filters>({ estado: '', evento: '', desde: '', hasta: '' });
  const [recovering, setRecovering] = useState(false);
  const [span, setSpan] = useState({ desde: formatDateInput(new Date(Date.now() - 24 * 3600_000)), hasta: '' });
  const [spanChecked, setSpanChecked] = useState(false);
  // What the recovery of `span` has resent so far (over its calls) and what is left for another call.
  const [recovered, setRecovered] = useState<Recovered | null>(null);
  const log = useInfiniteQuery({
    queryKey: ['entregas', webhookId, modo, filters],
    queryFn: ({ pageParam }) => api<EntregasPage>('GET', `/webhooks/${webhookId}/entregas?${queryString(filters, modo, pageParam)}`),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.nextCursor,
    // While a delivery still has attempts left, the log follows it.
    refetchInterval: (q) => (q.state.data?.pages.some((p) => p.entregas.some((e) => e.estado === 'pendiente')) ? 2_000 : false),
  });
  // One call resends at most 2,000 (the oldest first) and says how many are left: **Continuar** makes
  // the next call over the same window, adding to what the first ones resent.
  const recover = useMutation({
    mutationFn: (_continuing: boolean) => {
      const desde = parseDateInput(span.desde);
      const hasta = parseDateInput(span.hasta);
      return api<Recovered>('POST', `/webhooks/${webhookId}/recuperar?modo=${modo}`, { desde: desde?.toISOString(), ...(hasta ? { hasta: hasta.toISOString() } : {}) });
    },
    onSuccess: (r, continuing) => {
      setRecovering(false);
      setRecovered((before) => ({ reenviadas: (continuing && before ? before.reenviadas : 0) + r.reenviadas, pendientes: r.pendientes }));
      void queryClient.invalidateQueries({ queryKey: ['entregas', webhookId] });
    },
  });
  const set = (k: keyof Filters) => (value: string) => setFilters((f) => ({ ...f, [k]: value }));
  // The window is sent only when it reads as dates: `desde` required, `hasta` empty or a date.
  const spanOk = parseDateInput(span.desde) !== undefined && (span.hasta.trim() === '' || parseDateInput(span.hasta) !== undefined);
  const rows = log.data?.pages.flatMap((p) => p.entregas) ?? [];
  return (
    <section aria-labelledby={`${id}-h`} className="section">
      <div className="section-head">
        <h2 id={`${id}-h`}>Entregas</h2>
        <div className="actions">
          <ActionButton busy={log.isRefetching && !log.isFetchingNextPage} label="Actualizar" busyLabel="Actualizando…" onClick={() => void log.refetch()} variant="secondary" />
          <button
            type="button"
            className="btn btn-secondary"
            onClick={() => {
              recover.reset();
              setRecovered(null);
              setSpanChecked(false);
              setRecovering(true);
            }}
          >
            Recuperar fallidas
          </button>
        </div>
      </div>
      <form className="filters" aria-label="Filtros de entregas" onSubmit={(e) => e.preventDefault()}>
        <div className="field">
          <label htmlFor={`${id}-estado`}>Estado</label>
          <select id={`${id}-estado`} value={filters.estado} onChange={(e) => set('estado')(e.target.value)}>
            <option value="">Todos</option>
            <option value="pendiente">Pendiente</option>
            <option value="exitosa">Exitosa</option>
            <option value="fallida">Fallida</option>
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${id}-evento`}>Evento</label>
          <select id={`${id}-evento`} value={filters.evento} onChange={(e) => set('evento')(e.target.value)}>
            <option value="">Todos</option>
            {[...EVENTOS, 'PING'].map((e) => (
              <option key={e} value={e}>
                {e}
              </option>
            ))}
          </select>
        </div>
        <DateTimeField label="Desde" value={filters.desde} onChange={set('desde')} />
        <DateTimeField label="Hasta" value={filters.hasta} onChange={set('hasta')} />
      </form>
      {recovered && (
        <div className="recovered">
          <Status>{recoveredText(recovered)}</Status>
          {recovered.pendientes > 0 && (
            <ActionButton busy={recover.isPending} label="Continuar" busyLabel="Reenviando…" onClick={() => recover.mutate(true)} variant="secondary" />
          )}
          {!recovering && <Alert error={recover.error} />}
        </div>
      )}
      <PagedRows query={log} count={rows.length} what="las entregas" empty="No hay entregas con estos filtros.">
        <DataTable label="Entregas del webhook" columns={['Evento', 'Guía', 'Estado', 'Intentos', 'Código', 'Fecha']}>
          {rows.map((d) => (
            <tr key={d.id}>
              <td>
                <Link to={`/webhooks/${webhookId}/entregas/${d.id}?modo=${modo}`} aria-label={`${d.evento} ${d.numeroGuia ?? ''} ${formatDateTime(d.createdAt)}`.replace(/\s+/g, ' ')}>
                  {d.evento}
                </Link>
                {d.reenvioDe && <span className="muted"> (reenvío)</span>}
              </td>
              <td>{d.numeroGuia ?? '—'}</td>
              <DeliveryCells d={d} />
            </tr>
          ))}
        </DataTable>
        {log.isError && <Alert error={log.error} />}
      </PagedRows>
      <ConfirmDialog
        open={recovering}
        title="Recuperar entregas fallidas"
        confirmLabel="Recuperar"
        onConfirm={() => {
          setSpanChecked(true);
          if (spanOk) recover.mutate(false);
        }}
        onCancel={() => setRecovering(false)}
        busy={recover.isPending}
        error={recover.error}
      >
        <p>Se reenvían las entregas fallidas creadas en el intervalo (hasta 14 días) que no se hayan reenviado ya, las más antiguas primero y hasta 2000 cada vez.</p>
        <DateTimeField label="Desde" required value={span.desde} onChange={(desde) => setSpan((w) => ({ ...w, desde }))} showError={spanChecked} />
        <DateTimeField label="Hasta" hint="Vacío: hasta ahora." value={span.hasta} onChange={(hasta) => setSpan((w) => ({ ...w, hasta }))} showError={spanChecked} />
      </ConfirmDialog>
    </section>
  );
}
