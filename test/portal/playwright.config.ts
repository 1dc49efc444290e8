import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from '@playwright/test';

/**
 * `pnpm test:portal`: the portal in a real browser, Debian's Chromium (no browser download is possible
 * here), against the whole stack as `pnpm start` starts it (global-setup.ts). One worker: the journeys
 * share that stack, and the machine has two cores.
 */
function chromiumPath(): string {
  if (process.env.PORTAL_CHROMIUM) return process.env.PORTAL_CHROMIUM;
  if (existsSync('/usr/bin/chromium')) return '/usr/bin/chromium';
  try {
    return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('Chromium is missing: apt-get install chromium (or set PORTAL_CHROMIUM)');
  }
}

export default defineConfig({
  testDir: '.',
  testMatch: '*.spec.ts',
  // Failure screenshots and traces: git-ignored.
  outputDir: join(__dirname, 'results'),
  globalSetup: './global-setup.ts',
  globalTeardown: './global-teardown.ts',
  workers: 1,
  fullyParallel: false,
  timeout: 90_000,
  expect: { timeout: 10_000 },
  retries: 0,
  reporter: [['list']],
  use: {
    browserName: 'chromium',
    locale: 'es-GT',
    timezoneId: 'America/Guatemala',
    viewport: { width: 1280, height: 900 },
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: chromiumPath(),
      args: [
        '--no-sandbox',
        // Nothing leaves the machine: no background fetches, updates, sync or field trials.
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-default-apps',
        '--disable-domain-reliability',
        '--disable-field-trial-config',
        '--metrics-recording-only',
        '--no-first-run',
        '--no-pings',
      ],
    },
  },
});
