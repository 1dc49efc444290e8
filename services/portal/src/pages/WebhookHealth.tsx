import { useEffect, useId, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, type Modo, type WebhookHealth, type WebhookHealthDetail } from '../api';
import { formatDateInput, formatDateTime, formatNumber, parseDateInput } from '../format';
import { ActionButton, Alert, ConfirmDialog, DateTimeField, LoadError, Loading, Status } from '../ui';

const ESTADO: Record<WebhookHealth['estado'], string> = {
  saludable: 'Saludable',
  degradado: 'Degradado',
  fallando: 'Fallando',
  desactivado: 'Desactivado',
};

const MOTIVO: Record<'FALLAS_CONTINUAS' | 'GONE', string> = {
  FALLAS_CONTINUAS: 'todas sus entregas fallaron durante demasiado tiempo (fallas continuas)',
  GONE: 'el endpoint respondió 410 Gone: indicó que ya no existe',
};

const POR: Record<'sistema' | 'empresa' | 'operador', string> = { sistema: 'la plataforma', empresa: 'la empresa', operador: 'el courier' };

/** The webhooks table's **Estado**: `Activo`, `Fallando` or `Desactivado` (portal.md, Endpoint health). */
export function EstadoBadge({ salud }: { salud: WebhookHealth }) {
  if (salud.estado === 'desactivado') return <span className="badge badge-off">Desactivado</span>;
  if (salud.estado === 'fallando') return <span className="badge badge-fallida">Fallando</span>;
  return <span className="badge badge-ok">Activo</span>;
}

const since = (iso: string | null): string => (iso ? formatDateTime(iso) : '—');

/**
 * **Salud**: the webhook's state, since when, the last success, the consecutive failures and the
 * last 24 hours. After an automatic deactivation, an alert naming why, with **Reactivar** and
 * **Recuperar omitidas** (which reactivates first when needed: only an active webhook receives).
 */
export function HealthSection({ webhookId, modo }: { webhookId: string; modo: Modo }) {
  const queryClient = useQueryClient();
  const id = useId();
  const base = `/webhooks/${webhookId}`;
  const qs = `?modo=${modo}`;
  const q = useQuery({ queryKey: ['salud', webhookId, modo], queryFn: () => api<WebhookHealthDetail>('GET', `${base}/salud${qs}`), refetchInterval: 15_000 });
  // The platform's deactivation this page saw: its alert stays after **Reactivar**, for **Recuperar omitidas**.
  const [seen, setSeen] = useState<WebhookHealth['desactivacion']>(null);
  const [asking, setAsking] = useState(false);
  const [span, setSpan] = useState({ desde: '', hasta: '' });
  const [spanChecked, setSpanChecked] = useState(false);
  const [outcome, setOutcome] = useState('');
  useEffect(() => {
    const d = q.data?.desactivacion;
    if (d?.por === 'sistema') setSeen(d);
  }, [q.data]);
  const auto = q.data?.desactivacion?.por === 'sistema' ? q.data.desactivacion : seen;
  const inactive = q.data?.estado === 'desactivado';
  const refresh = () => {
    for (const key of [['salud', webhookId], ['webhook', webhookId], ['webhooks'], ['resumen'], ['entregas', webhookId]]) void queryClient.invalidateQueries({ queryKey: key });
  };
  const reactivate = useMutation({
    mutationFn: () => api('PATCH', `${base}${qs}`, { activo: true }),
    onSuccess: () => {
      setOutcome('Webhook reactivado: vuelve a recibir eventos. Use «Recuperar omitidas» para recibir los que se perdió.');
      refresh();
    },
  });
  const recover = useMutation({
    mutationFn: async () => {
      const desde = parseDateInput(span.desde);
      const hasta = parseDateInput(span.hasta);
      if (inactive) await api('PATCH', `${base}${qs}`, { activo: true });
      return api<{ reenviadas: number; pendientes: number; omitidas: number }>('POST', `${base}/recuperar${qs}`, {
        desde: desde?.toISOString(),
        ...(hasta ? { hasta: hasta.toISOString() } : {}),
        omitidas: true,
      });
    },
    onSuccess: (r) => {
      setAsking(false);
      const omitted = r.omitidas === 1 ? 'Se entregó 1 evento omitido' : `Se entregaron ${formatNumber(r.omitidas)} eventos omitidos`;
      const resent = r.reenviadas === 0 ? '' : r.reenviadas === 1 ? ' y se reenvió 1 entrega fallida' : ` y se reenviaron ${formatNumber(r.reenviadas)} entregas fallidas`;
      setOutcome(`${omitted}${resent}.${r.omitidas >= 2000 || r.pendientes > 0 ? ' Quedan más: vuelva a recuperar el mismo intervalo.' : ''}`);
      refresh();
    },
  });
  const spanOk = parseDateInput(span.desde) !== undefined && (span.hasta.trim() === '' || parseDateInput(span.hasta) !== undefined);

  return (
    <section aria-labelledby={`${id}-h`} className="section">
      <h2 id={`${id}-h`}>Salud</h2>
      {q.isPending ? (
        <Loading what="la salud del webhook" />
      ) : q.isError ? (
        <LoadError error={q.error} retry={() => void q.refetch()} />
      ) : (
        <dl className="facts">
          <dt>Estado</dt>
          <dd>
            <span className={`badge ${badgeOf(q.data.estado)}`}>{ESTADO[q.data.estado]}</span>
          </dd>
          <dt>Desde</dt>
          <dd>{since(q.data.desde)}</dd>
          <dt>Último éxito</dt>
          <dd>{q.data.ultimoExito ? formatDateTime(q.data.ultimoExito) : 'Ninguno'}</dd>
          <dt>Fallas consecutivas</dt>
          <dd>{formatNumber(q.data.fallasConsecutivas)}</dd>
          <dt>Últimas 24 horas</dt>
          <dd>
            {formatNumber(q.data.ultimas24h.exitosas)} exitosas · {formatNumber(q.data.ultimas24h.fallidas)} fallidas · {formatNumber(q.data.ultimas24h.pendientes)} pendientes
          </dd>
          {q.data.desactivacion && q.data.desactivacion.por !== 'sistema' && (
            <>
              <dt>Desactivado por</dt>
              <dd>
                {POR[q.data.desactivacion.por]} el {formatDateTime(q.data.desactivacion.fecha)}
              </dd>
            </>
          )}
        </dl>
      )}
      {auto && (
        <div role="alert" className="alert health-alert">
          <p>
            <strong>{inactive ? 'La plataforma desactivó este webhook' : 'La plataforma había desactivado este webhook'}</strong> el {formatDateTime(auto.fecha)}:{' '}
            {auto.motivo ? MOTIVO[auto.motivo] : 'sin motivo registrado'}. {inactive ? 'No recibe eventos hasta que lo reactive.' : ''}
          </p>
          <div className="actions">
            {inactive && (
              <ActionButton
                busy={reactivate.isPending}
                label="Reactivar"
                busyLabel="Reactivando…"
                onClick={() => {
                  setOutcome('');
                  reactivate.mutate();
                }}
              />
            )}
            <button
              type="button"
              className="btn btn-secondary"
              onClick={() => {
                setOutcome('');
                recover.reset();
                setSpanChecked(false);
                setSpan({ desde: formatDateInput(new Date(auto.fecha)), hasta: '' });
                setAsking(true);
              }}
            >
              Recuperar omitidas
            </button>
          </div>
        </div>
      )}
      {!asking && <Alert error={reactivate.error ?? recover.error} />}
      {outcome && <Status>{outcome}</Status>}
      <ConfirmDialog
        open={asking}
        title="Recuperar eventos omitidos"
        confirmLabel="Recuperar"
        onConfirm={() => {
          setSpanChecked(true);
          if (spanOk) recover.mutate();
        }}
        onCancel={() => setAsking(false)}
        busy={recover.isPending}
        error={recover.error}
      >
        <p>
          {inactive ? 'El webhook se reactivará y recibirá' : 'El webhook recibirá'} los eventos del intervalo (hasta 14 días) que se perdió mientras estaba desactivado, cada uno una vez y los más antiguos
          primero. También se reenvían sus entregas fallidas del intervalo.
        </p>
        <DateTimeField label="Desde" required value={span.desde} onChange={(desde) => setSpan((w) => ({ ...w, desde }))} showError={spanChecked} />
        <DateTimeField label="Hasta" hint="Vacío: hasta ahora." value={span.hasta} onChange={(hasta) => setSpan((w) => ({ ...w, hasta }))} showError={spanChecked} />
      </ConfirmDialog>
    </section>
  );
}

const badgeOf = (estado: WebhookHealth['estado']): string =>
  estado === 'saludable' ? 'badge-ok' : estado === 'degradado' ? 'badge-pendiente' : estado === 'fallando' ? 'badge-fallida' : 'badge-off';
