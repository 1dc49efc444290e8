/* global console */
// Writes the JSON form of openapi/openapi.yaml where the gateway serves it from
// (services/gateway/src/openapi/openapi.json: imported, so tsc, tsx, jest and the esbuild bundle
// all carry it without reading a file at run time). Run after editing the YAML:
//
//   node openapi/build.mjs
//
// services/gateway/test/openapi.test.ts fails while the two differ.
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import YAML from 'yaml';

const here = import.meta.dirname;
const source = resolve(here, 'openapi.yaml');
const target = resolve(here, '../services/gateway/src/openapi/openapi.json');

// Aliases expand to plain objects: the JSON holds no anchors, and no YAML-only construct is used.
const document = YAML.parse(readFileSync(source, 'utf8'), { maxAliasCount: -1 });
writeFileSync(target, `${JSON.stringify(document, null, 2)}\n`);
console.log(`wrote ${target}`);
