import { Component, useEffect, useRef, useState, type ReactNode } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { NavLink, Navigate, Outlet, Route, Routes, useNavigate } from 'react-router';
import { api, ApiError, onSessionEnded, setCsrfToken, type Session } from './api';
import { SessionContext, useSession } from './session';
import { ActionButton, Alert, LoadError, Loading } from './ui';
import { SummaryPage } from './pages/SummaryPage';
import { TokensPage } from './pages/TokensPage';
import { WebhooksPage } from './pages/WebhooksPage';
import { WebhookPage } from './pages/WebhookPage';
import { DeliveryPage } from './pages/DeliveryPage';
import { BranchesPage } from './pages/BranchesPage';
import { SandboxPage } from './pages/SandboxPage';
import { SandboxShipmentPage } from './pages/SandboxShipmentPage';
import { ActivityPage } from './pages/ActivityPage';
import { InvalidLinkPage, SignedOutPage } from './pages/InvalidLinkPage';
import { SignInPage } from './pages/SignInPage';

export function App() {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  useEffect(() => {
    // Whatever the page, a session the API says is over sends the person to **Enlace no válido**.
    onSessionEnded(() => {
      setCsrfToken(undefined);
      queryClient.clear();
      void navigate('/enlace-no-valido', { replace: true });
    });
  }, [navigate, queryClient]);
  return (
    <ErrorBoundary>
      <Routes>
        <Route path="/entrar" element={<SignInPage />} />
        <Route path="/enlace-no-valido" element={<InvalidLinkPage />} />
        <Route path="/sesion-cerrada" element={<SignedOutPage />} />
        <Route element={<SignedIn />}>
          <Route index element={<SummaryPage />} />
          <Route path="tokens" element={<TokensPage />} />
          <Route path="webhooks" element={<WebhooksPage />} />
          <Route path="webhooks/:id" element={<WebhookPage />} />
          <Route path="webhooks/:id/entregas/:entregaId" element={<DeliveryPage />} />
          <Route path="sucursales" element={<BranchesPage />} />
          <Route path="sandbox" element={<SandboxPage />} />
          <Route path="sandbox/:numeroGuia" element={<SandboxShipmentPage />} />
          <Route path="actividad" element={<ActivityPage />} />
          <Route path="*" element={<Navigate to="/" replace />} />
        </Route>
      </Routes>
    </ErrorBoundary>
  );
}

/** Every page of a session: the session is read first (its company, its anti-CSRF token). */
function SignedIn() {
  const session = useQuery({ queryKey: ['sesion'], queryFn: () => api<Session>('GET', '/sesion'), staleTime: Infinity });
  if (session.data) setCsrfToken(session.data.csrfToken);
  if (session.isPending) {
    return (
      <main id="contenido" className="main">
        <Loading what="su sesión" />
      </main>
    );
  }
  if (session.isError) {
    // A 401 already went to **Enlace no válido**; anything else: say so, offer to try again.
    if (session.error instanceof ApiError && session.error.status === 401) return null;
    return (
      <main id="contenido" className="main">
        <h1>Portal de integraciones</h1>
        <LoadError error={session.error} retry={() => void session.refetch()} />
      </main>
    );
  }
  return (
    <SessionContext.Provider value={session.data}>
      <Shell />
    </SessionContext.Provider>
  );
}

function Shell() {
  const s = useSession();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [closing, setClosing] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const logout = async () => {
    setClosing(true);
    setError(null);
    try {
      await api('DELETE', '/sesion');
      setCsrfToken(undefined);
      queryClient.clear();
      void navigate('/sesion-cerrada', { replace: true });
    } catch (err) {
      setError(err);
      setClosing(false);
    }
  };
  return (
    <>
      <a className="skip" href="#contenido">
        Saltar al contenido
      </a>
      <header className="header">
        <div className="brand">
          <span className="product">Portal de integraciones</span>
          <span className="company" data-testid="empresa">
            {s.empresa.nombre}
          </span>
        </div>
        <nav aria-label="Secciones" className="nav">
          <ul>
            <li>
              <NavLink to="/" end>
                Resumen
              </NavLink>
            </li>
            <li>
              <NavLink to="/tokens">Tokens</NavLink>
            </li>
            <li>
              <NavLink to="/webhooks">Webhooks</NavLink>
            </li>
            {s.empresa.sucursalesHabilitadas && (
              <li>
                <NavLink to="/sucursales">Sucursales</NavLink>
              </li>
            )}
            <li>
              <NavLink to="/sandbox">Sandbox</NavLink>
            </li>
            <li>
              <NavLink to="/actividad">Actividad</NavLink>
            </li>
          </ul>
          <ActionButton busy={closing} label="Cerrar sesión" busyLabel="Cerrando sesión…" onClick={() => void logout()} variant="secondary" />
        </nav>
      </header>
      <main id="contenido" className="main">
        <Alert error={error} />
        <Outlet />
      </main>
      <footer className="footer">
        <p>
          Sesión de {s.usuario}. Horas en America/Guatemala (UTC−6).
        </p>
      </footer>
    </>
  );
}

/** A crash while drawing a page shows a message and a way out, never a blank page or a stack trace. */
class ErrorBoundary extends Component<{ children: ReactNode }, { failed: boolean }> {
  override state = { failed: false };
  static getDerivedStateFromError(): { failed: boolean } {
    return { failed: true };
  }
  override render() {
    if (!this.state.failed) return this.props.children;
    return <Crashed />;
  }
}

function Crashed() {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <main id="contenido" className="main">
      <h1 ref={ref} tabIndex={-1}>
        Algo salió mal
      </h1>
      <p role="alert" className="alert">
        La página no se pudo mostrar. Vuelva a cargarla; si se repite, avise al courier.
      </p>
      <button type="button" className="btn btn-primary" onClick={() => window.location.reload()}>
        Volver a cargar
      </button>
    </main>
  );
}
