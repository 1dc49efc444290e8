import { useId, useState, type ReactNode } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, type Modo, type Resumen, type WebhookCreated } from '../api';
import { MODO_NOMBRE } from '../format';
import { MAX_ACTIVE_WEBHOOKS } from '../../../../packages/contracts/src/wire-shapes';
import { SecretField, Status } from '../ui';
import { WebhookForm, type WebhookFields } from './WebhookForm';


/**
 * A webhook list's head: its heading, **Crear webhook** opening the form that POSTs to `path`, and the
 * new webhook's secret, shown once. At the limit of the mode's active webhooks (counted by the
 * summary) the button is disabled and says why. Give it a new `key` where the creation should start afresh.
 */
export function CreateWebhook(props: { heading: ReactNode; path: string; modo: Modo; createdLabel: string; invalidate: string[][] }) {
  const { heading, path, modo, createdLabel, invalidate } = props;
  const queryClient = useQueryClient();
  const noteId = useId();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<WebhookCreated | null>(null);
  const summary = useQuery({ queryKey: ['resumen'], queryFn: () => api<Resumen>('GET', '/resumen') });
  const active = summary.data?.webhooksActivos[modo];
  const full = active !== undefined && active >= MAX_ACTIVE_WEBHOOKS;
  const create = useMutation({
    mutationFn: (body: WebhookFields) => api<WebhookCreated>('POST', path, body),
    onSuccess: (w) => {
      setCreated(w);
      setCreating(false);
      // The summary counts the active webhooks against the limit.
      for (const queryKey of [...invalidate, ['resumen']]) void queryClient.invalidateQueries({ queryKey });
    },
  });
  return (
    <>
      <div className="section-head">
        {heading}
        {!creating && (
          <div className="create-webhook">
            {full && (
              <p id={noteId} className="hint limit-note">
                Ya tiene {active} webhooks activos de {MODO_NOMBRE[modo]}, el máximo. Desactive uno para crear otro.
              </p>
            )}
            <button
              type="button"
              className="btn btn-primary"
              disabled={full}
              aria-describedby={full ? noteId : undefined}
              onClick={() => {
                setCreated(null);
                create.reset();
                setCreating(true);
              }}
            >
              Crear webhook
            </button>
          </div>
        )}
      </div>
      {creating && <WebhookForm submitLabel="Crear" busy={create.isPending} error={create.error} onSubmit={(body) => create.mutate(body)} onCancel={() => setCreating(false)} />}
      {created && (
        <div className="shown-once">
          <Status>
            {createdLabel}: {created.url}
          </Status>
          <p className="warn">{created.nota}</p>
          <SecretField label="Secreto" value={created.secret} />
        </div>
      )}
    </>
  );
}
