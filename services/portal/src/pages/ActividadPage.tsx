import { useInfiniteQuery } from '@tanstack/react-query';
import { api, ApiError, type Actividad } from '../api';
import { fecha } from '../format';
import { ActionButton, LoadError, Loading, Page, TableWrap } from '../ui';

const ACCIONES: Record<string, string> = {
  TOKENS_GENERADOS: 'Tokens generados',
  TOKENS_REGENERADOS: 'Tokens regenerados',
  TOKENS_ELIMINADOS: 'Tokens eliminados',
  WEBHOOK_CREADO: 'Webhook creado',
  WEBHOOK_MODIFICADO: 'Webhook modificado',
  WEBHOOK_DESACTIVADO: 'Webhook desactivado',
  WEBHOOK_REACTIVADO: 'Webhook reactivado',
  SECRETO_ROTADO: 'Secreto rotado',
  ENTREGA_REENVIADA: 'Entrega reenviada',
  ENTREGAS_RECUPERADAS: 'Entregas fallidas recuperadas',
  SESION_INICIADA: 'Sesión iniciada',
};

/** **Actividad**: what was done in the portal and by the operator for this company, newest first. */
export function ActividadPage() {
  const q = useInfiniteQuery({
    queryKey: ['actividad'],
    queryFn: ({ pageParam }) =>
      api<{ actividades: Actividad[]; nextCursor: string | null }>('GET', `/actividad?limit=50${pageParam ? `&cursor=${encodeURIComponent(pageParam)}` : ''}`),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.nextCursor,
  });
  const unavailable = q.error instanceof ApiError && q.error.code === 'NOT_FOUND';
  const rows = q.data?.pages.flatMap((p) => p.actividades) ?? [];
  return (
    <Page title="Actividad">
      <p className="lead">Lo que se hizo en el portal y por el courier para su empresa, lo más reciente primero.</p>
      {q.isPending ? (
        <Loading what="la actividad" />
      ) : unavailable ? (
        <p className="empty">El registro de actividad todavía no está disponible en esta instalación.</p>
      ) : q.isError && rows.length === 0 ? (
        <LoadError error={q.error} retry={() => void q.refetch()} />
      ) : rows.length === 0 ? (
        <p className="empty">Sin actividad todavía.</p>
      ) : (
        <>
          <TableWrap label="Actividad">
            <table className="table">
              <thead>
                <tr>
                  <th scope="col">Fecha</th>
                  <th scope="col">Acción</th>
                  <th scope="col">Usuario</th>
                  <th scope="col">Detalle</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((a) => (
                  <tr key={a.id}>
                    <td>{fecha(a.createdAt)}</td>
                    <td>{ACCIONES[a.accion] ?? a.accion}</td>
                    <td>{a.usuario}</td>
                    <td>
                      {[a.sucursalId && `sucursal ${a.sucursalId}`, a.webhookId && `webhook ${a.webhookId}`, a.detalle ? JSON.stringify(a.detalle) : null].filter(Boolean).join(' · ') || '—'}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          {q.hasNextPage && <ActionButton busy={q.isFetchingNextPage} label="Cargar más" busyLabel="Cargando…" onClick={() => void q.fetchNextPage()} variant="secondary" />}
        </>
      )}
    </Page>
  );
}
