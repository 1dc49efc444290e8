import type { Response } from 'supertest';
import type { TestGateway } from './test-gateway';

/** A portal link as the internal route issues it: the URL, and the secret its fragment carries. */
export interface PortalLink {
  url: string;
  expiraEn: string;
  secret: string;
}

export async function issuePortalLink(gw: TestGateway, empresaId: string, usuario = 'ana@empresa.gt'): Promise<PortalLink> {
  const res = await gw.admin('post', `/empresas/${empresaId}/portal`, { usuario });
  if (res.status !== 201) throw new Error(`portal link: ${res.status} ${JSON.stringify(res.body)}`);
  const { url, expiraEn } = res.body.data as { url: string; expiraEn: string };
  return { url, expiraEn, secret: new URL(url).hash.slice(1) };
}

/** A browser's view of one portal session: its cookie and anti-CSRF token, sent as the page sends them. */
export interface PortalClient {
  cookie: string;
  csrf: string;
  /** The raw `Set-Cookie` of the exchange. */
  setCookie: string;
  get(path: string): Promise<Response>;
  /** A change, with the cookie and (unless `csrf: false`) the anti-CSRF token. */
  send(method: 'post' | 'patch' | 'delete', path: string, body?: unknown, opts?: { csrf?: string | false; origin?: string }): Promise<Response>;
}

/** Trades the link's secret for a session, as the portal's page does. */
export async function startPortalSession(gw: TestGateway, secret: string): Promise<Response> {
  return gw.http.post('/portal/v1/sesion').send({ enlace: secret });
}

export function portalClient(gw: TestGateway, setCookie: string, csrf: string): PortalClient {
  const cookie = setCookie.split(';')[0]!;
  return {
    cookie,
    csrf,
    setCookie,
    get: (path) => gw.http.get(`/portal/v1${path}`).set('Cookie', cookie),
    send: (method, path, body, opts = {}) => {
      let r = gw.http[method](`/portal/v1${path}`).set('Cookie', cookie);
      if (opts.csrf !== false) r = r.set('X-CSRF-Token', opts.csrf ?? csrf);
      if (opts.origin !== undefined) r = r.set('Origin', opts.origin);
      return body === undefined ? r : r.send(body as object);
    },
  };
}

/** A link issued and traded: an open session of the company. */
export async function openPortal(gw: TestGateway, empresaId: string, usuario = 'ana@empresa.gt'): Promise<PortalClient> {
  const link = await issuePortalLink(gw, empresaId, usuario);
  const res = await startPortalSession(gw, link.secret);
  if (res.status !== 201) throw new Error(`portal session: ${res.status} ${JSON.stringify(res.body)}`);
  const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? [])[0]!;
  return portalClient(gw, setCookie, (res.body.data as { csrfToken: string }).csrfToken);
}
