// Calculations: the SDK's `{ expression }` fields. An expression is arithmetic over fields of the query's
// tables and numbers, compiled to SQL here; like compile.ts, SQL text comes only from this file's
// fragments and the registry's field SQL (the field resolver), and every number travels as a parameter.
//
// Grammar (whitespace between tokens is free):
//   expression := term (('+' | '-') term)*
//   term       := unary (('*' | '/' | '%') unary)*
//   unary      := '-' unary | primary
//   primary    := number | field | function '(' expression (',' expression)* ')' | '(' expression ')'
//   field      := a field as a column names it (`measurement.value`, `pin.fields.depth`); in brackets when a
//                 form-field key holds other characters: `[pin.fields.max depth]`
//   function   := abs | round | floor | ceil | sqrt | ln | log10 | exp | least | greatest | coalesce
// A number field is used as it is; a form field as a number (a form value that is not a number is null);
// a time field as seconds since 1970-01-01 UTC, so `report.createdAt - report.generatedAt` is a delay in
// seconds. A text or boolean field is refused. What has no value (division by zero, the square root or
// logarithm of a number out of its domain) is null, never an error.

import { ParameterError } from '../../app/errors.ts';
import type { FieldType } from './sources.ts';

/** Limits of one expression, each answered with a parameter_error naming the member. */
export const EXPRESSION_LIMITS = {
  /** characters of the expression text */
  length: 1000,
  /** nesting of parentheses and function calls */
  depth: 20,
  /** numbers and fields together */
  operands: 100,
} as const;

/** The SQL of a field that an expression names, as the query's compiler resolves it. */
export type FieldResolver = (field: string, dataTypeHint: 'number') => { sql: string; type: FieldType };
/** Adds a value as a statement parameter and answers its placeholder (with its cast). */
export type ParamAdder = (value: unknown, cast: string) => string;

// function name → [arity min, arity max, SQL of the call from its arguments' SQL]
const FUNCTIONS: Record<string, [number, number, (a: string[]) => string]> = {
  abs: [1, 1, ([x]) => `abs(${x})`],
  round: [1, 1, ([x]) => `round(${x})`],
  floor: [1, 1, ([x]) => `floor(${x})`],
  ceil: [1, 1, ([x]) => `ceil(${x})`],
  sqrt: [1, 1, ([x]) => `(CASE WHEN ${x} >= 0 THEN sqrt(${x}) END)`],
  ln: [1, 1, ([x]) => `(CASE WHEN ${x} > 0 THEN ln(${x}) END)`],
  log10: [1, 1, ([x]) => `(CASE WHEN ${x} > 0 THEN log(${x}) END)`],
  // exp past e^709 does not fit a double: null like any other value out of reach
  exp: [1, 1, ([x]) => `(CASE WHEN ${x} <= 709 THEN exp(${x}) END)`],
  least: [2, 10, (a) => `least(${a.join(', ')})`],
  greatest: [2, 10, (a) => `greatest(${a.join(', ')})`],
  coalesce: [2, 10, (a) => `coalesce(${a.join(', ')})`],
};
export const EXPRESSION_FUNCTIONS = Object.keys(FUNCTIONS);

type Token = { kind: 'number' | 'name' | 'op'; text: string; at: number };

const TOKEN = /\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)|([A-Za-z_]\w*(?:\.\w+)*)|\[([^\]]{1,1000})\]|([-+*/%(),]))/y;

function tokens(text: string, name: string): Token[] {
  const out: Token[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < text.length) {
    const at = TOKEN.lastIndex;
    if (/^\s*$/.test(text.slice(at))) break;
    const m = TOKEN.exec(text);
    if (!m) throw new ParameterError(`${name}: unexpected ${JSON.stringify(text.slice(at).trim().slice(0, 20))} at character ${at + 1}`);
    if (m[1] !== undefined) out.push({ kind: 'number', text: m[1], at });
    else if (m[2] !== undefined || m[3] !== undefined) out.push({ kind: 'name', text: (m[2] ?? m[3]).trim(), at });
    else out.push({ kind: 'op', text: m[4], at });
  }
  return out;
}

class Parser {
  private i = 0;
  private operands = 0;
  private readonly list: Token[];
  private readonly name: string;
  private readonly resolve: FieldResolver;
  private readonly param: ParamAdder;

  constructor(list: Token[], name: string, resolve: FieldResolver, param: ParamAdder) {
    this.list = list;
    this.name = name;
    this.resolve = resolve;
    this.param = param;
  }

  private peek(): Token | undefined {
    return this.list[this.i];
  }

  private fail(what: string): never {
    const t = this.peek();
    throw new ParameterError(`${this.name}: ${what}${t ? ` at character ${t.at + 1} (${JSON.stringify(t.text)})` : ' at the end'}`);
  }

  private take(op: string): boolean {
    const t = this.peek();
    if (t?.kind === 'op' && t.text === op) {
      this.i++;
      return true;
    }
    return false;
  }

  whole(): string {
    if (this.list.length === 0) throw new ParameterError(`${this.name}: the expression is empty`);
    const sql = this.expression(1);
    if (this.i < this.list.length) this.fail('expected an operator');
    return sql;
  }

  private expression(depth: number): string {
    if (depth > EXPRESSION_LIMITS.depth) this.fail(`parentheses and functions nest at most ${EXPRESSION_LIMITS.depth} levels`);
    let sql = this.term(depth);
    for (;;) {
      if (this.take('+')) sql = `(${sql} + ${this.term(depth)})`;
      else if (this.take('-')) sql = `(${sql} - ${this.term(depth)})`;
      else return sql;
    }
  }

  private term(depth: number): string {
    let sql = this.unary(depth);
    for (;;) {
      if (this.take('*')) sql = `(${sql} * ${this.unary(depth)})`;
      else if (this.take('/')) sql = `(${sql} / NULLIF(${this.unary(depth)}, 0))`;
      // the remainder of the division, as for doubles in most languages (SQL's mod takes numerics only)
      else if (this.take('%')) {
        const d = this.unary(depth);
        sql = `(${sql} - trunc(${sql} / NULLIF(${d}, 0)) * ${d})`;
      } else return sql;
    }
  }

  private unary(depth: number): string {
    if (this.take('-')) return `(-${this.unary(depth + 1)})`;
    return this.primary(depth);
  }

  private primary(depth: number): string {
    const t = this.peek();
    if (!t) this.fail('expected a number, a field or (');
    if (t.kind === 'op') {
      if (!this.take('(')) this.fail('expected a number, a field or (');
      const inner = this.expression(depth + 1);
      if (!this.take(')')) this.fail('expected )');
      return inner;
    }
    if (++this.operands > EXPRESSION_LIMITS.operands) this.fail(`an expression holds at most ${EXPRESSION_LIMITS.operands} numbers and fields`);
    this.i++;
    if (t.kind === 'number') {
      const n = Number(t.text);
      if (!Number.isFinite(n)) throw new ParameterError(`${this.name}: ${t.text} is not a finite number`);
      return this.param(n, 'float8');
    }
    if (this.peek()?.kind === 'op' && this.peek()?.text === '(') return this.call(t, depth);
    return this.field(t);
  }

  private call(t: Token, depth: number): string {
    const fn = Object.hasOwn(FUNCTIONS, t.text) ? FUNCTIONS[t.text] : undefined;
    if (!fn) throw new ParameterError(`${this.name}: ${t.text} is not a function; functions: ${EXPRESSION_FUNCTIONS.join(', ')}`);
    this.take('(');
    const args = [this.expression(depth + 1)];
    while (this.take(',')) args.push(this.expression(depth + 1));
    if (!this.take(')')) this.fail('expected , or )');
    const [min, max, sql] = fn;
    if (args.length < min || args.length > max) {
      throw new ParameterError(`${this.name}: ${t.text} takes ${min === max ? min : `${min} to ${max}`} argument${max === 1 ? '' : 's'}, not ${args.length}`);
    }
    return sql(args);
  }

  private field(t: Token): string {
    const f = this.resolve(t.text, 'number');
    if (f.type === 'number' || f.type === 'integer') return `(${f.sql})::float8`;
    if (f.type === 'timestamp') return `extract(epoch FROM ${f.sql})::float8`;
    throw new ParameterError(`${this.name}: ${t.text} is a ${f.type}; a calculation takes numbers and times`);
  }
}

/** The SQL (a double precision) of a calculation; `name` is the member the errors name (`columns[0].field.expression`). */
export function compileExpression(text: unknown, name: string, resolve: FieldResolver, param: ParamAdder): string {
  if (typeof text !== 'string') throw new ParameterError(`${name} must be a string`);
  if (text.length > EXPRESSION_LIMITS.length) throw new ParameterError(`${name} must be at most ${EXPRESSION_LIMITS.length} characters`);
  return new Parser(tokens(text, name), name, resolve, param).whole();
}
