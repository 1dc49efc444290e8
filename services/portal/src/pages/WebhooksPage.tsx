import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useLocation, useNavigate, useSearchParams } from 'react-router';
import { api, type Modo, type WebhookCreated, type WebhookRow } from '../api';
import { MODO_NOMBRE } from '../format';
import { LoadError, Loading, Page, SecretField, Status } from '../ui';
import { WebhookForm } from './WebhookForm';
import { WebhookTable } from './WebhookTable';

/** `?modo=test` is the sandbox; anything else production. */
export function useModo(): [Modo, (m: Modo) => void] {
  const [params] = useSearchParams();
  const { pathname } = useLocation();
  const navigate = useNavigate();
  const modo: Modo = params.get('modo') === 'test' ? 'test' : 'live';
  return [modo, (m) => void navigate({ pathname, search: m === 'test' ? '?modo=test' : '' }, { replace: true })];
}

/** The radio group **Modo**: **Producción** or **Sandbox**. */
export function ModoSwitch({ modo, onChange }: { modo: Modo; onChange: (m: Modo) => void }) {
  return (
    <div role="radiogroup" aria-labelledby="modo-label" className="modo">
      <span id="modo-label" className="modo-label">
        Modo
      </span>
      {(['live', 'test'] as const).map((m) => (
        <label key={m} className="radio">
          <input type="radio" name="modo" value={m} checked={modo === m} onChange={() => onChange(m)} />
          {MODO_NOMBRE[m]}
        </label>
      ))}
    </div>
  );
}

export function WebhooksPage() {
  const [modo, setModo] = useModo();
  const queryClient = useQueryClient();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<WebhookCreated | null>(null);
  const list = useQuery({ queryKey: ['webhooks', modo], queryFn: () => api<WebhookRow[]>('GET', `/webhooks?modo=${modo}`) });
  const create = useMutation({
    mutationFn: (body: { url: string; eventos: string[]; descripcion: string | null }) => api<WebhookCreated>('POST', `/webhooks?modo=${modo}`, body),
    onSuccess: (w) => {
      setCreated(w);
      setCreating(false);
      void queryClient.invalidateQueries({ queryKey: ['webhooks'] });
      void queryClient.invalidateQueries({ queryKey: ['resumen'] });
    },
  });
  const switchModo = (m: Modo) => {
    setCreated(null);
    setCreating(false);
    create.reset();
    setModo(m);
  };
  return (
    <Page title="Webhooks">
      <p className="lead">
        Cada webhook recibe por HTTPS un POST firmado cuando una guía cambia de estado. Los de <strong>Sandbox</strong> reciben solo los eventos de las guías de prueba.
      </p>
      <ModoSwitch modo={modo} onChange={switchModo} />
      <section aria-labelledby="wh-lista" className="section">
        <div className="section-head">
          <h2 id="wh-lista">Webhooks de {MODO_NOMBRE[modo]}</h2>
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
        {creating && (
          <WebhookForm submitLabel="Crear" busy={create.isPending} error={create.error} onSubmit={(b) => create.mutate(b)} onCancel={() => setCreating(false)} />
        )}
        {created && (
          <div className="shown-once">
            <Status>Webhook creado: {created.url}</Status>
            <p className="warn">{created.nota}</p>
            <SecretField label="Secreto" value={created.secret} />
          </div>
        )}
        {list.isPending ? (
          <Loading what="los webhooks" />
        ) : list.isError ? (
          <LoadError error={list.error} retry={() => void list.refetch()} />
        ) : (
          <WebhookTable rows={list.data} modo={modo} label={`Webhooks de ${MODO_NOMBRE[modo]}`} />
        )}
      </section>
    </Page>
  );
}
