import { useQuery } from '@tanstack/react-query';
import { api, type Sucursal } from '../api';
import { useSession } from '../session';
import { LoadError, Loading, Page } from '../ui';
import { CreateWebhook } from './CreateWebhook';
import { TokenPanel } from './TokenPanel';
import { WebhookTable } from './WebhookTable';

/** **Sucursales**: each branch with its token pair and its webhooks (live, as the branch's tokens are). */
export function BranchesPage() {
  const s = useSession();
  const q = useQuery({ queryKey: ['sucursales'], queryFn: () => api<Sucursal[]>('GET', '/sucursales') });
  return (
    <Page title="Sucursales">
      <p className="lead">
        Cada sucursal tiene su propio par de tokens: sus guías llegan a los webhooks de la empresa y a los de esa sucursal.
      </p>
      {q.isPending ? (
        <Loading what="las sucursales" />
      ) : q.isError ? (
        <LoadError error={q.error} retry={() => void q.refetch()} />
      ) : q.data.length === 0 ? (
        <p className="empty">La empresa no tiene sucursales todavía. El courier las da de alta.</p>
      ) : (
        q.data.map((b) => <Branch key={b.id} b={b} verificada={s.empresa.verificada} />)
      )}
    </Page>
  );
}

function Branch({ b, verificada }: { b: Sucursal; verificada: boolean }) {
  const headingId = `suc-${b.id}`;
  return (
    <section className="section branch" aria-labelledby={headingId}>
      <h2 id={headingId}>{b.nombre}</h2>
      <h3>Tokens</h3>
      <TokenPanel path={`/sucursales/${b.id}/tokens`} generadosEn={b.tokensGeneradosEn} verificada={verificada} invalidate={['sucursales']} />
      <CreateWebhook heading={<h3>Webhooks de la sucursal</h3>} path={`/sucursales/${b.id}/webhooks`} modo="live" createdLabel="Webhook de la sucursal creado" invalidate={[['sucursales']]} />
      <WebhookTable rows={b.webhooks} modo="live" label={`Webhooks de ${b.nombre}`} />
    </section>
  );
}
