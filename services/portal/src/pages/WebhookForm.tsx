import { useId, useState, type FormEvent } from 'react';
import { EVENTOS, isNoticeEvent, NOTICE_EVENTS, type NoticeEvent } from '../api';
import { ActionButton, Alert } from '../ui';

export interface WebhookFields {
  url: string;
  eventos: string[];
  descripcion: string | null;
}

/** What each endpoint-health notice tells, beside its checkbox. */
const NOTICE_SAYS: Record<NoticeEvent, string> = {
  WEBHOOK_FALLANDO: 'el webhook lleva fallas continuas (a lo sumo uno por día)',
  WEBHOOK_DESACTIVADO: 'la plataforma desactivó el webhook',
};

/** Sent in the order of the checkboxes, shipment events first, whatever order they were ticked in. */
const SUBSCRIBABLE: readonly string[] = [...EVENTOS, ...NOTICE_EVENTS];

/**
 * The webhook form: **URL**, one checkbox per shipment event under **Eventos**, one per notice under
 * **Avisos de salud**, and **Descripción**, sent with **Crear** or **Guardar**. Nothing checked in
 * either: every shipment event; a notice checked: only what is checked (the API's routing, routesEvent),
 * which the form says when that leaves no shipment event. A refusal shows the API's message and keeps
 * what was typed.
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
    onSubmit({ url: url.trim(), eventos: SUBSCRIBABLE.filter((x) => eventos.includes(x)), descripcion: descripcion.trim() === '' ? null : descripcion });
  };
  const toggle = (evento: string, on: boolean) => setEventos((prev) => (on ? [...prev, evento] : prev.filter((x) => x !== evento)));
  // A list naming a notice is no longer empty, so it no longer means every shipment event.
  const onlyNotices = eventos.length > 0 && eventos.every(isNoticeEvent);
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
      <fieldset className="field" aria-describedby={`${id}-eventos-hint`}>
        <legend>Eventos</legend>
        <p id={`${id}-eventos-hint`} className="hint">
          Si no marca ninguno, ni aquí ni en Avisos de salud, el webhook recibe todos los eventos de guía.
        </p>
        <div className="checks">
          {EVENTOS.map((evento) => (
            <label key={evento} className="check">
              <input type="checkbox" checked={eventos.includes(evento)} onChange={(e) => toggle(evento, e.target.checked)} />
              {evento}
            </label>
          ))}
        </div>
      </fieldset>
      <fieldset className="field" aria-describedby={`${id}-avisos-hint`}>
        <legend>Avisos de salud</legend>
        <p id={`${id}-avisos-hint`} className="hint">
          Avisos de la plataforma sobre sus otros webhooks. Se reciben solo si los marca.
        </p>
        <div className="checks">
          {NOTICE_EVENTS.map((aviso) => (
            <div key={aviso}>
              <label className="check">
                <input type="checkbox" checked={eventos.includes(aviso)} onChange={(e) => toggle(aviso, e.target.checked)} aria-describedby={`${id}-${aviso}`} />
                {aviso}
              </label>
              <p id={`${id}-${aviso}`} className="hint check-hint">
                {NOTICE_SAYS[aviso]}
              </p>
            </div>
          ))}
        </div>
        {/* Present from the start, so a screen reader announces the sentence when a tick makes it appear. */}
        <div aria-live="polite">{onlyNotices && <p className="warn">Este webhook solo recibirá avisos, ningún evento de guía.</p>}</div>
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
