import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, type Sucursal, type WebhookCreated } from '../api';
import { useSession } from '../session';
import { LoadError, Loading, Page, SecretField, Status } from '../ui';
import { TokenPanel } from './TokenPanel';
import { WebhookForm } from './WebhookForm';
import { WebhookTable } from './WebhookTable';

/** **Sucursales**: each branch with its token pair and its webhooks (live, as the branch's tokens are). */
export function SucursalesPage() {
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
  const queryClient = useQueryClient();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<WebhookCreated | null>(null);
  const create = useMutation({
    mutationFn: (body: { url: string; eventos: string[]; descripcion: string | null }) => api<WebhookCreated>('POST', `/sucursales/${b.id}/webhooks`, body),
    onSuccess: (w) => {
      setCreated(w);
      setCreating(false);
      void queryClient.invalidateQueries({ queryKey: ['sucursales'] });
    },
  });
  const headingId = `suc-${b.id}`;
  return (
    <section className="section branch" aria-labelledby={headingId}>
      <h2 id={headingId}>{b.nombre}</h2>
      <h3>Tokens</h3>
      <TokenPanel path={`/sucursales/${b.id}/tokens`} generadosEn={b.tokensGeneradosEn} verificada={verificada} invalidate={['sucursales']} />
      <div className="section-head">
        <h3>Webhooks de la sucursal</h3>
        {!creating && (
          <button
            type="button"
            className="btn btn-primary"
            onClick={() => {
              setCreated(null);
              create.reset();
              setCreating(true);
            }}
          >
            Crear webhook
          </button>
        )}
      </div>
      {creating && <WebhookForm submitLabel="Crear" busy={create.isPending} error={create.error} onSubmit={(body) => create.mutate(body)} onCancel={() => setCreating(false)} />}
      {created && (
        <div className="shown-once">
          <Status>Webhook de la sucursal creado: {created.url}</Status>
          <p className="warn">{created.nota}</p>
          <SecretField label="Secreto" value={created.secret} />
        </div>
      )}
      <WebhookTable rows={b.webhooks} modo="live" label={`Webhooks de ${b.nombre}`} />
    </section>
  );
}
