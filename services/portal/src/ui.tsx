import { useEffect, useId, useRef, useState, type CSSProperties, type ReactNode } from 'react';
import { describeError } from './api';
import { DATE_INPUT_EXAMPLE, parseDateInput } from './format';

/** A refusal or failure, announced at once: what happened in Spanish, the API's code, what to do. */
export function Alert({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <div role="alert" className="alert">
      {describeError(error)}
    </div>
  );
}

/** The outcome of an action, announced politely. */
export function Status({ children }: { children: ReactNode }) {
  return (
    <p role="status" className="status">
      {children}
    </p>
  );
}

/** What a page shows when it could not load: the reason and a way to try again, never a blank page. */
export function LoadError({ error, retry }: { error: unknown; retry: () => void }) {
  return (
    <div className="load-error">
      <div role="alert" className="alert">
        {describeError(error)}
      </div>
      <button type="button" onClick={retry}>
        Reintentar
      </button>
    </div>
  );
}

export function Loading({ what = 'datos' }: { what?: string }) {
  return (
    <p className="loading" role="status">
      Cargando {what}…
    </p>
  );
}

/** A button that says it is working while its action runs. */
export function ActionButton(props: {
  busy: boolean;
  label: string;
  busyLabel: string;
  onClick?: () => void;
  type?: 'button' | 'submit';
  disabled?: boolean;
  variant?: 'primary' | 'danger' | 'secondary';
  describedBy?: string;
}) {
  const { busy, label, busyLabel, onClick, type = 'button', disabled, variant = 'primary', describedBy } = props;
  return (
    <button type={type} className={`btn btn-${variant}`} onClick={onClick} disabled={busy || disabled} aria-busy={busy} aria-describedby={describedBy}>
      {busy ? busyLabel : label}
    </button>
  );
}

/**
 * A modal question (the native <dialog>: focus kept inside, Escape cancels). Its confirming button is
 * **Confirmar** unless told otherwise.
 */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ReactNode;
  onConfirm: () => void;
  onCancel: () => void;
  busy?: boolean;
  confirmLabel?: string;
  error?: unknown;
}) {
  const { open, title, children, onConfirm, onCancel, busy = false, confirmLabel = 'Confirmar', error } = props;
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      className="dialog"
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onCancel();
      }}
    >
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          onConfirm();
        }}
      >
        <h2 id={titleId}>{title}</h2>
        <div className="dialog-body">{children}</div>
        <Alert error={error} />
        <div className="actions">
          <button type="submit" className="btn btn-primary" disabled={busy} aria-busy={busy}>
            {busy ? 'Procesando…' : confirmLabel}
          </button>
          <button type="button" className="btn btn-secondary" onClick={onCancel} disabled={busy}>
            Cancelar
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** A secret shown once: a read-only field with its label and a **Copiar** button. */
export function SecretField({ label, value }: { label: string; value: string }) {
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<'' | 'ok' | 'manual'>('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('ok');
    } catch {
      input.current?.select();
      setCopied(document.execCommand?.('copy') ? 'ok' : 'manual');
    }
  };
  return (
    <div className="secret">
      <label htmlFor={id}>{label}</label>
      <div className="secret-row">
        <input id={id} ref={input} type="text" readOnly value={value} spellCheck={false} autoComplete="off" onFocus={(e) => e.currentTarget.select()} />
        <button type="button" className="btn btn-secondary" onClick={() => void copy()}>
          Copiar
        </button>
      </div>
      {copied === 'ok' && <Status>{label}: copiado al portapapeles.</Status>}
      {copied === 'manual' && <Status>{label}: selecciónelo y cópielo con Ctrl+C.</Status>}
    </div>
  );
}

/** A wide table that scrolls sideways on a narrow screen, reachable by keyboard. */
export function TableWrap({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="table-wrap" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}

/**
 * A table in its scrolling region: a column header (`scope="col"`) per name, the rows (`<tr>`) as
 * children. On a narrow screen each row stacks into a card, every cell labelled with its column's
 * name (styles.css reads the names from the `--col-N` properties set here).
 */
export function DataTable({ label, columns, children }: { label: string; columns: string[]; children: ReactNode }) {
  const names = Object.fromEntries(columns.map((c, i) => [`--col-${i + 1}`, JSON.stringify(c)])) as CSSProperties;
  return (
    <TableWrap label={label}>
      <table className="table stack" style={names}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c} scope="col">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </TableWrap>
  );
}

/**
 * A date and time on Guatemala's clock, typed in the page's own format ("01 dic 2026, 15:27"),
 * whatever the browser's language. Text that is not a date is said so once the person leaves the field
 * (or at once with `showError`); the caller reads the instant with `parseDateInput`.
 */
export function DateTimeField(props: { label: string; value: string; onChange: (v: string) => void; required?: boolean; hint?: string; showError?: boolean }) {
  const { label, value, onChange, required = false, hint, showError = false } = props;
  const id = useId();
  const [left, setLeft] = useState(false);
  const bad = value.trim() === '' ? required && showError : parseDateInput(value) === undefined && (left || showError);
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        type="text"
        required={required}
        value={value}
        autoComplete="off"
        spellCheck={false}
        aria-invalid={bad || undefined}
        aria-describedby={`${id}-hint${bad ? ` ${id}-error` : ''}`}
        onChange={(e) => {
          setLeft(false);
          onChange(e.target.value);
        }}
        onBlur={() => setLeft(true)}
      />
      <p id={`${id}-hint`} className="hint">
        {hint ? `${hint} ` : ''}Como {DATE_INPUT_EXAMPLE}, hora de Guatemala.
      </p>
      {bad && (
        <p id={`${id}-error`} className="field-error">
          {value.trim() === '' ? `Escriba la fecha y la hora, como ${DATE_INPUT_EXAMPLE}.` : `No es una fecha válida: escríbala como ${DATE_INPUT_EXAMPLE}.`}
        </p>
      )}
    </div>
  );
}

/** What PagedRows reads of a paged (infinite) query. */
interface PagedQuery {
  isPending: boolean;
  isError: boolean;
  error: unknown;
  refetch: () => Promise<unknown>;
  hasNextPage: boolean;
  isFetchingNextPage: boolean;
  fetchNextPage: () => Promise<unknown>;
}

/**
 * A paged list's states: loading, an error before any row, `empty` when there is none, else the rows
 * (`children`) and a **Cargar más** button while the query has a next page.
 */
export function PagedRows({ query, count, what, empty, children }: { query: PagedQuery; count: number; what: string; empty: string; children: ReactNode }) {
  if (query.isPending) return <Loading what={what} />;
  if (query.isError && count === 0) return <LoadError error={query.error} retry={() => void query.refetch()} />;
  if (count === 0) return <p className="empty">{empty}</p>;
  return (
    <>
      {children}
      {query.hasNextPage && (
        <ActionButton busy={query.isFetchingNextPage} label="Cargar más" busyLabel="Cargando…" onClick={() => void query.fetchNextPage()} variant="secondary" />
      )}
    </>
  );
}

/** A page: its heading takes the focus when the page opens, so a screen reader starts there. */
export function Page({ title, children, actions }: { title: string; children: ReactNode; actions?: ReactNode }) {
  const h1 = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    h1.current?.focus();
  }, [title]);
  return (
    <>
      <div className="page-head">
        <h1 ref={h1} tabIndex={-1}>
          {title}
        </h1>
        {actions}
      </div>
      {children}
    </>
  );
}
