import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { CATALOG_EVENTS, EVENT_CATALOG, type CatalogEvent } from './event-catalog';

// Compiled on first use: only the tests and the receiver kit's checks need it, not a service's start.
let compiled: Map<CatalogEvent, ValidateFunction> | undefined;

function validators(): Map<CatalogEvent, ValidateFunction> {
  if (compiled) return compiled;
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats(ajv);
  compiled = new Map(EVENT_CATALOG.map((e) => [e.evento, ajv.compile(e.schema)]));
  return compiled;
}

const isCatalogEvent = (name: unknown): name is CatalogEvent => typeof name === 'string' && (CATALOG_EVENTS as readonly string[]).includes(name);

/**
 * What is wrong with `body` as a delivery's body, by the catalog's schema of its `event`: an empty
 * list when it validates. An event the catalog does not name is a problem too.
 */
export function eventBodyProblems(body: unknown): string[] {
  const name = (body as { event?: unknown } | null)?.event;
  if (!isCatalogEvent(name)) return [`event ${JSON.stringify(name)} is not in the catalog`];
  const validate = validators().get(name)!;
  if (validate(body)) return [];
  return (validate.errors ?? []).map((e) => `${name}: ${e.instancePath || '(body)'} ${e.message ?? 'is invalid'}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
}
