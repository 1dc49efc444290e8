import { useState, type ReactNode } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { api, type WebhookCreated } from '../api';
import { SecretField, Status } from '../ui';
import { WebhookForm, type WebhookFields } from './WebhookForm';

/**
 * A webhook list's head: its heading, **Crear webhook** opening the form that POSTs to `path`, and the
 * new webhook's secret, shown once. Give it a new `key` where the creation should start afresh.
 */
export function CreateWebhook({ heading, path, createdLabel, invalidate }: { heading: ReactNode; path: string; createdLabel: string; invalidate: string[][] }) {
  const queryClient = useQueryClient();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<WebhookCreated | null>(null);
  const create = useMutation({
    mutationFn: (body: WebhookFields) => api<WebhookCreated>('POST', path, body),
    onSuccess: (w) => {
      setCreated(w);
      setCreating(false);
      for (const queryKey of invalidate) void queryClient.invalidateQueries({ queryKey });
    },
  });
  return (
    <>
      <div className="section-head">
        {heading}
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
