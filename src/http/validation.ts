// Request validation shared by every route: what the TypeBox schemas cannot say.
//
// - checkInput (a preValidation hook): no string or key anywhere in a body, query or path may hold
//   a NUL character or a lone UTF-16 surrogate (PostgreSQL's text and jsonb refuse both, and would
//   answer a 500), and JSON is nested at most JSON_MAX_DEPTH levels (deeper values overflow the
//   stack of recursive code further on). Checked once here, not per route.
// - bodies are validated without type coercion (`{"assertion": 5}` is a number, not "5"); query
//   strings and path parameters keep it, as they arrive as text.
// - `format: date-time` accepts years 0001..9999 only (PostgreSQL has no year 0).
// - the `userRegex` keyword refuses a pattern the linear-time engine cannot compile.

import { emailProblem } from '../app/email.ts';
import { AjvCompiler } from '@fastify/ajv-compiler';
import type { FastifyServerOptions } from 'fastify';
import { ParameterError } from '../app/errors.ts';
import { compileUserRegex } from '../app/user-regex.ts';

interface Frame {
  value: unknown;
  path: string;
  depth: number;
}

// the form schema errors name fields in (src/http/errors.ts): `fieldConfigurations.0.defaultValue`
const child = (path: string, key: string | number) => (path ? `${path}.${key}` : String(key));

function badText(s: string): string | null {
  if (s.includes('\u0000')) return 'contains a NUL character (\\u0000), which is not allowed';
  if (!s.isWellFormed()) return 'contains a lone UTF-16 surrogate (e.g. \\ud800), which is not valid Unicode';
  return null;
}

/**
 * Refuses a NUL character or lone surrogate in any string or key, and nesting deeper than
 * `maxDepth`, with a parameter_error naming the field. Iterative: any depth is safe to walk.
 */
export function checkInput(value: unknown, part: string, maxDepth: number): void {
  const stack: Frame[] = [{ value, path: '', depth: 0 }];
  while (stack.length > 0) {
    const { value: v, path, depth } = stack.pop() as Frame;
    const name = path || part;
    if (typeof v === 'string') {
      const bad = badText(v);
      if (bad) throw new ParameterError(`${name} ${bad}`);
      continue;
    }
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) continue;
    if (depth >= maxDepth) throw new ParameterError(`${name} is nested deeper than ${maxDepth} levels (JSON_MAX_DEPTH)`);
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: child(path, i), depth: depth + 1 });
      continue;
    }
    for (const [key, member] of Object.entries(v)) {
      const bad = badText(key);
      if (bad) throw new ParameterError(`${name}: a member name ${bad}`);
      stack.push({ value: member, path: child(path, key), depth: depth + 1 });
    }
  }
}

interface AjvLike {
  formats: Record<string, unknown>;
  addFormat(name: string, format: { type: 'string'; validate: (s: string) => boolean }): unknown;
  addKeyword(definition: object): unknown;
}

/** The date-time check ajv-formats installed, as a function. */
function formatCheck(format: unknown): (s: string) => boolean {
  if (typeof format === 'function') return format as (s: string) => boolean;
  if (format instanceof RegExp) return (s) => format.test(s);
  const validate = (format as { validate?: unknown } | undefined)?.validate;
  if (typeof validate === 'function') return validate as (s: string) => boolean;
  if (validate instanceof RegExp) return (s) => validate.test(s);
  return () => true;
}

function yearInRange(s: string): boolean {
  const t = Date.parse(s);
  if (Number.isNaN(t)) return false;
  const year = new Date(t).getUTCFullYear();
  return year >= 1 && year <= 9999;
}

type UserRegexValidate = ((schema: boolean, data: unknown) => boolean) & { errors?: object[] | null };

function extendAjv(ajvInstance: unknown): void {
  const ajv = ajvInstance as AjvLike;
  const dateTime = formatCheck(ajv.formats['date-time']);
  ajv.addFormat('date-time', { type: 'string', validate: (s) => dateTime(s) && yearInRange(s) });
  // one rule for an address wherever a schema asks for one (src/app/email.ts), not ajv-formats' looser one
  ajv.addFormat('email', { type: 'string', validate: (s) => emailProblem(s) === null });
  const validate: UserRegexValidate = (schema, data) => {
    if (!schema || typeof data !== 'string') return true;
    const re = compileUserRegex(data);
    validate.errors = re.ok ? null : [{ keyword: 'userRegex', message: re.reason, params: {} }];
    return re.ok;
  };
  ajv.addKeyword({ keyword: 'userRegex', type: 'string', schemaType: 'boolean', errors: true, validate });
}

type ValidatorFactory = NonNullable<NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']>;
type RouteSchema = { schema: unknown; httpPart?: string };

/** Fastify's schema options: a coercing validator for query and path, a strict one for bodies, both extended above. */
export function validationOptions(): Pick<FastifyServerOptions, 'ajv' | 'schemaController'> {
  const factory = AjvCompiler() as unknown as (externalSchemas: unknown, options: object) => (route: RouteSchema) => unknown;
  const buildValidator = (externalSchemas: unknown, options: { customOptions?: Record<string, unknown> }) => {
    const coercing = factory(externalSchemas, options);
    const strict = factory(externalSchemas, { ...options, customOptions: { ...options.customOptions, coerceTypes: false } });
    return (route: RouteSchema) => (route.httpPart === 'body' ? strict : coercing)(route);
  };
  return {
    ajv: { customOptions: { coerceTypes: 'array', useDefaults: true, removeAdditional: false, allErrors: false }, onCreate: extendAjv },
    schemaController: { compilersFactory: { buildValidator: buildValidator as unknown as ValidatorFactory } },
  };
}
