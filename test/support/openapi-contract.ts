import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent';
import { internalOpenApiDocument, openApiDocument } from '../../services/gateway/src/openapi/openapi.routes';

// Checks real answers against openapi/openapi.yaml: status, headers and body. The documents it
// builds (the public one and the internal routes' one) are dereferenced by
// @apidevtools/swagger-parser and their schemas compiled by ajv's draft 2020-12 build, the dialect of
// OpenAPI 3.1 (`jsonSchemaDialect`), so the documents and their checks read JSON Schema the same way.

export const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
export type Method = (typeof METHODS)[number];

interface HeaderObject {
  required?: boolean;
  schema?: Record<string, unknown>;
}
interface ResponseObject {
  headers?: Record<string, HeaderObject>;
  content?: Record<string, { schema?: Record<string, unknown> }>;
}
interface OperationObject {
  responses: Record<string, ResponseObject>;
}
export interface OpenApi {
  paths: Record<string, Partial<Record<Method, OperationObject>>>;
  webhooks?: Record<string, Partial<Record<Method, { parameters?: Array<{ name: string; in: string; required?: boolean; schema: Record<string, unknown> }>; requestBody: { content: Record<string, { schema: Record<string, unknown> }> } }>>>;
  components: { schemas: Record<string, Record<string, unknown>> };
}

/** A fresh, dereferenced copy of one served document (validated on the way by swagger-parser). */
export async function dereferenced(doc: Readonly<Record<string, unknown>>): Promise<OpenApi> {
  return (await SwaggerParser.dereference(structuredClone(doc) as never)) as unknown as OpenApi;
}

/**
 * Both served documents as one for checking answers: the public document with the internal one's
 * paths beside its own (dereferenced apart, so no reference crosses between them).
 */
export async function loadDocument(): Promise<OpenApi> {
  const [pub, internal] = await Promise.all([dereferenced(openApiDocument), dereferenced(internalOpenApiDocument)]);
  return { ...pub, paths: { ...pub.paths, ...internal.paths } };
}

/** `/webhooks/{id}` → a RegExp for concrete paths. */
function templateRegExp(template: string): RegExp {
  const escaped = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+');
  return new RegExp(`^${escaped}$`);
}

export interface CheckedCall {
  method: Method;
  template: string;
  status: number;
}

export class ContractChecker {
  readonly calls: CheckedCall[] = [];
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  private readonly compiled = new WeakMap<object, ValidateFunction>();
  private readonly templates: Array<{ template: string; re: RegExp; statics: number }>;

  constructor(readonly doc: OpenApi) {
    addFormats(this.ajv);
    this.templates = Object.keys(doc.paths)
      .map((template) => ({ template, re: templateRegExp(template), statics: template.split('/').filter((s) => s && !s.startsWith('{')).length }))
      // Static segments win over parameters (as a router would pick).
      .sort((a, b) => b.statics - a.statics);
  }

  private validator(schema: Record<string, unknown>): ValidateFunction {
    let fn = this.compiled.get(schema);
    if (!fn) {
      fn = this.ajv.compile(schema);
      this.compiled.set(schema, fn);
    }
    return fn;
  }

  /** The document's path template for a concrete path (query stripped), or undefined. */
  templateOf(path: string): string | undefined {
    const bare = path.split('?')[0]!;
    return this.templates.find((t) => t.re.test(bare))?.template;
  }

  /** Every problem of one answer against the document: [] when it conforms. */
  problems(method: Method, path: string, res: Pick<Response, 'status' | 'headers' | 'body' | 'text'>): string[] {
    const template = this.templateOf(path);
    if (!template) return [`${method.toUpperCase()} ${path}: no path of the document matches`];
    const operation = this.doc.paths[template]?.[method];
    if (!operation) return [`${method.toUpperCase()} ${template}: the document has no such operation`];
    const status = String(res.status);
    const declared = operation.responses[status] ?? operation.responses[`${status[0]}XX`] ?? operation.responses.default;
    const where = `${method.toUpperCase()} ${template} → ${status}`;
    if (!declared) return [`${where}: status not documented (documented: ${Object.keys(operation.responses).join(', ')})`];

    const out: string[] = [];
    for (const [name, header] of Object.entries(declared.headers ?? {})) {
      const got = res.headers[name.toLowerCase()] as string | string[] | undefined;
      if (got === undefined) {
        if (header.required) out.push(`${where}: required header ${name} is missing`);
        continue;
      }
      if (!header.schema) continue;
      // Node gives a repeatable header (Set-Cookie) as an array: each value is checked.
      for (const raw of ([] as string[]).concat(got)) {
        // Headers are text: an integer header is checked as the integer it spells.
        const type = header.schema.type;
        const value = (type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw;
        const fn = this.validator(header.schema);
        if (!fn(value)) out.push(`${where}: header ${name}=${JSON.stringify(raw)} ${this.ajv.errorsText(fn.errors)}`);
      }
    }

    const contentType = String(res.headers['content-type'] ?? '').split(';')[0]!.trim();
    const media = declared.content ?? {};
    if (Object.keys(media).length === 0) {
      if (res.text) out.push(`${where}: a body, where the document declares none`);
      return out;
    }
    const entry = media[contentType];
    if (!entry) {
      out.push(`${where}: content type ${JSON.stringify(contentType)} not documented (${Object.keys(media).join(', ')})`);
      return out;
    }
    if (entry.schema) {
      const fn = this.validator(entry.schema);
      if (!fn(res.body)) {
        out.push(`${where}: body ${this.ajv.errorsText(fn.errors, { dataVar: 'body' })}; body was ${JSON.stringify(res.body).slice(0, 500)}`);
      }
    }
    return out;
  }

  /** Throws with every problem unless the answer conforms; records the call for the coverage count. */
  check(method: Method, path: string, res: Response): Response {
    const problems = this.problems(method, path, res);
    if (problems.length > 0) throw new Error(`answer does not match openapi/openapi.yaml:\n  ${problems.join('\n  ')}`);
    this.calls.push({ method, template: this.templateOf(path)!, status: res.status });
    return res;
  }

  /** Sends a request through `agent` and checks its answer. */
  async send(
    agent: TestAgent,
    method: Method,
    path: string,
    opts: { auth?: string; body?: unknown; headers?: Record<string, string>; raw?: { type: string; data: string } } = {},
  ): Promise<Response> {
    let r = agent[method](path);
    if (opts.auth !== undefined) r = r.set('Authorization', opts.auth);
    for (const [k, v] of Object.entries(opts.headers ?? {})) r = r.set(k, v);
    if (opts.raw) r = r.set('Content-Type', opts.raw.type).send(opts.raw.data);
    else if (opts.body !== undefined) r = r.send(opts.body as object);
    return this.check(method, path, await r);
  }

  /** Every documented (operation, status) pair, as `METHOD template status`. */
  documentedResponses(): string[] {
    const out: string[] = [];
    for (const [template, item] of Object.entries(this.doc.paths)) {
      for (const m of METHODS) {
        const op = item[m];
        if (op) for (const status of Object.keys(op.responses)) out.push(`${m.toUpperCase()} ${template} ${status}`);
      }
    }
    return out;
  }

  /** Every documented operation, as `METHOD template`. */
  documentedOperations(): string[] {
    return Object.entries(this.doc.paths).flatMap(([template, item]) => METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${template}`));
  }

  /** A schema of the document (dereferenced) as a validator, e.g. for a webhook payload. */
  validate(schema: Record<string, unknown>, value: unknown): string | undefined {
    const fn = this.validator(schema);
    return fn(value) ? undefined : this.ajv.errorsText(fn.errors);
  }
}

let shared: Promise<ContractChecker> | undefined;
/** One checker per test file (the document is dereferenced once). */
export function sharedContractChecker(): Promise<ContractChecker> {
  shared ??= loadDocument().then((doc) => new ContractChecker(doc));
  return shared;
}

type Thenable = { then: (onFulfilled?: (res: Response) => unknown, onRejected?: (err: unknown) => unknown) => Promise<unknown> };
type ResponseThen = (onFulfilled: (res: Response) => Response) => Promise<Response>;

/**
 * `agent`, with every answer to a documented operation checked against the document when the test
 * awaits it: a drifting answer rejects with the list of its problems. Paths the document does not
 * have (a test probing an unknown route) and methods it does not use (405s, HEAD, OPTIONS) pass
 * unchecked: the document cannot describe them.
 */
export function checkedAgent(agent: TestAgent, checker: ContractChecker): TestAgent {
  return new Proxy(agent, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof prop !== 'string' || !(METHODS as readonly string[]).includes(prop) || typeof value !== 'function') return value;
      const method = prop as Method;
      return (path: string, ...rest: unknown[]) => {
        const test = (value as (p: string, ...r: unknown[]) => Thenable).call(target, path, ...rest);
        const then = test.then.bind(test) as unknown as ResponseThen;
        test.then = (onFulfilled, onRejected) =>
          then((res: Response) => {
            const template = checker.templateOf(path);
            const documented = template !== undefined && checker.doc.paths[template]?.[method] !== undefined && res.status !== 405;
            return documented ? checker.check(method, path, res) : res;
          }).then(onFulfilled, onRejected);
        return test;
      };
    },
  });
}
