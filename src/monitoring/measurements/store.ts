import { createHash } from 'node:crypto';
import { namedStatement, type NamedStatement, type Queryable } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';

export interface MeasurementFindQuery {
  sortBy?: string;
  descending?: boolean;
  rowsPerPage?: number;
  offset?: string;
  search?: string;
  pinGroupHashIds?: string[];
  pinHashIds?: string[];
  quantityHashIds?: string[];
  reportTypeHashIds?: string[];
  since?: string;
  before?: string;
}

const SORTS: Record<string, string> = { pinName: 'p.name', generatedAt: 'r.generated_at', pinGroupName: 'pg.name', edgeName: "COALESCE(e.name, '')" };

function decodeOffset(offset: string): [string, number, number] {
  try {
    const v = JSON.parse(Buffer.from(offset, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 3 && typeof v[0] === 'string' && Number.isInteger(v[1]) && Number.isInteger(v[2])) return v as [string, number, number];
  } catch {
    // fall through
  }
  throw new ParameterError('offset is not a nextPageOffset this service returned');
}

/** The ids of the pin groups a find may read: the named ones (and those of the named pins), or every one of the environment. */
async function pinGroupsOf(db: Queryable, environmentId: number, q: MeasurementFindQuery): Promise<number[]> {
  const { rows } = await db.query<{ id: number }>(
    `SELECT pg.id FROM pin_group pg WHERE pg.environment_id = $1
        AND ($2::text[] IS NULL OR pg.hash_id = ANY($2))
        AND ($3::text[] IS NULL OR pg.id IN (SELECT pin_group_id FROM pin WHERE environment_id = $1 AND hash_id = ANY($3)))`,
    [environmentId, q.pinGroupHashIds ?? null, q.pinHashIds ?? null]);
  return rows.map((r) => r.id);
}

const statements = new Map<string, NamedStatement>();
/** Each shape of the find (its filters, sort and direction) is planned once per connection: planning cost as much as running. */
function prepared(text: string): NamedStatement {
  let statement = statements.get(text);
  if (!statement) {
    statement = namedStatement(`measurement-find-${createHash('sha1').update(text).digest('hex').slice(0, 16)}`, text);
    statements.set(text, statement);
  }
  return statement;
}

async function idsOf(db: Queryable, sql: string, params: unknown[]): Promise<number[]> {
  return (await db.query<{ id: number }>(sql, params)).rows.map((r) => r.id);
}

interface Observation { hashId: string; generatedAt: string; channelIndex: number; channelMeasurementIndex: number; orderOfMagnitude: number; significand: number; quantityHashId: string }

/**
 * measurement find: one row per report and pin of this environment that received measurements,
 * filtered by pin group, pin, quantity, report type and report time (`since` included, `before`
 * not), keyset-paged on (sort value, report, pin).
 *
 * Sorted by generatedAt (the chart's case), the reports are walked in index order
 * (condition_report_pin_group_time) and only a page's worth is expanded into pins; sorted by a
 * name, every matching row is ranked.
 */
export async function findMeasurements(db: Queryable, environmentId: number, q: MeasurementFindQuery) {
  const sortBy = q.sortBy ?? 'pinName';
  const sortExpr = SORTS[sortBy];
  if (!sortExpr) throw new ParameterError(`sortBy must be one of ${Object.keys(SORTS).join(', ')}`);
  const dir = (q.descending ?? true) ? 'DESC' : 'ASC';
  const cmp = dir === 'DESC' ? '<' : '>';
  const rowsPerPage = q.rowsPerPage ?? 10;
  const params: unknown[] = [environmentId];
  const add = (value: unknown) => { params.push(value); return `$${params.length}`; };
  // the reports that may hold rows: of the environment's pin groups, by time and report type
  const reportWhere: string[] = [];
  // the measurements of a report that make rows: on a pin, by pin and quantity
  const measurementWhere = ['m.report_id = r.id', 'm.pin_id IS NOT NULL'];
  const where: string[] = [];
  const groups = await pinGroupsOf(db, environmentId, q);
  if (groups.length === 1) reportWhere.push(`r.pin_group_id = ${add(groups[0])}`);
  else reportWhere.push(`r.pin_group_id = ANY(${add(groups)})`);
  // named pins and quantities as ids: the per-report lookups stay plain index conditions
  if (q.pinHashIds) measurementWhere.push(`m.pin_id = ANY(${add(await idsOf(db, 'SELECT id FROM pin WHERE environment_id = $1 AND hash_id = ANY($2)', [environmentId, q.pinHashIds]))}::bigint[])`);
  if (q.quantityHashIds) measurementWhere.push(`m.quantity_id = ANY(${add(await idsOf(db, 'SELECT id FROM quantity WHERE hash_id = ANY($1)', [q.quantityHashIds]))}::bigint[])`);
  if (q.reportTypeHashIds) reportWhere.push(`r.report_type_id IN (SELECT id FROM report_type WHERE hash_id = ANY(${add(q.reportTypeHashIds)}))`);
  if (q.since) reportWhere.push(`r.generated_at >= ${add(q.since)}::timestamptz`);
  if (q.before) reportWhere.push(`r.generated_at < ${add(q.before)}::timestamptz`);
  if (q.search) {
    const like = add(`%${q.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    where.push(`(p.name ILIKE ${like} OR pg.name ILIKE ${like} OR p.hash_id ILIKE ${like})`);
  }
  const byTime = sortBy === 'generatedAt';
  if (q.offset) {
    const [value, reportId, pinId] = decodeOffset(q.offset);
    const v = add(value);
    const r = add(reportId);
    const pin = add(pinId);
    where.push(`(${sortExpr}, r.id, p.id) ${cmp} (${v}, ${r}, ${pin})`);
    // the page's reports start at the last row's report (which may have pins left)
    if (byTime) reportWhere.push(`(r.generated_at, r.id) ${cmp}= (${v}::timestamptz, ${r}::bigint)`);
  }
  // sorted by time, a page of rows needs at most rowsPerPage + 2 reports (each report has a row; the first may have none left)
  const reports = byTime
    ? `(SELECT * FROM condition_report r WHERE ${reportWhere.join(' AND ')} AND EXISTS (SELECT 1 FROM measurement m WHERE ${measurementWhere.join(' AND ')})
         ORDER BY r.generated_at ${dir}, r.id ${dir} LIMIT ${add(rowsPerPage + 2)})`
    : `(SELECT * FROM condition_report r WHERE ${reportWhere.join(' AND ')})`;
  const limit = add(rowsPerPage + 1);
  const { rows } = await db.query(prepared(
    `SELECT r.id AS report_id, r.hash_id AS report_hash_id, r.created_at, r.generated_at, COALESCE(rt.hash_id, '') AS report_type_hash_id,
            r.fields AS report_fields, pg.hash_id AS pg_hash_id, pg.name AS pg_name, p.id AS pin_id, p.hash_id AS p_hash_id, p.name AS p_name,
            p.fields AS p_fields, e.hash_id AS e_hash_id, e.name AS e_name, e.fields AS e_fields, mm.observations, (${sortExpr})::text AS sort_value
       FROM ${reports} r
       JOIN pin_group pg ON pg.id = r.pin_group_id
       LEFT JOIN report_type rt ON rt.id = r.report_type_id
       CROSS JOIN LATERAL (
         SELECT m.pin_id, json_agg(json_build_object('hashId', m.hash_id, 'generatedAt', m.generated_at, 'channelIndex', m.channel_index,
                  'channelMeasurementIndex', m.channel_measurement_index, 'orderOfMagnitude', m.order_of_magnitude, 'significand', m.significand,
                  'quantityHashId', q.hash_id) ORDER BY m.channel_index, m.channel_measurement_index) AS observations
           FROM measurement m JOIN quantity q ON q.id = m.quantity_id
          WHERE ${measurementWhere.join(' AND ')}
          GROUP BY m.pin_id) mm
       JOIN pin p ON p.id = mm.pin_id
       LEFT JOIN edge e ON e.id = p.edge_id
      WHERE ${['pg.environment_id = $1', ...where].join(' AND ')}
      ORDER BY ${sortExpr} ${dir}, r.id ${dir}, p.id ${dir}
      LIMIT ${limit}`), params);
  let nextPageOffset: string | null = null;
  if (rows.length > rowsPerPage) {
    rows.length = rowsPerPage;
    const last = rows[rows.length - 1];
    nextPageOffset = Buffer.from(JSON.stringify([last.sort_value, last.report_id, last.pin_id])).toString('base64url');
  }
  return {
    nextPageOffset,
    rows: rows.map((r) => ({
      report: {
        hashId: r.report_hash_id as string,
        createdAt: (r.created_at as Date).toISOString(),
        updatedAt: (r.created_at as Date).toISOString(),
        generatedAt: (r.generated_at as Date).toISOString(),
        reportTypeHashId: r.report_type_hash_id as string,
        pinGroupFields: r.report_fields as Record<string, unknown>,
        pinObservations: (r.observations as Observation[]).map(({ quantityHashId, ...m }) => ({
          measurement: {
            ...m, generatedAt: new Date(m.generatedAt).toISOString(), reportHashId: r.report_hash_id as string, pinHashId: r.p_hash_id as string,
            // thresholds arrive with a later issue: -1 means not compared
            performance: -1,
          },
          quantityHashId,
        })),
      },
      pinGroup: { hashId: r.pg_hash_id as string, name: r.pg_name as string },
      pin: { hashId: r.p_hash_id as string, name: r.p_name as string, fields: r.p_fields as Record<string, unknown> },
      edge: r.e_hash_id === null ? null : { hashId: r.e_hash_id as string, name: r.e_name as string, fields: r.e_fields as Record<string, unknown> },
    })),
  };
}
