import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate } from 'react-router';
import { api, type Guia, type Resumen } from '../api';
import { formatDateTime } from '../format';
import { ActionButton, Alert, DataTable, LoadError, Loading, Page } from '../ui';

/**
 * **Sandbox**: a test shipment moved through its states by hand, so an integrator watches their
 * receiver get every event without writing a line of code.
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
    </Page>
  );
}
