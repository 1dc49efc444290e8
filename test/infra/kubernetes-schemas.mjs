// Validates Kubernetes objects against the JSON schemas of a pinned Kubernetes version: those of
// `kubernetes-models` (5.1.0: Kubernetes v1.36.0) and, for KEDA's ScaledObject, of
// `@kubernetes-models/keda` (2.0.0, from KEDA's v2 API types), each compiled by ajv into a validate
// function the package ships. Both packages are ES modules only, which jest's module system does
// not load, so test/infra/kubernetes.test.ts runs this file with node: the objects as a JSON array
// on stdin, one `{ kind, name, errors }` per object on stdout (errors empty when valid).
import { Buffer } from 'node:buffer';
import process from 'node:process';

/** Where each apiVersion's models are: the core group at `v1`, the others under their group. */
function modelModule(apiVersion) {
  if (apiVersion === 'keda.sh/v1alpha1') return '@kubernetes-models/keda/keda.sh/v1alpha1';
  return `kubernetes-models/${apiVersion}`;
}

async function validateOne(object) {
  const { apiVersion, kind } = object;
  const name = object.metadata?.name ?? '(no name)';
  let model;
  try {
    model = (await import(modelModule(apiVersion)))[kind];
  } catch {
    model = undefined;
  }
  if (typeof model !== 'function') return { kind, name, errors: [`no schema for ${apiVersion} ${kind}`] };
  try {
    new model(object).validate();
    return { kind, name, errors: [] };
  } catch (err) {
    return { kind, name, errors: [err instanceof Error ? err.message : String(err)] };
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const objects = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const results = [];
for (const object of objects) results.push(await validateOne(object));
process.stdout.write(JSON.stringify(results));
