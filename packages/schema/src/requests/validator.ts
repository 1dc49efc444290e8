import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { AppError } from '../errors';

const ajv = new Ajv({ allErrors: false, strict: true, strictRequired: false, coerceTypes: false, useDefaults: false });
addFormats(ajv);

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

/** The path of the first string that Postgres could not store as given, if any. */
function unstorableField(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return UNSTORABLE.test(value) ? path || '(body)' : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableField(value[i], `${path}[${i}]`);
      if (found) return found;
    }
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const found = unstorableField(v, path ? `${path}.${k}` : k);
      if (found) return found;
    }
  }
  return undefined;
}

export type JsonSchema = Readonly<Record<string, unknown>>;

export interface Validator<T> {
  (value: unknown): T;
  schema: JsonSchema;
}

/** Compiles once; the returned function throws VALIDATION_ERROR naming the first bad field. */
export function compile<T>(schema: JsonSchema): Validator<T> {
  const fn: ValidateFunction<T> = ajv.compile<T>(schema);
  const validate = (value: unknown): T => {
    if (value === undefined) throw new AppError('VALIDATION_ERROR', 'a JSON body is required');
    if (!fn(value)) {
      const first = fn.errors?.[0];
      throw new AppError('VALIDATION_ERROR', first ? describeError(first) : 'invalid body');
    }
    // Walked only once the schema holds, so its depth and size are bounded.
    const bad = unstorableField(value, '');
    if (bad) throw new AppError('VALIDATION_ERROR', `${bad} must not contain NUL characters or unpaired surrogates`);
    return value;
  };
  return Object.assign(validate, { schema });
}
