// import-request: measurements entered in a sheet instead of one report at a time.
//
// The template (generate-template) is a CSV with one line per pin of the chosen pin groups (and of
// the pin groups of the chosen grids) and per chosen report type, the columns to fill left empty:
//   pinGroupHashId, pinGroupName, pinHashId, pinName, reportTypeHashId, reportTypeName,
//   generatedAt, quantityHashId, orderOfMagnitude, significand
// Each filled line is one measurement (value = significand x 10^orderOfMagnitude); lines with the
// same pin group, report type and generatedAt are one report. An upload (add) is checked line by
// line; every failing line is named (line, column, reason) and then nothing is imported: the file is
// stored in one transaction or not at all. Names are there for the reader and are not checked.

import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { Account } from '../../accounts/store.ts';
import { reportDateProblem } from '../../sandbox/report-dates.ts';
import { csvField, parseCsv } from './csv.ts';

export const COLUMNS = [
  'pinGroupHashId',
  'pinGroupName',
  'pinHashId',
  'pinName',
  'reportTypeHashId',
  'reportTypeName',
  'generatedAt',
  'quantityHashId',
  'orderOfMagnitude',
  'significand',
] as const;
/** Lines of one file, template or upload (the header not counted). */
export const MAX_LINES = 10_000;
/** Bytes of one uploaded file. */
export const MAX_BYTES = 2 * 1024 * 1024;
/** Failing lines named in one answer; the count says how many more failed. */
const MAX_ERRORS = 100;

export interface TemplateRequest {
  pinGroupHashIds: string[];
  pinGroupGridHashIds: string[];
  reportTypeHashIds: string[];
}

/** The ids of `hashIds` in `table` of the environment in order; an unknown one is a parameter_error naming `field[i]`. */
// the same words for any hashId that is not one (another environment's is not told apart from none)
const IMPORTABLE_TYPES =
  ': an import takes the report types the environment made itself (POST /report-type/, type "human"), not a supplier\'s device report type';

async function idsOf(db: Queryable, table: 'pin_group' | 'report_type' | 'grid', environmentId: number, hashIds: string[], field: string, what: string) {
  const extra = table === 'report_type' ? ' AND deleted_at IS NULL' : table === 'grid' ? " AND type_key = 'pinGroup'" : '';
  const { rows } = await db.query<{ id: number; hash_id: string }>(`SELECT id, hash_id FROM ${table} WHERE environment_id = $1 AND hash_id = ANY($2)${extra}`, [
    environmentId,
    hashIds,
  ]);
  const ids = new Map(rows.map((r) => [r.hash_id, r.id]));
  return hashIds.map((h, i) => {
    const id = ids.get(h);
    if (id === undefined) throw new ParameterError(`${field}[${i}] ${h} is not ${what} of this environment${table === 'report_type' ? IMPORTABLE_TYPES : ''}`);
    return id;
  });
}

/** The SDK's FileFromServer of a file answered inline: its url is a data URL, so it needs no store and never expires. */
function inlineFile(account: Account, name: string, mimeType: string, content: Buffer) {
  return {
    hashId: newHashId(),
    requestorType: 'user',
    requestorHashId: account.hashId,
    url: `data:${mimeType};base64,${content.toString('base64')}`,
    signature: createHash('sha256').update(content).digest('hex'),
    name,
    mimeType,
    bytes: content.length,
    md5: createHash('md5').update(content).digest('hex'),
    crc32: crc32(content).toString(16).padStart(8, '0'),
    expiresAt: null,
  };
}

export async function generateTemplate(db: Queryable, account: Account, request: TemplateRequest) {
  const env = account.environment;
  const pinGroupIds = await idsOf(db, 'pin_group', env.id, request.pinGroupHashIds, 'pinGroupHashIds', 'a pin group');
  const gridIds = await idsOf(db, 'grid', env.id, request.pinGroupGridHashIds, 'pinGroupGridHashIds', 'a pin group grid');
  const reportTypeIds = await idsOf(db, 'report_type', env.id, request.reportTypeHashIds, 'reportTypeHashIds', 'a report type');
  // the pin groups named first, then those of each grid in its order, each once
  const { rows } = await db.query<Record<string, string>>(
    `WITH chosen AS (
       SELECT pg_id, min(o) AS o FROM (
         SELECT pg_id, o FROM unnest($1::bigint[]) WITH ORDINALITY AS x(pg_id, o)
         UNION ALL SELECT m.pin_group_id, 1000000 + g.o * 100000 + m.position FROM unnest($2::bigint[]) WITH ORDINALITY AS g(id, o)
           JOIN grid_member m ON m.grid_id = g.id WHERE m.pin_group_id IS NOT NULL) c GROUP BY pg_id)
     SELECT pg.hash_id AS "pinGroupHashId", pg.name AS "pinGroupName", p.hash_id AS "pinHashId", p.name AS "pinName",
            rt.hash_id AS "reportTypeHashId", rt.name_text AS "reportTypeName"
       FROM chosen c JOIN pin_group pg ON pg.id = c.pg_id JOIN pin p ON p.pin_group_id = pg.id
       CROSS JOIN unnest($3::bigint[]) WITH ORDINALITY AS t(id, o) JOIN report_type rt ON rt.id = t.id
      ORDER BY c.o, p.id, t.o LIMIT $4`,
    [pinGroupIds, gridIds, reportTypeIds, MAX_LINES + 1],
  );
  if (rows.length > MAX_LINES)
    throw new ParameterError(
      `pinGroupHashIds, pinGroupGridHashIds: the template would have more than ${MAX_LINES} lines (pins x report types); choose fewer pin groups`,
    );
  const lines = [COLUMNS.join(','), ...rows.map((r) => COLUMNS.map((c) => csvField(r[c] ?? '')).join(','))];
  return inlineFile(account, 'import-template.csv', 'text/csv', Buffer.from(`${lines.join('\r\n')}\r\n`, 'utf8'));
}

/** The CSV text of a data URL; parameter_error naming dataUrl for anything else. */
function csvOf(dataUrl: string): string {
  const match = /^data:([^;,]*)(;[^,]*)?,(.*)$/s.exec(dataUrl);
  if (!match || !(match[2] ?? '').split(';').includes('base64')) throw new ParameterError('dataUrl must be data:<mediatype>;base64,<data>');
  const mediaType = match[1].toLowerCase();
  if (!['text/csv', 'text/plain', 'application/csv', 'application/vnd.ms-excel', ''].includes(mediaType)) {
    throw new ParameterError(`dataUrl: ${mediaType} is not read; upload the sheet as CSV (text/csv)`);
  }
  const bytes = Buffer.from(match[3], 'base64');
  if (bytes.length > MAX_BYTES) throw new ParameterError(`dataUrl: the file has ${bytes.length} bytes, more than ${MAX_BYTES}`);
  return bytes.toString('utf8');
}

interface Line {
  line: number;
  pinGroupHashId: string;
  pinHashId: string;
  reportTypeHashId: string;
  generatedAt: Date;
  quantityHashId: string;
  orderOfMagnitude: number;
  significand: number;
}

const INTEGER = /^-?\d+$/;

/** The lines of the file checked on their own (references are checked against the store after). */
function readLines(text: string, errors: string[]): Line[] {
  let records;
  try {
    records = parseCsv(text);
  } catch (err) {
    errors.push((err as Error).message);
    return [];
  }
  const [header, ...data] = records;
  const missing = COLUMNS.filter((c) => !header?.fields.map((f) => f.trim()).includes(c));
  if (!header || missing.length > 0) {
    errors.push(`line 1: the header lacks the column${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
    return [];
  }
  if (data.length > MAX_LINES) throw new ParameterError(`dataUrl: the file has ${data.length} lines below its header, more than ${MAX_LINES}`);
  const at = Object.fromEntries(header.fields.map((f, i) => [f.trim(), i]));
  const lines: Line[] = [];
  for (const r of data) {
    const get = (c: (typeof COLUMNS)[number]) => (r.fields[at[c]] ?? '').trim();
    const fail = (c: string, reason: string) => errors.push(`line ${r.line}, ${c}: ${reason}`);
    const before = errors.length;
    for (const c of ['pinGroupHashId', 'pinHashId', 'reportTypeHashId', 'quantityHashId'] as const) if (get(c) === '') fail(c, 'is empty');
    const generatedAt = new Date(get('generatedAt'));
    if (!/^\d{4}-\d\d-\d\d(T[\d:.]+(Z|[+-]\d\d:?\d\d)?)?$/.test(get('generatedAt')) || Number.isNaN(generatedAt.getTime()))
      fail('generatedAt', `${JSON.stringify(get('generatedAt'))} is not an ISO 8601 time`);
    else {
      const outside = reportDateProblem(generatedAt);
      if (outside) fail('generatedAt', `${get('generatedAt')} ${outside}`);
    }
    const magnitude = get('orderOfMagnitude');
    if (!INTEGER.test(magnitude) || Number(magnitude) < -128 || Number(magnitude) > 127)
      fail('orderOfMagnitude', `${JSON.stringify(magnitude)} is not an integer from -128 to 127`);
    const significand = get('significand');
    if (!INTEGER.test(significand) || Math.abs(Number(significand)) > 2147483647)
      fail('significand', `${JSON.stringify(significand)} is not an integer from -2147483648 to 2147483647`);
    if (errors.length === before) {
      lines.push({
        line: r.line,
        pinGroupHashId: get('pinGroupHashId'),
        pinHashId: get('pinHashId'),
        reportTypeHashId: get('reportTypeHashId'),
        generatedAt,
        quantityHashId: get('quantityHashId'),
        orderOfMagnitude: Number(magnitude),
        significand: Number(significand),
      });
    }
  }
  if (data.length === 0) errors.push('the file has no lines below its header');
  return lines;
}

/** Each line's references resolved in the environment; the unknown ones named in `errors`. */
async function resolve(db: Queryable, environmentId: number, lines: Line[], errors: string[]) {
  const lookup = async (sql: string, hashIds: string[]) =>
    new Map(
      (await db.query<{ hash_id: string; id: number; owner: number | null }>(sql, [environmentId, [...new Set(hashIds)]])).rows.map((r) => [r.hash_id, r]),
    );
  const pinGroups = await lookup(
    'SELECT hash_id, id, NULL::bigint AS owner FROM pin_group WHERE environment_id = $1 AND hash_id = ANY($2)',
    lines.map((l) => l.pinGroupHashId),
  );
  const pins = await lookup(
    'SELECT hash_id, id, pin_group_id AS owner FROM pin WHERE environment_id = $1 AND hash_id = ANY($2)',
    lines.map((l) => l.pinHashId),
  );
  const types = await lookup(
    'SELECT hash_id, id, NULL::bigint AS owner FROM report_type WHERE environment_id = $1 AND deleted_at IS NULL AND hash_id = ANY($2)',
    lines.map((l) => l.reportTypeHashId),
  );
  const quantities = await lookup(
    'SELECT hash_id, id, NULL::bigint AS owner FROM quantity WHERE environment_id = $1 AND deleted_at IS NULL AND hash_id = ANY($2)',
    lines.map((l) => l.quantityHashId),
  );
  const resolved: { line: Line; pinGroupId: number; pinId: number; reportTypeId: number; quantityId: number }[] = [];
  for (const l of lines) {
    const before = errors.length;
    const fail = (c: string, reason: string) => errors.push(`line ${l.line}, ${c}: ${reason}`);
    const pg = pinGroups.get(l.pinGroupHashId);
    const pin = pins.get(l.pinHashId);
    if (!pg) fail('pinGroupHashId', `${l.pinGroupHashId} is not a pin group of this environment`);
    if (!pin) fail('pinHashId', `${l.pinHashId} is not a pin of this environment`);
    else if (pg && Number(pin.owner) !== Number(pg.id)) fail('pinHashId', `${l.pinHashId} is not a pin of pin group ${l.pinGroupHashId}`);
    if (!types.has(l.reportTypeHashId)) fail('reportTypeHashId', `${l.reportTypeHashId} is not a report type of this environment${IMPORTABLE_TYPES}`);
    if (!quantities.has(l.quantityHashId)) fail('quantityHashId', `${l.quantityHashId} is not a quantity of this environment`);
    if (errors.length === before)
      resolved.push({
        line: l,
        pinGroupId: pg!.id,
        pinId: pin!.id,
        reportTypeId: types.get(l.reportTypeHashId)!.id,
        quantityId: quantities.get(l.quantityHashId)!.id,
      });
  }
  return resolved;
}

/** Writes one report per pin group, report type and generatedAt, with its measurements; the number of reports. */
async function writeReports(db: Queryable, environmentId: number, lines: Awaited<ReturnType<typeof resolve>>): Promise<number> {
  const reports = new Map<string, typeof lines>();
  for (const l of lines) {
    const key = `${l.pinGroupId}/${l.reportTypeId}/${l.line.generatedAt.toISOString()}`;
    reports.set(key, [...(reports.get(key) ?? []), l]);
  }
  const groups = [...reports.values()];
  const { rows } = await db.query<{ id: number; o: number }>(
    `INSERT INTO condition_report (hash_id, environment_id, report_type_id, generated_at, pin_group_id)
     SELECT h, $1, t, g, p FROM unnest($2::text[], $3::bigint[], $4::timestamptz[], $5::bigint[]) WITH ORDINALITY AS x(h, t, g, p, o)
     ORDER BY o RETURNING id`,
    [
      environmentId,
      groups.map(() => newHashId()),
      groups.map((g) => g[0].reportTypeId),
      groups.map((g) => g[0].line.generatedAt),
      groups.map((g) => g[0].pinGroupId),
    ],
  );
  const measurements = groups.flatMap((g, i) => g.map((l, j) => ({ reportId: rows[i].id, l, j })));
  await db.query(
    `INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
     SELECT h, r, $1, q, p, 0, j, g, m, s FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::int[], $7::timestamptz[], $8::smallint[], $9::int[]) AS x(h, r, q, p, j, g, m, s)`,
    [
      environmentId,
      measurements.map(() => newHashId()),
      measurements.map((m) => m.reportId),
      measurements.map((m) => m.l.quantityId),
      measurements.map((m) => m.l.pinId),
      measurements.map((m) => m.j),
      measurements.map((m) => m.l.line.generatedAt),
      measurements.map((m) => m.l.line.orderOfMagnitude),
      measurements.map((m) => m.l.line.significand),
    ],
  );
  return groups.length;
}

const lineOf = (error: string) => Number(/^line (\d+)/.exec(error)?.[1] ?? 0);

const SELECT = 'i.hash_id, i.name, i.state, i.errors, i.processed_at, i.created_at, i.updated_at, i.deleted_at, i.user_name, a.hash_id AS user_hash_id';
const FROM = 'import_request i LEFT JOIN machine_account a ON a.id = i.account_id';
const iso = (d: unknown) => (d === null ? null : (d as Date).toISOString());

/** The SDK's {importRequest, createdByUserName}. */
function toRow(r: Record<string, unknown>) {
  return {
    importRequest: {
      hashId: r.hash_id as string,
      name: r.name as string,
      userHashId: (r.user_hash_id as string | null) ?? '',
      state: r.state as string,
      errors: r.errors as string[] | null,
      file: null,
      processedAt: iso(r.processed_at),
      createdAt: iso(r.created_at),
      updatedAt: iso(r.updated_at),
      deletedAt: iso(r.deleted_at),
    },
    createdByUserName: r.user_name as string,
  };
}

/**
 * import-request add: the file is checked and, when every line passes, imported in the same
 * transaction that stores the request (state success); otherwise the request is stored as invalid
 * with the failing lines and nothing else changes.
 */
export async function addImportRequest(db: Db, account: Account, input: { name: string; dataUrl: string }) {
  const text = csvOf(input.dataUrl);
  const env = account.environment;
  const hashId = await db.tx(async (client) => {
    const errors: string[] = [];
    const lines = readLines(text, errors);
    const resolved = await resolve(client, env.id, lines, errors);
    // in the order of the file: the checks of each line on its own come before those against the store
    errors.sort((x, y) => lineOf(x) - lineOf(y));
    const valid = errors.length === 0;
    const reports = valid ? await writeReports(client, env.id, resolved) : 0;
    const shown = errors.length > MAX_ERRORS ? [...errors.slice(0, MAX_ERRORS), `... and ${errors.length - MAX_ERRORS} more`] : errors;
    const id = newHashId();
    await client.query(
      `INSERT INTO import_request (hash_id, environment_id, account_id, user_name, name, state, errors, bytes, reports, processed_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())`,
      [id, env.id, account.id, account.name, input.name, valid ? 'success' : 'invalid', valid ? null : JSON.stringify(shown), Buffer.byteLength(text), reports],
    );
    return id;
  });
  const { rows } = await db.query(`SELECT ${SELECT} FROM ${FROM} WHERE i.hash_id = $1`, [hashId]);
  return toRow(rows[0]);
}

export async function findImportRequests(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: FROM,
      select: SELECT,
      idColumn: 'i.id',
      where: ['i.environment_id = $1', 'i.deleted_at IS NULL'],
      params: [environmentId],
      sortable: { hashId: 'i.hash_id', name: 'i.name', state: 'i.state', updatedAt: 'i.updated_at', createdAt: 'i.created_at' },
      search: ['i.name', 'i.hash_id'],
      updatedColumn: 'i.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'name' },
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(toRow) };
}

/** import-request delete: the request leaves the list (state deleted); the reports it imported stay. */
export async function deleteImportRequest(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query(
    "UPDATE import_request SET state = 'deleted', deleted_at = now(), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL",
    [environmentId, hashId],
  );
  if (!rowCount) throw new NotFoundError('import request', hashId);
}
