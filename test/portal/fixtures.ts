import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import AxeBuilder from '@axe-core/playwright';
import { expect, test as base, type Page } from '@playwright/test';
import { startReceiver, type Receiver } from '../support/https-receiver';
import { stackInfo, type StackInfo } from './stack';

const ROOT = join(__dirname, '../..');
/** `PORTAL_DOCS_SCREENSHOTS=1 pnpm test:portal` writes the docs' pictures (docs/images/portal-*.png). */
const DOCS = process.env.PORTAL_DOCS_SCREENSHOTS === '1';

export interface Api {
  status: number;
  body: { success: boolean; data?: any; error?: { code: string; message: string } }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** A call to the stack's public port as an integrator (`/api/v1`, a bearer token). */
export function call(stack: StackInfo, method: string, path: string, token?: string, body?: unknown): Promise<Api> {
  return callAt(stack.baseUrl, method, path, token, body);
}

async function callAt(baseUrl: string, method: string, path: string, token?: string, body?: unknown): Promise<Api> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Api['body'] };
}

export interface Portal {
  stack: StackInfo;
  receiver: Receiver;
  /** A company made through the internal routes (verified, with credits, unless told otherwise). */
  company(fields?: Record<string, unknown>): Promise<{ id: string; nombre: string }>;
  /** A portal link for the company, as the courier's website would ask for it. */
  link(empresaId: string, usuario?: string): Promise<string>;
  /** Opens the link and waits for **Resumen** with its data (no request of the first page still under way). */
  enter(page: Page, empresaId: string, usuario?: string): Promise<void>;
  admin(method: string, path: string, body?: unknown): Promise<Api>;
  /** No serious or critical axe violation on the page as it is now. */
  axe(page: Page, label: string): Promise<void>;
  /** The docs' picture of the page (only with PORTAL_DOCS_SCREENSHOTS=1). */
  docShot(page: Page, name: string): Promise<void>;
}

export const test = base.extend<{ portal: Portal }>({
  // eslint-disable-next-line no-empty-pattern -- Playwright reads a fixture's dependencies from this pattern: it has none.
  portal: async ({}, use) => {
    const stack = stackInfo();
    const receiver = await startReceiver();
    // The operator's routes are on the admin port only (ADMIN_PORT), as compose runs them.
    const admin = (method: string, path: string, body?: unknown) => callAt(stack.adminUrl, method, `/internal/v1${path}`, stack.adminToken, body);
    const link = async (empresaId: string, usuario = 'ana@transportesquetzal.gt') => {
      const res = await admin('POST', `/empresas/${empresaId}/portal`, { usuario });
      expect(res.status).toBe(201);
      const url = res.body.data.url as string;
      // Issued on the admin port, for the customer's browser: the public origin, never the admin port.
      expect(new URL(url).origin).toBe(stack.baseUrl);
      return url;
    };
    await use({
      stack,
      receiver,
      admin,
      link,
      async company(fields = {}) {
        const res = await admin('POST', '/empresas', { nombre: 'Transportes Quetzal', verificada: true, planActivo: true, creditos: 100, ...fields });
        expect(res.status).toBe(201);
        return res.body.data as { id: string; nombre: string };
      },
      async enter(page, empresaId, usuario) {
        await page.goto(await link(empresaId, usuario));
        await expect(page.getByRole('heading', { level: 1, name: 'Resumen' })).toBeVisible();
        await expect(page.getByRole('heading', { level: 2, name: 'Empresa', exact: true })).toBeVisible();
      },
      async axe(page, label) {
        const result = await new AxeBuilder({ page }).analyze();
        const bad = result.violations
          .filter((v) => v.impact === 'serious' || v.impact === 'critical')
          .map((v) => ({ page: label, id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
        expect(bad, `axe on ${label}`).toEqual([]);
      },
      async docShot(page, name) {
        if (!DOCS) return;
        mkdirSync(join(ROOT, 'docs/images'), { recursive: true });
        await page.screenshot({ path: join(ROOT, `docs/images/portal-${name}.png`), fullPage: true });
      },
    });
    await receiver.close();
  },
});

export { expect };
