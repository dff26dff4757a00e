import type { Queryable } from '../../app/db.ts';
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

const SORTS: Record<string, string> = { pinName: 'p.name', generatedAt: 'r.generated_at', pinGroupName: 'pg.name', edgeName: "''" };

function decodeOffset(offset: string): [string, number, number] {
  try {
    const v = JSON.parse(Buffer.from(offset, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 3 && typeof v[0] === 'string' && Number.isInteger(v[1]) && Number.isInteger(v[2])) return v as [string, number, number];
  } catch {
    // fall through
  }
  throw new ParameterError('offset is not a nextPageOffset this service returned');
}

interface Observation { hashId: string; generatedAt: string; channelIndex: number; channelMeasurementIndex: number; orderOfMagnitude: number; significand: number; quantityHashId: string }

/**
 * measurement find: one row per report and pin of this environment that received measurements,
 * filtered by pin group, pin, quantity, report type and report time (`since` included, `before`
 * not), keyset-paged on (sort value, report, pin).
 */
export async function findMeasurements(db: Queryable, environmentId: number, q: MeasurementFindQuery) {
  const sortBy = q.sortBy ?? 'pinName';
  const sortExpr = SORTS[sortBy];
  if (!sortExpr) throw new ParameterError(`sortBy must be one of ${Object.keys(SORTS).join(', ')}`);
  const dir = (q.descending ?? true) ? 'DESC' : 'ASC';
  const rowsPerPage = q.rowsPerPage ?? 10;
  const params: unknown[] = [environmentId];
  const where = ['pg.environment_id = $1'];
  const inner: string[] = [];
  const add = (value: unknown) => { params.push(value); return `$${params.length}`; };
  if (q.pinGroupHashIds) where.push(`pg.hash_id = ANY(${add(q.pinGroupHashIds)})`);
  if (q.pinHashIds) where.push(`p.hash_id = ANY(${add(q.pinHashIds)})`);
  if (q.reportTypeHashIds) where.push(`rt.hash_id = ANY(${add(q.reportTypeHashIds)})`);
  if (q.since) where.push(`r.generated_at >= ${add(q.since)}::timestamptz`);
  if (q.before) where.push(`r.generated_at < ${add(q.before)}::timestamptz`);
  if (q.quantityHashIds) inner.push(`q.hash_id = ANY(${add(q.quantityHashIds)})`);
  if (q.search) {
    const like = add(`%${q.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    where.push(`(p.name ILIKE ${like} OR pg.name ILIKE ${like} OR p.hash_id ILIKE ${like})`);
  }
  if (q.offset) {
    const [value, reportId, pinId] = decodeOffset(q.offset);
    where.push(`(${sortExpr}, r.id, p.id) ${dir === 'DESC' ? '<' : '>'} (${add(value)}, ${add(reportId)}, ${add(pinId)})`);
  }
  const limit = add(rowsPerPage + 1);
  const { rows } = await db.query(
    `SELECT r.id AS report_id, r.hash_id AS report_hash_id, r.created_at, r.generated_at, COALESCE(rt.hash_id, '') AS report_type_hash_id,
            r.fields AS report_fields, pg.hash_id AS pg_hash_id, pg.name AS pg_name, p.id AS pin_id, p.hash_id AS p_hash_id, p.name AS p_name,
            p.fields AS p_fields, mm.observations, (${sortExpr})::text AS sort_value
       FROM condition_report r
       JOIN pin_group pg ON pg.id = r.pin_group_id
       LEFT JOIN report_type rt ON rt.id = r.report_type_id
       CROSS JOIN LATERAL (
         SELECT m.pin_id, json_agg(json_build_object('hashId', m.hash_id, 'generatedAt', m.generated_at, 'channelIndex', m.channel_index,
                  'channelMeasurementIndex', m.channel_measurement_index, 'orderOfMagnitude', m.order_of_magnitude, 'significand', m.significand,
                  'quantityHashId', q.hash_id) ORDER BY m.channel_index, m.channel_measurement_index) AS observations
           FROM measurement m JOIN quantity q ON q.id = m.quantity_id
          WHERE m.report_id = r.id AND m.pin_id IS NOT NULL ${inner.map((c) => `AND ${c}`).join(' ')}
          GROUP BY m.pin_id) mm
       JOIN pin p ON p.id = mm.pin_id
      WHERE ${where.join(' AND ')}
      ORDER BY ${sortExpr} ${dir}, r.id ${dir}, p.id ${dir}
      LIMIT ${limit}`, params);
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
      edge: null,
    })),
  };
}
