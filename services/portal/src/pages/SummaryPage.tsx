import { useLayoutEffect, useRef, useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, type DeliveryHour, type Resumen, type WebhookHealth } from '../api';
import { formatDateTime, formatHour, formatNumber, MODO_NOMBRE } from '../format';
import { LoadError, Loading, Page } from '../ui';

const PLAN: Record<string, string> = { APROBADA: 'Plan personalizado aprobado (no consume créditos)', PENDIENTE: 'Plan personalizado pendiente de aprobación', RECHAZADA: 'Plan personalizado rechazado' };

/** Why a webhook is listed under Webhooks con problemas, in a few words. */
function problemOf(s: WebhookHealth): string {
  if (s.desactivacion) {
    const why = s.desactivacion.motivo === 'GONE' ? 'el endpoint respondió 410 Gone' : 'fallas continuas';
    return `desactivado por la plataforma el ${formatDateTime(s.desactivacion.fecha)} (${why})`;
  }
  const count = s.fallasConsecutivas === 1 ? '1 entrega fallida' : `${formatNumber(s.fallasConsecutivas)} entregas fallidas seguidas`;
  return `${count}${s.desde ? ` desde ${formatDateTime(s.desde)}` : ''}`;
}

export function SummaryPage() {
  const q = useQuery({ queryKey: ['resumen'], queryFn: () => api<Resumen>('GET', '/resumen'), refetchInterval: 30_000 });
  return (
    <Page title="Resumen">
      {q.isPending ? (
        <Loading what="el resumen" />
      ) : q.isError ? (
        <LoadError error={q.error} retry={() => void q.refetch()} />
      ) : (
        <SummaryBody r={q.data} />
      )}
    </Page>
  );
}

function SummaryBody({ r }: { r: Resumen }) {
  const e = r.empresa;
  const live = r.entregas.porHora.live;
  const test = r.entregas.porHora.test;
  const sum = (xs: DeliveryHour[], k: 'exitosas' | 'fallidas') => xs.reduce((a, x) => a + x[k], 0);
  const plan = e.planPersonalizado ? PLAN[e.planPersonalizado] : e.planActivo ? 'Plan activo' : 'Sin plan activo';
  return (
    <>
      <div className="cards">
        <section className="card" aria-labelledby="r-empresa">
          <h2 id="r-empresa">Empresa</h2>
          <p className={e.verificada ? 'ok' : 'warn'}>{e.verificada ? 'Empresa verificada' : 'Empresa no verificada: no puede generar tokens todavía'}</p>
          <p>{plan}</p>
          <p>
            Créditos: <strong>{formatNumber(e.creditos)}</strong>
          </p>
        </section>
        <section className="card" aria-labelledby="r-guias">
          <h2 id="r-guias">Guías de hoy</h2>
          <p>
            <strong>{formatNumber(e.guiasHoy)}</strong> de {formatNumber(e.limiteDiario)} guías en producción
          </p>
          <meter min={0} max={Math.max(1, e.limiteDiario)} value={e.guiasHoy} aria-label="Guías de hoy sobre el límite diario" />
          <p className="muted">El límite se reinicia a medianoche de Guatemala: {formatDateTime(r.reiniciaEn)}.</p>
        </section>
        <section className="card" aria-labelledby="r-webhooks">
          <h2 id="r-webhooks">Webhooks activos</h2>
          <p>
            Producción: <strong>{r.webhooksActivos.live}</strong> · Sandbox: <strong>{r.webhooksActivos.test}</strong>
          </p>
          <p>
            <Link to="/webhooks">Administrar webhooks</Link>
          </p>
        </section>
      </div>
      {r.webhooksConProblemas.length > 0 && (
        <section aria-labelledby="r-problemas" className="section">
          <h2 id="r-problemas">Webhooks con problemas</h2>
          <ul className="problem-list">
            {r.webhooksConProblemas.map((w) => (
              <li key={w.id}>
                <Link to={`/webhooks/${w.id}?modo=${w.modo}`}>{w.descripcion ? `${w.descripcion} · ${w.url}` : w.url}</Link>{' '}
                <span className={`badge ${w.salud.estado === 'desactivado' ? 'badge-off' : 'badge-fallida'}`}>{w.salud.estado === 'desactivado' ? 'Desactivado' : 'Fallando'}</span>{' '}
                <span className="muted">
                  {MODO_NOMBRE[w.modo]} · {problemOf(w.salud)}
                </span>
              </li>
            ))}
          </ul>
        </section>
      )}
      <section aria-labelledby="r-entregas" className="section">
        <h2 id="r-entregas">Entregas de las últimas 24 horas</h2>
        <p>
          Producción: <strong>{formatNumber(sum(live, 'exitosas'))}</strong> exitosas y <strong>{formatNumber(sum(live, 'fallidas'))}</strong> fallidas;{' '}
          <strong>{formatNumber(r.entregas.pendientes.live)}</strong> pendientes ahora.
        </p>
        <DeliveryChart hours={live} />
        <p>
          Sandbox: {formatNumber(sum(test, 'exitosas'))} exitosas, {formatNumber(sum(test, 'fallidas'))} fallidas, {formatNumber(r.entregas.pendientes.test)} pendientes ahora.
        </p>
      </section>
    </>
  );
}

/** Hourly bars of successful and failed deliveries, in plain SVG, with the same numbers as a table. */
function DeliveryChart({ hours }: { hours: DeliveryHour[] }) {
  // Drawn at the width it is shown (one unit a pixel), so its labels are never stretched or squeezed.
  const figure = useRef<HTMLElement>(null);
  const [W, setW] = useState(720);
  useLayoutEffect(() => {
    const el = figure.current;
    if (!el) return;
    const fit = () => setW(Math.max(240, Math.round(el.clientWidth)));
    fit();
    const watch = new ResizeObserver(fit);
    watch.observe(el);
    return () => watch.disconnect();
  }, []);
  const H = 200;
  const pad = { l: 36, b: 28, t: 10, r: 8 };
  const max = Math.max(1, ...hours.map((h) => h.exitosas + h.fallidas));
  const slot = (W - pad.l - pad.r) / Math.max(1, hours.length);
  const y = (v: number) => ((H - pad.t - pad.b) * v) / max;
  const total = hours.reduce((a, h) => a + h.exitosas + h.fallidas, 0);
  return (
    <figure className="chart" ref={figure}>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby="chart-title chart-desc" preserveAspectRatio="none">
        <title id="chart-title">Entregas por hora en producción, últimas 24 horas</title>
        <desc id="chart-desc">
          {total === 0 ? 'Sin entregas en las últimas 24 horas.' : `Barras apiladas por hora: exitosas en verde y fallidas en rojo. Máximo ${max} en una hora.`} La
          tabla siguiente da las cifras.
        </desc>
        <line x1={pad.l} x2={W - pad.r} y1={H - pad.b} y2={H - pad.b} className="axis" />
        <text x={pad.l - 6} y={pad.t + 8} className="tick" textAnchor="end">
          {max}
        </text>
        <text x={pad.l - 6} y={H - pad.b} className="tick" textAnchor="end">
          0
        </text>
        {hours.map((h, i) => {
          const x = pad.l + i * slot + slot * 0.15;
          const w = slot * 0.7;
          const ok = y(h.exitosas);
          const bad = y(h.fallidas);
          return (
            <g key={h.hora}>
              <rect x={x} width={w} y={H - pad.b - ok} height={ok} className="bar-ok" />
              <rect x={x} width={w} y={H - pad.b - ok - bad} height={bad} className="bar-bad" />
              {i % 4 === 0 && (
                <text x={x + w / 2} y={H - 8} className="tick" textAnchor="middle">
                  {formatHour(h.hora)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption className="legend">
        <span className="key key-ok" aria-hidden="true" /> Exitosas <span className="key key-bad" aria-hidden="true" /> Fallidas
      </figcaption>
      <details>
        <summary>Ver las cifras por hora</summary>
        <table className="table compact">
          <caption>Entregas por hora en producción (hora de Guatemala)</caption>
          <thead>
            <tr>
              <th scope="col">Hora</th>
              <th scope="col">Exitosas</th>
              <th scope="col">Fallidas</th>
            </tr>
          </thead>
          <tbody>
            {hours.map((h) => (
              <tr key={h.hora}>
                <th scope="row">{formatDateTime(h.hora)}</th>
                <td>{h.exitosas}</td>
                <td>{h.fallidas}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
