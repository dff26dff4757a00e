import { ParameterError } from './errors.ts';
import type { Queryable, Row } from './db.ts';

/** The find (table) query of every list operation (API-NOTES: Requests). */
export interface FindQuery {
  sortBy?: string;
  descending?: boolean;
  rowsPerPage?: number;
  search?: string;
  offset?: string;
  updatedAfter?: string;
}

export interface FindSpec {
  /** FROM clause, e.g. `device d JOIN device_type t ON t.id = d.device_type_id` */
  from: string;
  select: string;
  /** the unique, never-null column that breaks ties, e.g. `d.id` */
  idColumn: string;
  /** conditions that scope the rows (always including the environment) */
  where: string[];
  params: unknown[];
  /** sortBy name → SQL expression (never null) */
  sortable: Record<string, string>;
  /** SQL text expressions `search` matches (case-insensitive substring) */
  search: string[];
  /** column compared against `updatedAfter`, when the object has one */
  updatedColumn?: string;
}

/**
 * The keyset position of an offset: the sort value in PostgreSQL's text form and the row id.
 * The HTTP layer has already opened the sealed form (src/http/paging.ts); the shape is checked
 * here all the same, so no caller can hand SQL a value of the wrong type.
 */
function decodeOffset(offset: string): [string, number] {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(offset, 'base64url').toString('utf8'));
    if (Array.isArray(parsed) && parsed.length === 2 && typeof parsed[0] === 'string' && Number.isSafeInteger(parsed[1]) && parsed[1] >= 0) {
      return parsed as [string, number];
    }
  } catch {
    // fall through to the error below
  }
  throw new ParameterError('offset is not a nextPageOffset this service returned');
}

/** The SQL sort expression of `sortBy`: only the spec's own entries (never an inherited member such as `constructor`). */
function sortExpression(spec: FindSpec, sortBy: string): string {
  if (!Object.hasOwn(spec.sortable, sortBy)) throw new ParameterError(`sortBy must be one of ${Object.keys(spec.sortable).join(', ')}`);
  return spec.sortable[sortBy];
}

/** `updatedAfter` when it is an instant PostgreSQL can hold (years 1 to 9999; PostgreSQL has no year 0). */
function updatedAfterInstant(value: string): string {
  const t = Date.parse(value);
  const year = Number.isNaN(t) ? NaN : new Date(t).getUTCFullYear();
  if (!(year >= 1 && year <= 9999)) throw new ParameterError('updatedAfter must be a date-time between the years 0001 and 9999');
  return value;
}

/** Runs a keyset-paged find: stable under inserts, `nextPageOffset` opaque. */
export async function findPage<T extends Row>(db: Queryable, spec: FindSpec, query: FindQuery): Promise<{ nextPageOffset: string | null; rows: T[] }> {
  const sortBy = query.sortBy ?? 'hashId';
  const sortExpr = sortExpression(spec, sortBy);
  const descending = query.descending ?? true;
  const rowsPerPage = query.rowsPerPage ?? 10;
  const where = [...spec.where];
  const params = [...spec.params];
  const search = query.search ?? '';
  if (search !== '' && spec.search.length > 0) {
    params.push(`%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    where.push(`(${spec.search.map((e) => `${e} ILIKE $${params.length}`).join(' OR ')})`);
  }
  if (query.updatedAfter !== undefined && spec.updatedColumn) {
    params.push(updatedAfterInstant(query.updatedAfter));
    where.push(`${spec.updatedColumn} > $${params.length}::timestamptz`);
  }
  if (query.offset) {
    const [value, id] = decodeOffset(query.offset);
    params.push(value, id);
    where.push(`(${sortExpr}, ${spec.idColumn}) ${descending ? '<' : '>'} ($${params.length - 1}, $${params.length})`);
  }
  const dir = descending ? 'DESC' : 'ASC';
  params.push(rowsPerPage + 1);
  const sql = `SELECT ${spec.select}, (${sortExpr})::text AS "__sort", ${spec.idColumn} AS "__id" FROM ${spec.from}
    WHERE ${where.join(' AND ')} ORDER BY ${sortExpr} ${dir}, ${spec.idColumn} ${dir} LIMIT $${params.length}`;
  const { rows } = await db.query<T & { __sort: unknown; __id: number }>(sql, params);
  let nextPageOffset: string | null = null;
  if (rows.length > rowsPerPage) {
    rows.length = rowsPerPage;
    const last = rows[rows.length - 1];
    // the sort value travels as PostgreSQL's own text form: timestamps keep their microseconds
    nextPageOffset = Buffer.from(JSON.stringify([last.__sort, last.__id])).toString('base64url');
  }
  for (const r of rows) {
    delete (r as Row).__sort;
    delete (r as Row).__id;
  }
  return { nextPageOffset, rows };
}
