import { useId, useState, type FormEvent } from 'react';
import { EVENTOS } from '../api';
import { ActionButton, Alert } from '../ui';

export interface WebhookFields {
  url: string;
  eventos: string[];
  descripcion: string | null;
}

/**
 * The webhook form: **URL**, one checkbox per event (none checked: every event) and **Descripción**,
 * sent with **Crear** or **Guardar**. A refusal shows the API's message and keeps what was typed.
 */
export function WebhookForm(props: {
  initial?: WebhookFields;
  submitLabel: 'Crear' | 'Guardar';
  busy: boolean;
  error: unknown;
  onSubmit: (fields: WebhookFields) => void;
  onCancel: () => void;
}) {
  const { initial, submitLabel, busy, error, onSubmit, onCancel } = props;
  const [url, setUrl] = useState(initial?.url ?? '');
  const [eventos, setEventos] = useState<string[]>(initial?.eventos ?? []);
  const [descripcion, setDescripcion] = useState(initial?.descripcion ?? '');
  const id = useId();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onSubmit({ url: url.trim(), eventos, descripcion: descripcion.trim() === '' ? null : descripcion });
  };
  const toggle = (evento: string, on: boolean) => setEventos((prev) => (on ? [...prev, evento] : prev.filter((x) => x !== evento)));
  return (
    <form className="form" onSubmit={submit} aria-label={submitLabel === 'Crear' ? 'Crear webhook' : 'Editar webhook'}>
      <div className="field">
        <label htmlFor={`${id}-url`}>URL</label>
        <input
          id={`${id}-url`}
          type="url"
          inputMode="url"
          required
          value={url}
          onChange={(e) => setUrl(e.target.value)}
          placeholder="https://su-sistema.example.com/webhooks/courier"
          aria-describedby={`${id}-url-hint`}
          autoComplete="off"
        />
        <p id={`${id}-url-hint`} className="hint">
          Debe empezar con https:// y ser una dirección pública.
        </p>
      </div>
      <fieldset className="field">
        <legend>Eventos</legend>
        <p className="hint">Si no marca ninguno, el webhook recibe todos los eventos.</p>
        <div className="checks">
          {EVENTOS.map((evento) => (
            <label key={evento} className="check">
              <input type="checkbox" checked={eventos.includes(evento)} onChange={(e) => toggle(evento, e.target.checked)} />
              {evento}
            </label>
          ))}
        </div>
      </fieldset>
      <div className="field">
        <label htmlFor={`${id}-desc`}>Descripción</label>
        <input id={`${id}-desc`} type="text" maxLength={200} value={descripcion} onChange={(e) => setDescripcion(e.target.value)} />
      </div>
      <Alert error={error} />
      <div className="actions">
        <ActionButton type="submit" busy={busy} label={submitLabel} busyLabel={submitLabel === 'Crear' ? 'Creando…' : 'Guardando…'} />
        <button type="button" className="btn btn-secondary" onClick={onCancel} disabled={busy}>
          Cancelar
        </button>
      </div>
    </form>
  );
}
