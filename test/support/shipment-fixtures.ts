import type pg from 'pg';
import { bearer, type TestGateway } from './test-gateway';

// Shipments through the public API and the portal, for the gateway's and the dispatcher's tests alike.

/** A valid shipment body; `n` makes each one recognisable. */
export function guia(n = 1, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    destinatario: { nombre: `Cliente ${n}`, telefono: '+502 5555 0000', direccion: `${n} Avenida 5-55, Zona 1` },
    paquete: { peso: 1.5 },
    ...extra,
  };
}

export function createOne(gw: TestGateway, token: string, body: unknown = guia(), key?: string) {
  const r = gw.http.post('/api/v1/guias').set('Authorization', bearer(token));
  return (key === undefined ? r : r.set('Idempotency-Key', key)).send(body as object);
}

export function createBatch(gw: TestGateway, token: string, guias: unknown[], key?: string) {
  const r = gw.http.post('/api/v1/guias/batch').set('Authorization', bearer(token));
  return (key === undefined ? r : r.set('Idempotency-Key', key)).send({ guias });
}

export function moveOn(gw: TestGateway, numeroGuia: string, body: Record<string, unknown>) {
  return gw.admin('post', `/guias/${encodeURIComponent(numeroGuia)}/eventos`, body);
}

/** `POST /api/v1/guias/{numeroGuia}/simular` (a test token's courier): the internal route's body. */
export function simulate(gw: TestGateway, token: string, numeroGuia: string, body: Record<string, unknown>) {
  return gw.http.post(`/api/v1/guias/${encodeURIComponent(numeroGuia)}/simular`).set('Authorization', bearer(token)).send(body);
}

export async function count(pool: pg.Pool, query: string, params: unknown[] = []): Promise<number> {
  const r = await pool.query<{ n: string }>(query, params);
  return Number(r.rows[0]?.n ?? 0);
}

export async function empresaRow(pool: pg.Pool, id: string): Promise<{ creditos: number; guias_hoy: number; guias_hoy_dia: string | null }> {
  const r = await pool.query('select creditos, guias_hoy, guias_hoy_dia::text from empresas where id = $1', [id]);
  return r.rows[0] as { creditos: number; guias_hoy: number; guias_hoy_dia: string | null };
}

/** A clock a test moves by hand (e.g. across Guatemala's midnight). */
export function manualClock(start: Date): { now(): Date; set(at: Date | string): void } {
  let current = start;
  return {
    now: () => new Date(current),
    set(at) {
      current = new Date(at);
    },
  };
}
