import { useId, useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { api, type TokenPair } from '../api';
import { formatDateTime } from '../format';
import { ActionButton, Alert, ConfirmDialog, SecretField, Status } from '../ui';

/**
 * A token pair's controls (the company's on Tokens, a branch's on Sucursales): **Generar tokens** while
 * there is none; **Regenerar tokens** and **Eliminar tokens**, each confirmed, while there is one. A new
 * pair is shown once, in **Token live** and **Token test**; leaving the page forgets it.
 */
export function TokenPanel(props: { path: string; generadosEn: string | null; verificada: boolean; invalidate: readonly unknown[] }) {
  const { path, generadosEn, verificada, invalidate } = props;
  const queryClient = useQueryClient();
  const [pair, setPair] = useState<TokenPair | null>(null);
  const [asking, setAsking] = useState<'regenerar' | 'eliminar' | null>(null);
  const [done, setDone] = useState('');
  const noteId = useId();

  const generate = useMutation({
    mutationFn: () => api<TokenPair>('POST', path),
    onSuccess: (p) => {
      setPair(p);
      setAsking(null);
      setDone(generadosEn ? 'Tokens regenerados: el par anterior ya no funciona.' : 'Tokens generados.');
      void queryClient.invalidateQueries({ queryKey: invalidate });
    },
  });
  const remove = useMutation({
    mutationFn: () => api<{ eliminados: number }>('DELETE', path),
    onSuccess: () => {
      setPair(null);
      setAsking(null);
      setDone('Tokens eliminados: el par ya no funciona.');
      void queryClient.invalidateQueries({ queryKey: invalidate });
    },
  });
  const start = (what: 'regenerar' | 'eliminar') => {
    generate.reset();
    remove.reset();
    setDone('');
    setAsking(what);
  };

  return (
    <div className="token-panel">
      {!verificada && (
        <p id={noteId} className="warn">
          La empresa debe estar verificada para generar tokens. Pida al courier que la verifique.
        </p>
      )}
      {generadosEn ? (
        <>
          <p>Par de tokens generado el {formatDateTime(generadosEn)}.</p>
          <div className="actions">
            <button type="button" className="btn btn-primary" onClick={() => start('regenerar')} disabled={!verificada} aria-describedby={verificada ? undefined : noteId}>
              Regenerar tokens
            </button>
            <button type="button" className="btn btn-danger" onClick={() => start('eliminar')}>
              Eliminar tokens
            </button>
          </div>
        </>
      ) : (
        <>
          <p>Todavía no hay un par de tokens.</p>
          <div className="actions">
            <ActionButton
              busy={generate.isPending}
              label="Generar tokens"
              busyLabel="Generando tokens…"
              onClick={() => {
                setDone('');
                generate.mutate();
              }}
              disabled={!verificada}
              describedBy={verificada ? undefined : noteId}
            />
          </div>
        </>
      )}
      {asking === null && <Alert error={generate.error ?? remove.error} />}
      {done && <Status>{done}</Status>}
      {pair && (
        <div className="shown-once">
          <p className="warn" id={`${noteId}-once`}>
            Guarde estos tokens ahora: no se volverán a mostrar. Si sale de esta página, se olvidan.
          </p>
          <SecretField label="Token live" value={pair.live} />
          <SecretField label="Token test" value={pair.test} />
        </div>
      )}
      <ConfirmDialog
        open={asking === 'regenerar'}
        title="¿Regenerar los tokens?"
        onConfirm={() => generate.mutate()}
        onCancel={() => setAsking(null)}
        busy={generate.isPending}
        error={generate.error}
      >
        <p>Se generará un par nuevo. El par anterior deja de funcionar de inmediato, en todas sus integraciones.</p>
      </ConfirmDialog>
      <ConfirmDialog
        open={asking === 'eliminar'}
        title="¿Eliminar los tokens?"
        onConfirm={() => remove.mutate()}
        onCancel={() => setAsking(null)}
        busy={remove.isPending}
        error={remove.error}
      >
        <p>El par actual deja de funcionar de inmediato. Podrá generar uno nuevo después.</p>
      </ConfirmDialog>
    </div>
  );
}
