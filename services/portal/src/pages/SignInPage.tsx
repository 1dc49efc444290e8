import { useEffect, useRef, useState } from 'react';
import { useQueryClient } from '@tanstack/react-query';
import { useNavigate } from 'react-router';
import { api, ApiError, setCsrfToken, type Session } from '../api';
import { LoadError, Loading } from '../ui';

/**
 * Where a portal link lands: the secret in the fragment (`#…`, never sent to a server by the browser)
 * is traded once for a session; the fragment is wiped from the address bar and history first.
 */
export function SignInPage() {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const secret = useRef<string | null>(null);
  const started = useRef(false);
  const [error, setError] = useState<unknown>(null);

  const exchange = async () => {
    setError(null);
    try {
      const session = await api<Session>('POST', '/sesion', { enlace: secret.current }, { quietAuth: true });
      setCsrfToken(session.csrfToken);
      queryClient.clear();
      queryClient.setQueryData(['sesion'], session);
      void navigate('/', { replace: true });
    } catch (err) {
      if (err instanceof ApiError && (err.status === 401 || err.status === 400)) void navigate('/enlace-no-valido', { replace: true });
      else setError(err);
    }
  };

  useEffect(() => {
    if (started.current) return;
    started.current = true;
    secret.current = window.location.hash.slice(1) || null;
    window.history.replaceState(null, '', window.location.pathname);
    if (!secret.current) {
      void navigate('/enlace-no-valido', { replace: true });
      return;
    }
    void exchange();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  return (
    <main id="contenido" className="main narrow">
      <h1>Entrando al portal</h1>
      {error ? <LoadError error={error} retry={() => void exchange()} /> : <Loading what="su sesión" />}
    </main>
  );
}
