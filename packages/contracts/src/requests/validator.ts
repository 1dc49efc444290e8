import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { AppError } from '../errors';

const options = { strict: true, strictRequired: false, coerceTypes: false, useDefaults: false } as const;
// Two compilers: the first stops at the first problem, so a valid body (the common case) and the
// verdict cost what they did; only a body already known bad is walked again to list every problem.
const firstError = new Ajv({ ...options, allErrors: false });
const everyError = new Ajv({ ...options, allErrors: true });
addFormats(firstError);
addFormats(everyError);

/** At most this many problems are named in one message; the rest are counted. */
export const MAX_PROBLEMS = 20;

function fieldOf(err: ErrorObject): string {
  const path = err.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), '');
  if (err.keyword === 'required') {
    const missing = (err.params as { missingProperty: string }).missingProperty;
    return path ? `${path}.${missing}` : missing;
  }
  if (err.keyword === 'additionalProperties') {
    const extra = (err.params as { additionalProperty: string }).additionalProperty;
    return path ? `${path}.${extra}` : extra;
  }
  return path || '(body)';
}

/** A human sentence that names the field: "destinatario.nombre is required". */
export function describeError(err: ErrorObject): string {
  const field = fieldOf(err);
  switch (err.keyword) {
    case 'required':
      return `${field} is required`;
    case 'additionalProperties':
      return `${field} is not an accepted field`;
    case 'type':
      return `${field} must be of type ${(err.params as { type: string }).type}`;
    case 'minLength':
      return `${field} must not be empty`;
    case 'maxLength':
      return `${field} must be at most ${(err.params as { limit: number }).limit} characters`;
    case 'minItems':
      return `${field} must have at least ${(err.params as { limit: number }).limit} item(s)`;
    case 'maxItems':
      return `${field} must have at most ${(err.params as { limit: number }).limit} items`;
    case 'enum':
      return `${field} must be one of ${(err.params as { allowedValues: unknown[] }).allowedValues.map(String).join(', ')}`;
    case 'minProperties':
      return 'at least one field is required';
    default:
      return `${field} ${err.message ?? 'is invalid'}`;
  }
}

// Postgres stores neither U+0000 (in text or jsonb) nor an unpaired UTF-16 surrogate (jsonb refuses
// its escape; text would silently turn it into U+FFFD): refused here, before they reach a statement.
// eslint-disable-next-line no-control-regex -- U+0000 is the very character to find
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The path (innermost first) to the first string that Postgres could not store as given, if any.
 * The path is built only once such a string is found: every valid body is walked, and building each
 * field's path on the way cost a string per field.
 */
function unstorablePath(value: unknown): Array<string | number> | undefined {
  if (typeof value === 'string') return UNSTORABLE.test(value) ? [] : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorablePath(value[i]);
      if (found) return (found.push(i), found);
    }
  } else if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    for (const k in record) {
      if (!Object.prototype.hasOwnProperty.call(record, k)) continue;
      const found = unstorablePath(record[k]);
      if (found) return (found.push(k), found);
    }
  }
  return undefined;
}

/** The path of the first string that Postgres could not store as given (`a.b[2].c`, `(body)` for the body itself), if any. */
function unstorableField(value: unknown): string | undefined {
  const path = unstorablePath(value);
  if (path === undefined) return undefined;
  let text = '';
  for (let i = path.length - 1; i >= 0; i--) {
    const part = path[i]!;
    text = typeof part === 'number' ? `${text}[${part}]` : text ? `${text}.${part}` : part;
  }
  return text || '(body)';
}

export type JsonSchema = Readonly<Record<string, unknown>>;

export interface Validator<T> {
  (value: unknown): T;
  schema: JsonSchema;
}

// An `if` error only says that its `then` or `else` failed: that branch's own errors name the field.
const SUMMARY_KEYWORDS = new Set(['if']);

/** Every problem once, in the schema's order, at most MAX_PROBLEMS of them: "a; b; and 3 more". */
export function describeErrors(errors: readonly ErrorObject[]): string {
  const problems = [...new Set(errors.filter((e) => !SUMMARY_KEYWORDS.has(e.keyword)).map(describeError))];
  if (problems.length === 0) return 'invalid body';
  const shown = problems.slice(0, MAX_PROBLEMS);
  const rest = problems.length - shown.length;
  return rest > 0 ? `${shown.join('; ')}; and ${rest} more` : shown.join('; ');
}

/** Values (objects, arrays, scalars) past which a bad body is not walked again to list every problem. */
const MAX_LISTED_NODES = 10_000;

/**
 * True when the value has at most `budget` nodes. allErrors reports every extra property and every
 * bad item, so a 1 MiB body of 100,000 unknown fields would cost about 150 ms to list: such a body
 * gets its first problem only (a batch of 100 shipments is about 1,500 nodes).
 */
function smallEnough(value: unknown, budget = MAX_LISTED_NODES): boolean {
  let left = budget;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    if (--left < 0) return false;
    const v = stack.pop();
    if (Array.isArray(v)) stack.push(...v.slice(0, left + 1));
    else if (v !== null && typeof v === 'object') stack.push(...Object.values(v).slice(0, left + 1));
  }
  return true;
}

/** Compiles once; the returned function throws VALIDATION_ERROR naming every bad field (up to MAX_PROBLEMS). */
export function compile<T>(schema: JsonSchema): Validator<T> {
  const fn: ValidateFunction<T> = firstError.compile<T>(schema);
  const all = everyError.compile(schema);
  const validate = (value: unknown): T => {
    if (value === undefined) throw new AppError('VALIDATION_ERROR', 'a JSON body is required');
    if (!fn(value)) {
      const listed = smallEnough(value) && !all(value) ? all.errors : undefined;
      throw new AppError('VALIDATION_ERROR', describeErrors(listed ?? fn.errors ?? []));
    }
    // Walked only once the schema holds, so its depth and size are bounded.
    const bad = unstorableField(value);
    if (bad) throw new AppError('VALIDATION_ERROR', `${bad} must not contain NUL characters or unpaired surrogates`);
    return value;
  };
  return Object.assign(validate, { schema });
}
