import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate } from 'react-router';
import { api, type Guia, type Resumen, type SesionEscucha } from '../api';
import { ESTADO_ENTREGA, formatDateTime } from '../format';
import { ActionButton, Alert, DataTable, LoadError, Loading, Page } from '../ui';

/** The two commands of docs/integrators.md's "your first event in a minute", shown as they are typed. */
const LISTEN_COMMAND = 'pnpm svc listen --forward-to http://localhost:4000/hook';
const TRIGGER_COMMAND = 'pnpm svc trigger GUIA_ENTREGADA';

/** A session's list is refreshed this often: its deliveries come from a terminal, not from this page. */
const SESSIONS_REFRESH_MS = 5_000;

/**
 * **Sandbox**: a test shipment moved through its states by hand, so an integrator watches their
 * receiver get every event without writing a line of code; and **Sesiones de escucha**, the open
 * `svc listen` sessions that forward sandbox events to a laptop, with their latest deliveries.
 */
export function SandboxPage() {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const resumen = useQuery({ queryKey: ['resumen'], queryFn: () => api<Resumen>('GET', '/resumen') });
  const list = useQuery({ queryKey: ['sandbox-guias'], queryFn: () => api<{ guias: Guia[]; nextCursor: string | null }>('GET', '/sandbox/guias?limit=20') });
  const create = useMutation({
    mutationFn: () => api<Guia>('POST', '/sandbox/guias'),
    onSuccess: (g) => {
      void queryClient.invalidateQueries({ queryKey: ['sandbox-guias'] });
      void navigate(`/sandbox/${g.numeroGuia}`);
    },
  });
  const sessions = useQuery({ queryKey: ['sandbox-escuchas'], queryFn: () => api<SesionEscucha[]>('GET', '/sandbox/escuchas'), refetchInterval: SESSIONS_REFRESH_MS });
  const testHooks = resumen.data?.webhooksActivos.test;
  return (
    <Page title="Sandbox">
      <ol className="steps">
        <li>
          Registre un webhook en <Link to="/webhooks?modo=test">Webhooks, modo Sandbox</Link>
          {testHooks !== undefined && (testHooks === 0 ? ': todavía no tiene ninguno activo.' : `: tiene ${testHooks} activo${testHooks === 1 ? '' : 's'}.`)}
        </li>
        <li>Cree una guía de prueba: no consume créditos ni el límite diario.</li>
        <li>Muévala de estado con los botones de cada evento y vea cada entrega llegar a su webhook.</li>
      </ol>
      <div className="actions">
        <ActionButton busy={create.isPending} label="Crear guía de prueba" busyLabel="Creando guía…" onClick={() => create.mutate()} />
      </div>
      <Alert error={create.error} />
      <section className="section" aria-labelledby="sb-guias">
        <h2 id="sb-guias">Guías de prueba recientes</h2>
        {list.isPending ? (
          <Loading what="las guías" />
        ) : list.isError ? (
          <LoadError error={list.error} retry={() => void list.refetch()} />
        ) : list.data.guias.length === 0 ? (
          <p className="empty">Todavía no hay guías de prueba.</p>
        ) : (
          <DataTable label="Guías de prueba" columns={['Guía', 'Estado', 'Creada']}>
            {list.data.guias.map((g) => (
              <tr key={g.numeroGuia}>
                <td>
                  <Link to={`/sandbox/${g.numeroGuia}`}>{g.numeroGuia}</Link>
                </td>
                <td>{g.estado}</td>
                <td>{formatDateTime(g.createdAt)}</td>
              </tr>
            ))}
          </DataTable>
        )}
      </section>
      <section className="section" aria-labelledby="sb-escuchas">
        <h2 id="sb-escuchas">Sesiones de escucha</h2>
        <p>
          Sin una dirección HTTPS pública, reciba los eventos de prueba en su máquina: en la raíz del repositorio, con su token de prueba en{' '}
          <code>SVC_TOKEN</code>, abra una sesión y, en otra terminal, mueva una guía de prueba hasta entregada.
        </p>
        <pre className="command">
          <code>{LISTEN_COMMAND}</code>
        </pre>
        <pre className="command">
          <code>{TRIGGER_COMMAND}</code>
        </pre>
        {sessions.isPending ? (
          <Loading what="las sesiones de escucha" />
        ) : sessions.isError ? (
          <LoadError error={sessions.error} retry={() => void sessions.refetch()} />
        ) : sessions.data.length === 0 ? (
          <p className="empty">No hay sesiones de escucha abiertas.</p>
        ) : (
          sessions.data.map((s) => (
            <section key={s.id} className="subsection" aria-label={`Sesión ${s.id}`}>
              <h3>
                Sesión abierta el {formatDateTime(s.createdAt)}
                {s.destino !== null && (
                  <>
                    {' '}
                    hacia <code>{s.destino}</code>
                  </>
                )}
              </h3>
              <p>Eventos: {s.eventos.length === 0 ? 'todos los de envío' : s.eventos.join(', ')}.</p>
              {s.entregas.length === 0 ? (
                <p className="empty">Todavía no ha recibido entregas.</p>
              ) : (
                <DataTable label={`Últimas entregas de la sesión ${s.id}`} columns={['Evento', 'Guía', 'Estado', 'Intentos', 'Código', 'Fecha']}>
                  {s.entregas.map((d) => (
                    <tr key={d.id}>
                      <td>{d.evento}</td>
                      <td>{d.numeroGuia ?? '—'}</td>
                      <td>
                        <span className={`badge badge-${d.estado}`}>{ESTADO_ENTREGA[d.estado]}</span>
                      </td>
                      <td>{d.intentos}</td>
                      <td>{d.intentos === 0 ? '—' : d.statusCode}</td>
                      <td>{formatDateTime(d.fecha)}</td>
                    </tr>
                  ))}
                </DataTable>
              )}
            </section>
          ))
        )}
      </section>
    </Page>
  );
}
