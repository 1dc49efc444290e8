import { call, CliError, type ApiOptions } from './api.client.js';

interface CatalogEntry {
  evento: string;
  descripcion: string;
  schema?: unknown;
  ejemplo?: unknown;
}

/** `svc eventos`: the event catalog (`GET /api/v1/eventos`), one line per event, or all of it as JSON. */
export async function eventos(o: ApiOptions & { json: boolean; print(line: string): void }): Promise<number> {
  let catalog: CatalogEntry[];
  try {
    catalog = await call<CatalogEntry[]>(o, 'GET', '/api/v1/eventos');
  } catch (err) {
    if (err instanceof CliError && err.status === 404) {
      throw new CliError(`${o.api} has no event catalog (GET /api/v1/eventos answered 404): this platform version predates it; update it`, 404);
    }
    throw err;
  }
  if (o.json) {
    o.print(JSON.stringify(catalog, null, 2));
    return 0;
  }
  const width = Math.max(...catalog.map((e) => e.evento.length));
  for (const e of catalog) o.print(`${e.evento.padEnd(width)}  ${e.descripcion}`);
  return 0;
}
