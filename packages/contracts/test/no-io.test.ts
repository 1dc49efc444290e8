import { readdirSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/**
 * @svc/contracts is what the services agree on (events, errors, request and job schemas, table
 * types, time) and nothing that does I/O: loading it or calling it never reaches Postgres, Redis, a
 * queue, the file system or the network. Every import of its sources that is still there at run
 * time (anything but `import type` and `export type`) must name a module that does no I/O.
 */

const SRC = resolve(__dirname, '../src');
/** npm packages that do I/O: drivers, clients, servers, loggers. */
const IO_PACKAGES = new Set(['pg', 'pg-pool', 'pg-cursor', 'pg-query-stream', 'ioredis', 'redis', 'bullmq', 'kysely', 'undici', 'express', 'pino', 'prom-client']);
/** Node's built-ins that do no I/O; any other (fs, net, http, dns, child_process...) does. */
const PURE_BUILTINS = new Set(['assert', 'buffer', 'crypto', 'events', 'path', 'querystring', 'string_decoder', 'url', 'util']);

interface Offence {
  file: string;
  line: number;
  specifier: string;
  reason: string;
}

/** Why a contract may not load `specifier` at run time; undefined when it may. */
function ioReason(specifier: string, file: string): string | undefined {
  if (specifier.startsWith('.')) {
    const target = resolve(file, '..', specifier);
    return target === SRC || target.startsWith(SRC + sep) ? undefined : 'a module outside the package';
  }
  if (specifier.startsWith('@svc/')) return 'another workspace package';
  if (isBuiltin(specifier)) return PURE_BUILTINS.has(specifier.replace(/^node:/, '').split('/')[0]!) ? undefined : 'a Node built-in that does I/O';
  const name = specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
  return IO_PACKAGES.has(name) ? 'a package that does I/O' : undefined;
}

/** The imports of `text` (the module at `file`) that are loaded at run time and do I/O. */
function ioImports(file: string, text: string): Offence[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: Offence[] = [];
  const check = (node: ts.Node, specifier: ts.Expression | undefined): void => {
    if (!specifier || !ts.isStringLiteralLike(specifier)) return;
    const reason = ioReason(specifier.text, file);
    const line = source.getLineAndCharacterOfPosition(node.getStart()).line + 1;
    if (reason) found.push({ file: relative(SRC, file).split(sep).join('/'), line, specifier: specifier.text, reason });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      // `import { type A }` is not enough: under verbatimModuleSyntax it still loads the module.
      if (!node.importClause?.isTypeOnly) check(node, node.moduleSpecifier);
    } else if (ts.isExportDeclaration(node)) {
      if (!node.isTypeOnly) check(node, node.moduleSpecifier);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      if (!node.isTypeOnly) check(node, node.moduleReference.expression);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require')) check(node, node.arguments[0]);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.(ts|tsx|mts|cts|js|mjs|cjs)$/.test(entry.name) ? [path] : [];
  });
}

describe('@svc/contracts does no I/O', () => {
  const files = sources(SRC);
  const probe = (text: string): string[] => ioImports(join(SRC, 'probe.ts'), text).map((o) => o.specifier);

  it('walks every module of the package', () => {
    expect(files.map((f) => relative(SRC, f).split(sep).join('/'))).toEqual(expect.arrayContaining(['index.ts', 'errors.ts', 'events.ts', 'jobs.ts']));
  });

  it('imports nothing that does I/O, but for its types', () => {
    expect(files.flatMap((f) => ioImports(f, readFileSync(f, 'utf8')))).toEqual([]);
  });

  it('sees every way a module is loaded at run time', () => {
    expect(probe("import { Queue } from 'bullmq';")).toEqual(['bullmq']);
    expect(probe("import { type Kysely } from 'kysely';")).toEqual(['kysely']);
    expect(probe("export { sql } from 'kysely';")).toEqual(['kysely']);
    expect(probe("import 'pg';")).toEqual(['pg']);
    expect(probe("import pg = require('pg');")).toEqual(['pg']);
    expect(probe("const fs = require('fs');")).toEqual(['fs']);
    expect(probe("export const load = () => import('node:net');")).toEqual(['node:net']);
    expect(probe("import { Redis } from 'ioredis';")).toEqual(['ioredis']);
    expect(probe("import { runService } from '@svc/platform';")).toEqual(['@svc/platform']);
    expect(probe("import { createDb } from '../../platform/src/db/database';")).toEqual(['../../platform/src/db/database']);
  });

  it('lets through types, pure built-ins, pure packages and its own modules', () => {
    const text = [
      "import type { Kysely } from 'kysely';",
      "export type { JobsOptions } from 'bullmq';",
      "import { createHash } from 'node:crypto';",
      "import Ajv from 'ajv';",
      "import { AppError } from './errors';",
    ].join('\n');
    expect(probe(text)).toEqual([]);
  });
});
