import type { LoggedEvent, Modo } from '@svc/contracts';

/** What decides an event's routes: its company, and within it its mode, its branch and its name. */
export interface RouteKey {
  companyId: string;
  mode: Modo;
  /** The branch that generated the event, or null for the company. */
  branchId: string | null;
  event: LoggedEvent;
}

export interface RoutesCache<W> {
  /**
   * The routes of `key` read at the company's webhook count `atLeast` or later; undefined when none
   * are held. Routes read later are as right as the event's own: its transaction did not see the
   * changes in between, and a read at dispatch (what the fan-out did for every event) saw them too.
   */
  get(key: RouteKey, atLeast: number): readonly W[] | undefined;
  /** Keeps the routes of `key` read at `version`; an older read than the company's held one is dropped. */
  put(key: RouteKey, version: number, routes: readonly W[]): void;
}

/** Companies held, least recently used dropped first; and route keys held per company. */
export interface RoutesCacheLimits {
  companies: number;
  keysPerCompany: number;
}

interface Company<W> {
  version: number;
  byKey: Map<string, readonly W[]>;
}

/**
 * The fan-out's routes in memory, by company and webhook count: at a moderate rate a read of
 * `webhooks` for every event was one more round trip, and one more wake-up, per delivery. Exact
 * because each event carries its company's count as its own transaction read it (the
 * `webhook_versions` trigger adds one with every change of WEBHOOK_VERSIONED_COLUMNS), and a
 * company's routes are only ever replaced by a later read. Every dispatcher holds its own.
 */
export function createRoutesCache<W>(limits: RoutesCacheLimits): RoutesCache<W> {
  const companies = new Map<string, Company<W>>();
  const keyOf = (k: RouteKey): string => `${k.mode}|${k.branchId ?? ''}|${k.event}`;

  return {
    get(key, atLeast) {
      const company = companies.get(key.companyId);
      if (company === undefined || company.version < atLeast) return undefined;
      // Most recently used last: a Map iterates in insertion order, so the first is the one to drop.
      companies.delete(key.companyId);
      companies.set(key.companyId, company);
      return company.byKey.get(keyOf(key));
    },
    put(key, version, routes) {
      let company = companies.get(key.companyId);
      if (company !== undefined && version < company.version) return;
      if (company === undefined || version > company.version) {
        company = { version, byKey: new Map() };
      } else if (company.byKey.size >= limits.keysPerCompany) {
        company.byKey.clear();
      }
      company.byKey.set(keyOf(key), routes);
      companies.delete(key.companyId);
      companies.set(key.companyId, company);
      if (companies.size > limits.companies) {
        const oldest = companies.keys().next();
        if (!oldest.done) companies.delete(oldest.value);
      }
    },
  };
}
