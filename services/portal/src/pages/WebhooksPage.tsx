import { useEffect, useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { useLocation, useNavigate, useSearchParams } from 'react-router';
import { api, type Modo, type WebhookRow } from '../api';
import { MODO_NOMBRE } from '../format';
import { LoadError, Loading, Page } from '../ui';
import { CreateWebhook } from './CreateWebhook';
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
  // The choice shows at once: the router applies the new URL in a transition, and a radio bound
  // only to it would spring back to the old mode for that moment.
  const [chosen, setChosen] = useState(modo);
  useEffect(() => setChosen(modo), [modo]);
  return (
    <div role="radiogroup" aria-labelledby="modo-label" className="modo">
      <span id="modo-label" className="modo-label">
        Modo
      </span>
      {(['live', 'test'] as const).map((m) => (
        <label key={m} className="radio">
          <input
            type="radio"
            name="modo"
            value={m}
            checked={chosen === m}
            onChange={() => {
              setChosen(m);
              onChange(m);
            }}
          />
          {MODO_NOMBRE[m]}
        </label>
      ))}
    </div>
  );
}

export function WebhooksPage() {
  const [modo, setModo] = useModo();
  const list = useQuery({ queryKey: ['webhooks', modo], queryFn: () => api<WebhookRow[]>('GET', `/webhooks?modo=${modo}`) });
  // Switching the mode starts the creation afresh (the form closed, the secret shown once forgotten).
  const [round, setRound] = useState(0);
  const switchModo = (m: Modo) => {
    setRound((r) => r + 1);
    setModo(m);
  };
  return (
    <Page title="Webhooks">
      <p className="lead">
        Cada webhook recibe por HTTPS un POST firmado cuando una guía cambia de estado. Los de <strong>Sandbox</strong> reciben solo los eventos de las guías de prueba.
      </p>
      <ModoSwitch modo={modo} onChange={switchModo} />
      <section aria-labelledby="wh-lista" className="section">
        <CreateWebhook
          key={round}
          heading={<h2 id="wh-lista">Webhooks de {MODO_NOMBRE[modo]}</h2>}
          path={`/webhooks?modo=${modo}`}
          modo={modo}
          createdLabel="Webhook creado"
          invalidate={[['webhooks']]}
        />
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
