import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { expect, test } from './fixtures';

const ROOT = join(__dirname, '../..');

/** `svc ...` as `pnpm svc` runs it, against the stack; its output lines collected. */
function svc(args: string[], api: string, token: string): { child: ChildProcess; lines: string[]; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, SVC_API: api, SVC_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const take = (chunk: Buffer): void => void lines.push(...chunk.toString('utf8').split('\n').filter((l) => l.length > 0));
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  return { child, lines, exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))) };
}

/**
 * **Sesiones de escucha** on the Sandbox page: a real `svc listen` forwarding to a plain-HTTP receiver
 * on 127.0.0.1 (an integrator's laptop), `svc trigger GUIA_ENTREGADA`, and the page listing the open
 * session with its deliveries; the session's end removes it from the list.
 */
test('the Sandbox page lists an open svc listen session with its deliveries, and shows the two commands', async ({ page, portal }) => {
  const received: string[] = [];
  const local: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { event: string }).event);
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  const forwardTo = `http://127.0.0.1:${(local.address() as AddressInfo).port}/hook`;
  const empresa = await portal.company({ nombre: 'Ferretería El Volcán' });
  const tokens = await portal.admin('POST', `/empresas/${empresa.id}/tokens`);
  const testToken = tokens.body.data.test as string;
  let listen: ReturnType<typeof svc> | undefined;
  try {
    await portal.enter(page, empresa.id, 'marta@volcan.gt');
    await page.getByRole('navigation', { name: 'Secciones' }).getByRole('link', { name: 'Sandbox' }).click();
    const section = page.getByRole('region', { name: 'Sesiones de escucha' });
    await expect(section.getByText('No hay sesiones de escucha abiertas.')).toBeVisible();
    await expect(section.getByText('pnpm svc listen --forward-to http://localhost:4000/hook', { exact: true })).toBeVisible();
    await expect(section.getByText('pnpm svc trigger GUIA_ENTREGADA', { exact: true })).toBeVisible();

    listen = svc(['listen', '--forward-to', forwardTo], portal.stack.baseUrl, testToken);
    await expect.poll(() => listen!.lines.some((l) => /whsec_/.test(l)), { timeout: 20_000 }).toBe(true);
    const trigger = svc(['trigger', 'GUIA_ENTREGADA'], portal.stack.baseUrl, testToken);
    expect(await trigger.exited).toBe(0);
    const numeroGuia = trigger.lines[trigger.lines.length - 1]!;
    await expect.poll(() => received.length, { timeout: 15_000 }).toBe(5);

    // The list refreshes by itself: the session, where it forwards, and its five deliveries.
    const session = section.getByRole('region', { name: /^Sesión / });
    await expect(session).toHaveCount(1, { timeout: 15_000 });
    await expect(session.getByRole('heading', { level: 3 })).toContainText(forwardTo);
    const rows = session.getByRole('row').filter({ hasText: numeroGuia });
    await expect(rows.filter({ hasText: 'Exitosa' })).toHaveCount(5, { timeout: 15_000 });
    await expect(rows.first()).toContainText('GUIA_ENTREGADA');
    await expect(rows.last()).toContainText('GUIA_CREADA');
    await portal.axe(page, 'Sandbox (sesiones de escucha)');
    await page.screenshot({ path: join(__dirname, 'results', 'sandbox-escuchas.png'), fullPage: true });
    await portal.docShot(page, 'sandbox-escuchas');

    // Ctrl-C ends the session: the page stops listing it.
    listen.child.kill('SIGINT');
    expect(await listen.exited).toBe(0);
    await page.reload();
    await expect(page.getByRole('region', { name: 'Sesiones de escucha' }).getByText('No hay sesiones de escucha abiertas.')).toBeVisible();
  } finally {
    listen?.child.kill('SIGKILL');
    await new Promise<void>((resolve) => local.close(() => resolve()));
  }
});
