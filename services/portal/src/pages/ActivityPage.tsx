import { useInfiniteQuery, useQueries, useQuery } from '@tanstack/react-query';
import { api, type Actividad, type Sucursal, type WebhookRow } from '../api';
import { formatDateTime, MODO_NOMBRE } from '../format';
import { useSession } from '../session';
import { DataTable, Loading, Page, PagedRows } from '../ui';

/** What each action of the log (the gateway's closed list, `ACTIVITY_ACTIONS`) is called on the page. */
const ACCIONES: Record<string, string> = {
  'company.created': 'Empresa creada',
  'company.changed': 'Empresa modificada',
  'credits.added': 'Créditos agregados',
  'branch.created': 'Sucursal creada',
  'shipment.event': 'Guía actualizada por el courier',
  'tokens.generated': 'Tokens generados',
  'tokens.regenerated': 'Tokens regenerados',
  'tokens.deleted': 'Tokens eliminados',
  'webhook.created': 'Webhook creado',
  'webhook.changed': 'Webhook modificado',
  'webhook.deactivated': 'Webhook desactivado',
  'webhook.reactivated': 'Webhook reactivado',
  'webhook.secret_rotated': 'Secreto rotado',
  'delivery.resent': 'Entrega reenviada',
  'deliveries.recovered': 'Entregas fallidas recuperadas',
  'session.started': 'Sesión iniciada',
};

/** Who did it: the link's `usuario`, or the two names the platform itself writes. */
const QUIEN: Record<string, string> = { operador: 'Courier (operador)', api: 'API (token)' };

/** The names of the detail's fields as the page shows them. */
const CAMPOS: Record<string, string> = {
  modo: 'modo',
  campos: 'campos',
  solaparHoras: 'horas de solapamiento',
  entregaId: 'entrega nueva',
  reenvioDe: 'reenvío de',
  evento: 'evento',
  desde: 'desde',
  hasta: 'hasta',
  reenviadas: 'reenviadas',
  eliminados: 'tokens eliminados',
  nombre: 'nombre',
  cantidad: 'cantidad',
  creditos: 'créditos',
  numeroGuia: 'guía',
  estado: 'estado',
  verificada: 'verificada',
  planActivo: 'plan activo',
  planPersonalizado: 'plan personalizado',
  sucursalesHabilitadas: 'sucursales habilitadas',
  limiteDiario: 'límite diario',
};

function valor(key: string, v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (key === 'modo' && (v === 'live' || v === 'test')) return MODO_NOMBRE[v];
  if ((key === 'desde' || key === 'hasta') && typeof v === 'string') return formatDateTime(v);
  if (typeof v === 'boolean') return v ? 'sí' : 'no';
  if (Array.isArray(v)) return v.map(String).join(', ');
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

/** The names the log's ids stand for: each webhook's URL, each branch's name. */
interface Names {
  webhooks: Map<string, string>;
  branches: Map<string, string>;
}

/**
 * Every webhook the company has (both modes, its branches' too: none is ever deleted) and its branches,
 * from the lists the other pages show, so the log names them. A list that fails leaves its ids as they are.
 */
function useNames(): { names: Names; pending: boolean } {
  const s = useSession();
  const lists = useQueries({
    queries: [
      { queryKey: ['webhooks', 'live'], queryFn: () => api<WebhookRow[]>('GET', '/webhooks?modo=live') },
      { queryKey: ['webhooks', 'test'], queryFn: () => api<WebhookRow[]>('GET', '/webhooks?modo=test') },
    ],
  });
  const branches = useQuery({ queryKey: ['sucursales'], queryFn: () => api<Sucursal[]>('GET', '/sucursales'), enabled: s.empresa.sucursalesHabilitadas });
  const names: Names = { webhooks: new Map(), branches: new Map() };
  for (const list of lists) for (const w of list.data ?? []) names.webhooks.set(w.id, w.url);
  for (const b of branches.data ?? []) {
    names.branches.set(b.id, b.nombre);
    for (const w of b.webhooks) names.webhooks.set(w.id, w.url);
  }
  return { names, pending: lists.some((l) => l.isLoading) || branches.isLoading };
}

/** What the action was about, in words: its branch, its webhook, then its parameters. */
function detalle(a: Actividad, names: Names): string {
  const parts: string[] = [];
  if (a.sucursalId) parts.push(`sucursal ${names.branches.get(a.sucursalId) ?? a.sucursalId}`);
  if (a.webhookId) parts.push(`webhook ${names.webhooks.get(a.webhookId) ?? a.webhookId}`);
  for (const [k, v] of Object.entries(a.detalle ?? {})) parts.push(`${CAMPOS[k] ?? k}: ${valor(k, v)}`);
  return parts.join(' · ') || '—';
}

/** **Actividad**: what was done in the portal, with the API and by the courier for this company, newest first. */
export function ActivityPage() {
  const q = useInfiniteQuery({
    queryKey: ['actividad'],
    queryFn: ({ pageParam }) =>
      api<{ actividades: Actividad[]; nextCursor: string | null }>('GET', `/actividad?limit=50${pageParam ? `&cursor=${encodeURIComponent(pageParam)}` : ''}`),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.nextCursor,
  });
  const { names, pending } = useNames();
  const rows = q.data?.pages.flatMap((p) => p.actividades) ?? [];
  return (
    <Page title="Actividad">
      <p className="lead">Lo que se hizo para su empresa en el portal, con sus tokens de API y por el courier, lo más reciente primero.</p>
      {pending ? (
        <Loading what="la actividad" />
      ) : (
        <PagedRows query={q} count={rows.length} what="la actividad" empty="Sin actividad registrada todavía.">
          <DataTable label="Actividad" columns={['Fecha', 'Acción', 'Usuario', 'Detalle']}>
            {rows.map((a) => (
              <tr key={a.id}>
                <td>{formatDateTime(a.createdAt)}</td>
                <td>{ACCIONES[a.accion] ?? a.accion}</td>
                <td>{QUIEN[a.usuario] ?? a.usuario}</td>
                <td className="url">{detalle(a, names)}</td>
              </tr>
            ))}
          </DataTable>
        </PagedRows>
      )}
    </Page>
  );
}
