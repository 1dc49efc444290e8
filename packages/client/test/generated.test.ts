import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The generated types are what their generators make of the OpenAPI document now: regenerating
 * gives no difference (`node openapi/build.mjs`, then both scripts, after any change of the YAML or
 * the event catalog). `node openapi/build.mjs --check` (services/gateway/test/openapi.test.ts) holds
 * the document itself to the YAML and the catalog.
 */

const ROOT = join(__dirname, '../../..');
const GENERATORS = [
  { script: 'packages/client/scripts/generate.mjs', committed: 'packages/client/src/schema.generated.ts' },
  { script: 'packages/webhook-signature/scripts/generate-events.mjs', committed: 'packages/webhook-signature/src/events.generated.ts' },
];

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-client-generated-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it.each(GENERATORS)('$committed is what $script generates from the document', ({ script, committed }) => {
  const out = join(dir, script.split('/')[1]!);
  execFileSync(process.execPath, [join(ROOT, script), '--out', out], { stdio: 'pipe' });
  const fresh = readFileSync(join(out, committed.split('/').pop()!), 'utf8');
  const mismatch = fresh === readFileSync(join(ROOT, committed), 'utf8') ? null : `${committed} is stale: run node ${script}`;
  expect(mismatch).toBeNull();
  expect(fresh).toContain('EventoGuiaEntregada');
}, 60_000);
