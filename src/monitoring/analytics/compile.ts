// Compiles an analytics query to one parameterised SQL statement. The SQL text is assembled only from
// this file's fragments and the registry's (sources.ts): field names, aggregations, granularities,
// comparisons and named ranges are looked up in allow-lists (own members only, never `__proto__`);
// every value, form-field key, limit and offset travels as a typed parameter. Whatever is not on a list
// is a parameter_error naming the member (`columns[2].field`, `filter.restrictions[0].comparison`).
// A calculation (`{ expression }` in place of a field) is compiled by expression.ts under the same rule.
//
// Shape of the statement:
//   SELECT c0..cn FROM (
//     [limitBy: SELECT *, row_number() OVER (PARTITION BY .. ORDER BY ..) AS rank FROM (]
//       SELECT <column expressions> AS c0..cn FROM <source> <joins> WHERE <environment> AND <row filter> [GROUP BY]
//     [) t WHERE <result filter>] ...) t WHERE rank <= limitedTo
//   ORDER BY <sort>, c0..cn OFFSET .. LIMIT ..
// A filter on fields (and on columns that are not aggregated) applies to the source's rows; a filter on an
// aggregated column applies to the result rows.

import { ParameterError } from '../../app/errors.ts';
import {
  AGGREGATIONS,
  COMPARISONS,
  DATA_TYPE_HINTS,
  GRANULARITIES,
  QUERY_LIMITS,
  type AnalyticsQuery,
  type Column,
  type Condition,
  type Constraint,
  type Field,
} from './query.ts';
import { compileExpression } from './expression.ts';
import { SDK_TABLES, SOURCES, TABLES, type FieldType, type SourceDef, type TableKey } from './sources.ts';

export interface CompiledQuery {
  sql: string;
  params: unknown[];
  columns: number;
}

const own = <T>(record: Partial<Record<string, T>>, key: string): T | undefined => (Object.hasOwn(record, key) ? record[key] : undefined);
const isOneOf = <T extends string>(list: readonly T[], v: unknown): v is T => typeof v === 'string' && (list as readonly string[]).includes(v);
const describe = (v: unknown) => JSON.stringify(v)?.slice(0, 80) ?? String(v);

interface Expr {
  sql: string;
  type: FieldType;
}
interface CompiledColumn extends Expr {
  aggregated: boolean;
}
type Level = 'row' | 'result';

// granularities: the SQL of each (the timestamp's expression is substituted for X); times are UTC
const TRUNCATED = ['hour', 'day', 'week', 'month', 'year'];
const PART_OF: Record<string, string> = { hourOfTheDay: 'hour', dayOfTheWeek: 'isodow', monthOfTheYear: 'month' };

/** Named ranges of `isNamedRange` (UTC): [start included, end excluded]. */
const NAMED_RANGES: Record<string, [string, string]> = {
  today: ["date_trunc('day', now(), 'UTC')", "date_trunc('day', now(), 'UTC') + interval '1 day'"],
  yesterday: ["date_trunc('day', now(), 'UTC') - interval '1 day'", "date_trunc('day', now(), 'UTC')"],
  thisWeek: ["date_trunc('week', now(), 'UTC')", "date_trunc('week', now(), 'UTC') + interval '1 week'"],
  lastWeek: ["date_trunc('week', now(), 'UTC') - interval '1 week'", "date_trunc('week', now(), 'UTC')"],
  thisMonth: ["date_trunc('month', now(), 'UTC')", "date_trunc('month', now(), 'UTC') + interval '1 month'"],
  lastMonth: ["date_trunc('month', now(), 'UTC') - interval '1 month'", "date_trunc('month', now(), 'UTC')"],
  thisYear: ["date_trunc('year', now(), 'UTC')", "date_trunc('year', now(), 'UTC') + interval '1 year'"],
  lastYear: ["date_trunc('year', now(), 'UTC') - interval '1 year'", "date_trunc('year', now(), 'UTC')"],
  last24Hours: ["now() - interval '24 hours'", 'now()'],
  last7Days: ["now() - interval '7 days'", 'now()'],
  last30Days: ["now() - interval '30 days'", 'now()'],
  last365Days: ["now() - interval '365 days'", 'now()'],
};
export const NAMED_RANGE_NAMES = Object.keys(NAMED_RANGES);

/** inGrid: the hashId field it applies to → the grid member column and table it is looked up in. */
const GRID_MEMBERS: Record<string, { column: string; table: string }> = {
  'pinGroup.hashId': { column: 'pin_group_id', table: 'pin_group' },
  'pin.hashId': { column: 'pin_id', table: 'pin' },
};

const SQL_COMPARISON: Record<string, string> = { '=': '=', '<>': '<>', '<': '<', '>': '>', '<=': '<=', '>=': '>=' };
const numeric = (t: FieldType) => t === 'number' || t === 'integer';

class Compiler {
  readonly params: unknown[];
  readonly joins = new Set<TableKey>();
  private constraints = 0;
  columns: CompiledColumn[] = [];
  readonly source: SourceDef;
  readonly sourceName: string;

  constructor(source: SourceDef, sourceName: string, environmentId: number) {
    this.source = source;
    this.sourceName = sourceName;
    this.params = [environmentId];
  }

  param(value: unknown, cast: string): string {
    this.params.push(value);
    return `$${this.params.length}::${cast}`;
  }

  private reach(table: TableKey, name: string): void {
    if (table === this.source.table) return;
    const join = own(this.source.joins, table);
    if (!join)
      throw new ParameterError(
        `${name}: table ${table} cannot be reached from source ${this.sourceName}; reachable: ${[this.source.table, ...Object.keys(this.source.joins)].join(', ')}`,
      );
    for (const before of join.after ?? []) this.reach(before, name);
    this.joins.add(table);
  }

  /** `<table>.<field>` or `<table>.<fields|deviceFields>.<key>` → its SQL, from the registry only. */
  field(field: Field | undefined, name: string, dataTypeHint?: string): Expr {
    if (field !== null && typeof field === 'object') {
      const member = `${name}.expression`;
      return {
        sql: compileExpression(
          field.expression,
          member,
          (f, hint) => this.field(f, member, hint),
          (v, cast) => this.param(v, cast),
        ),
        type: 'number',
      };
    }
    if (typeof field !== 'string' || field === '') throw new ParameterError(`${name} is required: a field such as pinGroup.hashId`);
    const dot = field.indexOf('.');
    const tableName = dot < 0 ? field : field.slice(0, dot);
    const rest = dot < 0 ? '' : field.slice(dot + 1);
    if (!isOneOf(SDK_TABLES, tableName)) throw new ParameterError(`${name}: ${describe(field)} does not name an analytics table (such as pinGroup.hashId)`);
    const table = own(TABLES, tableName);
    if (!table)
      throw new ParameterError(`${name}: table ${tableName} is not available in analytics of this service; available: ${Object.keys(TABLES).join(', ')}`);
    const sub = rest.indexOf('.');
    const member = sub < 0 ? rest : rest.slice(0, sub);
    if (sub >= 0) {
      const column = table.formFields ? own(table.formFields, member) : undefined;
      if (!column) throw new ParameterError(`${name}: ${describe(field)} is not a field of ${tableName}; form fields are ${tableName}.fields.<key>`);
      const key = rest.slice(sub + 1);
      if (key === '' || key.length > QUERY_LIMITS.valueLength)
        throw new ParameterError(`${name}: the form-field key must be 1 to ${QUERY_LIMITS.valueLength} characters`);
      this.reach(tableName as TableKey, name);
      const k = this.param(key, 'text');
      if (dataTypeHint === 'number' || dataTypeHint === 'integer') {
        return { sql: `(CASE WHEN jsonb_typeof(${column} -> ${k}) = 'number' THEN (${column} ->> ${k})::float8 END)`, type: 'number' };
      }
      if (dataTypeHint === 'boolean')
        return { sql: `(CASE WHEN jsonb_typeof(${column} -> ${k}) = 'boolean' THEN (${column} ->> ${k})::boolean END)`, type: 'boolean' };
      return { sql: `(${column} ->> ${k})`, type: 'string' };
    }
    const def = own(table.fields, member);
    if (def === undefined)
      throw new ParameterError(`${name}: ${describe(field)} is not a field of ${tableName}; fields: ${Object.keys(table.fields).join(', ')}`);
    if (def === null) throw new ParameterError(`${name}: ${tableName}.${member} is not kept by this service`);
    this.reach(tableName as TableKey, name);
    return { sql: `(${def.sql})`, type: def.type };
  }

  column(c: Column, name: string): CompiledColumn {
    if (c === null || typeof c !== 'object') throw new ParameterError(`${name} must be an object`);
    if (c.dataTypeHint !== undefined && !isOneOf(DATA_TYPE_HINTS, c.dataTypeHint))
      throw new ParameterError(`${name}.dataTypeHint must be one of ${DATA_TYPE_HINTS.join(', ')}`);
    if (c.type === undefined) return { ...this.field(c.field, `${name}.field`, c.dataTypeHint), aggregated: false };
    if (c.type === 'timeGroup') {
      const f = this.field(c.field, `${name}.field`);
      if (f.type !== 'timestamp') throw new ParameterError(`${name}.field must be a time field (such as measurement.generatedAt) to group by time`);
      if (!isOneOf(GRANULARITIES, c.granularity)) throw new ParameterError(`${name}.granularity must be one of ${GRANULARITIES.join(', ')}`);
      // the statement runs with TimeZone UTC (store.ts): the two-argument date_trunc truncates in UTC, cheaper than naming the zone per row
      if (TRUNCATED.includes(c.granularity)) return { sql: `date_trunc('${c.granularity}', ${f.sql})`, type: 'timestamp', aggregated: false };
      return { sql: `extract(${PART_OF[c.granularity]} FROM ${f.sql} AT TIME ZONE 'UTC')::int`, type: 'integer', aggregated: false };
    }
    if (!isOneOf(AGGREGATIONS, c.type)) throw new ParameterError(`${name}.type must be one of ${[...AGGREGATIONS, 'timeGroup'].join(', ')}, or absent`);
    const filter = c.condition === undefined ? '' : ` FILTER (WHERE ${this.rowCondition(c.condition, `${name}.condition`)})`;
    if (c.type === 'count') return { sql: `count(*)${filter}`, type: 'integer', aggregated: true };
    if (c.type === 'share') {
      // with a condition: the share of the group's rows that meet it; without: the group's share of all rows
      const sql = filter ? `(100 * (count(*)${filter})::float8 / NULLIF(count(*), 0))` : '(100 * count(*)::float8 / NULLIF(sum(count(*)) OVER (), 0))';
      return { sql, type: 'number', aggregated: true };
    }
    const f = this.field(c.field, `${name}.field`, c.dataTypeHint);
    if (f.type === 'json') throw new ParameterError(`${name}.field: ${c.type} does not apply to a whole form (name one of its fields)`);
    if ((c.type === 'sum' || c.type === 'mean') && !numeric(f.type)) throw new ParameterError(`${name}.field: ${c.type} needs a number field, not a ${f.type}`);
    if (c.type === 'sum') return { sql: `(sum(${f.sql})${filter})::float8`, type: 'number', aggregated: true };
    if (c.type === 'mean') return { sql: `(avg(${f.sql})${filter})::float8`, type: 'number', aggregated: true };
    // any: one value of the group, the smallest (true for booleans when any is)
    const fn = f.type === 'boolean' ? (c.type === 'min' ? 'bool_and' : 'bool_or') : c.type === 'max' ? 'max' : 'min';
    return { sql: `${fn}(${f.sql})${filter}`, type: f.type, aggregated: true };
  }

  /** A constraint's operand: a column index (number or digits) or a field. */
  private operand(v: Field | number | undefined, name: string): Expr & { level: Level } {
    if (typeof v === 'number' || (typeof v === 'string' && /^\d{1,9}$/.test(v))) {
      const i = Number(v);
      const c = Number.isInteger(i) ? this.columns[i] : undefined;
      if (!c) throw new ParameterError(`${name}: ${describe(v)} is not the index of a column (0 to ${this.columns.length - 1})`);
      return c.aggregated ? { sql: `t.c${i}`, type: c.type, level: 'result' } : { sql: c.sql, type: c.type, level: 'row' };
    }
    return { ...this.field(v, name), level: 'row' };
  }

  private value(left: Expr, v: unknown, name: string): string {
    if (left.type === 'json') throw new ParameterError(`${name}: a whole form compares only with isNull or isNotNull`);
    if (numeric(left.type)) {
      const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(v) ? Number(v) : NaN;
      if (!Number.isFinite(n)) throw new ParameterError(`${name} must be a finite number`);
      return this.param(n, 'float8');
    }
    if (left.type === 'boolean') {
      if (v === true || v === 'true') return 'true';
      if (v === false || v === 'false') return 'false';
      throw new ParameterError(`${name} must be true or false`);
    }
    if (left.type === 'timestamp') {
      const t = typeof v === 'string' ? Date.parse(v) : NaN;
      const year = Number.isNaN(t) ? NaN : new Date(t).getUTCFullYear();
      if (!(year >= 1 && year <= 9999)) throw new ParameterError(`${name} must be a date-time between the years 0001 and 9999`);
      return this.param(new Date(t).toISOString(), 'timestamptz');
    }
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw new ParameterError(`${name} must be a string, number or boolean`);
    const s = String(v);
    if (s.length > QUERY_LIMITS.valueLength) throw new ParameterError(`${name} must be at most ${QUERY_LIMITS.valueLength} characters`);
    return this.param(s, 'text');
  }

  private constraint(c: Constraint, name: string): { sql: string; level: Level } {
    if (++this.constraints > QUERY_LIMITS.constraints) throw new ParameterError(`${name}: a query holds at most ${QUERY_LIMITS.constraints} constraints`);
    if (!isOneOf(COMPARISONS, c.comparison)) throw new ParameterError(`${name}.comparison must be one of ${COMPARISONS.join(', ')}`);
    const left = this.operand(c.left, `${name}.left`);
    if (c.comparison === 'isNull' || c.comparison === 'isNotNull')
      return { sql: `(${left.sql} IS ${c.comparison === 'isNull' ? '' : 'NOT '}NULL)`, level: left.level };
    const right = c.right;
    if (right === null || typeof right !== 'object' || (right.field === undefined) === (right.value === undefined)) {
      throw new ParameterError(`${name}.right must hold either field or value for comparison ${c.comparison}`);
    }
    if (c.comparison === 'isNamedRange') {
      if (left.type !== 'timestamp') throw new ParameterError(`${name}.left must be a time field for isNamedRange`);
      const range = typeof right.value === 'string' ? own(NAMED_RANGES, right.value) : undefined;
      if (!range) throw new ParameterError(`${name}.right.value must be one of ${NAMED_RANGE_NAMES.join(', ')}`);
      return { sql: `(${left.sql} >= ${range[0]} AND ${left.sql} < ${range[1]})`, level: left.level };
    }
    if (c.comparison === 'inGrid') {
      const member = typeof c.left === 'string' ? own(GRID_MEMBERS, c.left) : undefined;
      if (!member) throw new ParameterError(`${name}.left must be ${Object.keys(GRID_MEMBERS).join(' or ')} for inGrid`);
      if (typeof right.value !== 'string') throw new ParameterError(`${name}.right.value must be the hashId of a grid`);
      const grid = this.value(left, right.value, `${name}.right.value`);
      return {
        sql: `(${left.sql} IN (SELECT x.hash_id FROM grid g JOIN grid_member gm ON gm.grid_id = g.id JOIN ${member.table} x ON x.id = gm.${member.column}
          WHERE g.environment_id = $1 AND g.hash_id = ${grid}))`,
        level: left.level,
      };
    }
    let rightSql: string;
    let level = left.level;
    if (right.field !== undefined) {
      const r = this.operand(right.field, `${name}.right.field`);
      const compatible = r.type === left.type || (numeric(r.type) && numeric(left.type));
      if (!compatible || r.type === 'json') throw new ParameterError(`${name}.right.field: a ${left.type} cannot be compared with a ${r.type}`);
      if (r.level !== left.level) throw new ParameterError(`${name}: a constraint cannot compare a field with an aggregated column`);
      rightSql = r.sql;
      level = r.level;
    } else {
      rightSql = this.value(left, right.value, `${name}.right.value`);
    }
    if (c.comparison === 'like' || c.comparison === 'notLike') {
      if (left.type !== 'string') throw new ParameterError(`${name}.left must be a text field for ${c.comparison}`);
      return { sql: `(${c.comparison === 'notLike' ? 'NOT ' : ''}(${left.sql} LIKE ${rightSql}))`, level };
    }
    if (c.comparison !== '=' && c.comparison !== '<>' && (left.type === 'boolean' || left.type === 'json')) {
      throw new ParameterError(`${name}.comparison ${c.comparison} does not apply to a ${left.type}`);
    }
    return { sql: `(${left.sql} ${SQL_COMPARISON[c.comparison]} ${rightSql})`, level };
  }

  private isCondition(r: unknown): r is Condition {
    return r !== null && typeof r === 'object' && 'type' in r && !('left' in r);
  }

  /** A condition's SQL and level; the parts of one condition must share a level. */
  condition(c: Condition, name: string, depth = 1): { sql: string; level: Level | null } {
    if (depth > QUERY_LIMITS.conditionDepth) throw new ParameterError(`${name}: conditions nest at most ${QUERY_LIMITS.conditionDepth} levels`);
    if (c === null || typeof c !== 'object' || (c.type !== 'and' && c.type !== 'or')) throw new ParameterError(`${name}.type must be and or or`);
    const parts = (c.restrictions ?? []).map((r, i) =>
      this.isCondition(r) ? this.condition(r, `${name}.restrictions[${i}]`, depth + 1) : this.constraint(r as Constraint, `${name}.restrictions[${i}]`),
    );
    if (parts.length === 0) return { sql: 'true', level: null };
    const levels = new Set(parts.map((p) => p.level).filter((l) => l !== null));
    if (levels.size > 1)
      throw new ParameterError(`${name}: one condition cannot mix fields with aggregated columns; use separate restrictions of a top-level "and"`);
    return { sql: `(${parts.map((p) => p.sql).join(c.type === 'and' ? ' AND ' : ' OR ')})`, level: [...levels][0] ?? null };
  }

  rowCondition(c: Condition, name: string): string {
    const compiled = this.condition(c, name);
    if (compiled.level === 'result') throw new ParameterError(`${name}: a column's condition applies to rows; it cannot name an aggregated column`);
    return compiled.sql;
  }

  /** The filter split into the part on source rows and the part on result rows (top-level `and` only). */
  filter(c: Condition): { row: string[]; result: string[] } {
    const out = { row: [] as string[], result: [] as string[] };
    if (c === null || typeof c !== 'object' || c.type !== 'and') {
      const whole = this.condition(c, 'filter');
      (whole.level === 'result' ? out.result : out.row).push(whole.sql);
      return out;
    }
    (c.restrictions ?? []).forEach((r, i) => {
      const name = `filter.restrictions[${i}]`;
      const part = this.isCondition(r) ? this.condition(r, name, 2) : this.constraint(r as Constraint, name);
      (part.level === 'result' ? out.result : out.row).push(part.sql);
    });
    return out;
  }
}

function columnIndex(v: unknown, columns: number, name: string): number {
  const i = typeof v === 'string' && /^\d{1,9}$/.test(v) ? Number(v) : v;
  if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= columns)
    throw new ParameterError(`${name} must be the index of a column (0 to ${columns - 1})`);
  return i;
}

/**
 * The statement of one page of `q`'s results, scoped to environment `environmentId`: rows
 * `position` .. `position + rowsPerPage` (one more is read to tell whether a next page exists).
 */
export function compileQuery(q: AnalyticsQuery, environmentId: number, position: number, rowsPerPage: number): CompiledQuery {
  if (typeof q.source !== 'string' || !isOneOf(SDK_TABLES, q.source))
    throw new ParameterError(`source must be one of the analytics tables: ${SDK_TABLES.join(', ')}`);
  const source = own(SOURCES, q.source);
  if (!source) throw new ParameterError(`source ${q.source} is not available in analytics of this service; available: ${Object.keys(SOURCES).join(', ')}`);
  if (!Array.isArray(q.columns) || q.columns.length === 0 || q.columns.length > QUERY_LIMITS.columns) {
    throw new ParameterError(`columns must hold 1 to ${QUERY_LIMITS.columns} columns`);
  }
  const c = new Compiler(source, q.source, environmentId);
  for (const [i, column] of q.columns.entries()) c.columns.push(c.column(column, `columns[${i}]`));
  const n = c.columns.length;
  const filter = q.filter === undefined ? { row: [], result: [] } : c.filter(q.filter);
  const sort = (q.sort ?? []).map((s, i) => `c${columnIndex(s?.columnIndex, n, `sort[${i}].columnIndex`)} ${s.descending === true ? 'DESC' : 'ASC'}`);

  const aggregated = c.columns.some((col) => col.aggregated);
  const keys = c.columns.flatMap((col, i) => (col.aggregated ? [] : [String(i + 1)]));
  // joins in the registry's order, so a join comes after those it needs
  const joins = Object.entries(source.joins)
    .filter(([t]) => c.joins.has(t as TableKey))
    .map(([, j]) => j!.sql)
    .filter(Boolean);
  let sql = `SELECT ${c.columns.map((col, i) => `${col.sql} AS c${i}`).join(', ')} FROM ${source.from} ${joins.join(' ')}
    WHERE ${[source.scope, ...filter.row].join(' AND ')}${aggregated && keys.length > 0 ? ` GROUP BY ${keys.join(', ')}` : ''}`;
  sql = `SELECT * FROM (${sql}) t${filter.result.length > 0 ? ` WHERE ${filter.result.join(' AND ')}` : ''}`;
  if (q.limitBy !== undefined) {
    const l = q.limitBy;
    if (!Number.isInteger(l.limitedTo) || l.limitedTo < 1 || l.limitedTo > QUERY_LIMITS.limitedTo) {
      throw new ParameterError(`limitBy.limitedTo must be an integer from 1 to ${QUERY_LIMITS.limitedTo}`);
    }
    const per = (l.per ?? []).map((p, i) => `c${columnIndex(p?.columnIndex, n, `limitBy.per[${i}].columnIndex`)}`);
    const by = (l.sortedBy ?? []).map(
      (s, i) => `c${columnIndex(s?.columnIndex, n, `limitBy.sortedBy[${i}].columnIndex`)} ${s.descending === true ? 'DESC' : 'ASC'}`,
    );
    const order = [...by, ...c.columns.map((_, i) => `c${i}`)];
    sql = `SELECT * FROM (SELECT t.*, row_number() OVER (${per.length ? `PARTITION BY ${per.join(', ')} ` : ''}ORDER BY ${order.join(', ')}) AS rank FROM (${sql}) t) t
      WHERE rank <= ${c.param(l.limitedTo, 'bigint')}`;
  }
  // every column breaks ties, so a page boundary falls in the same place on every request
  const order = [...sort, ...c.columns.map((_, i) => `c${i}`)];
  sql = `SELECT ${c.columns.map((_, i) => `c${i}`).join(', ')} FROM (${sql}) t ORDER BY ${order.join(', ')}
    OFFSET ${c.param(position, 'bigint')} LIMIT ${c.param(rowsPerPage + 1, 'bigint')}`;
  return { sql, params: c.params, columns: n };
}
