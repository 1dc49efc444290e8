import { useQuery } from '@tanstack/react-query';
import { api } from '../api';
import { LoadError, Loading, Page } from '../ui';
import { TokenPanel } from './TokenPanel';

export function TokensPage() {
  const q = useQuery({ queryKey: ['tokens'], queryFn: () => api<{ generadosEn: string | null; verificada: boolean }>('GET', '/tokens') });
  return (
    <Page title="Tokens de API">
      <p className="lead">
        Un par de tokens: el <strong>live</strong> crea guías reales y consume créditos; el <strong>test</strong> trabaja en el sandbox. Úselos en la cabecera{' '}
        <code>Authorization: Bearer &lt;token&gt;</code>.
      </p>
      {q.isPending ? (
        <Loading what="los tokens" />
      ) : q.isError ? (
        <LoadError error={q.error} retry={() => void q.refetch()} />
      ) : (
        <TokenPanel path="/tokens" generadosEn={q.data.generadosEn} verificada={q.data.verificada} invalidate={['tokens']} />
      )}
    </Page>
  );
}
