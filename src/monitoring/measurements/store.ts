import { createHash } from 'node:crypto';
import { namedStatement, type NamedStatement, type Queryable } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';
import { performanceOf } from '../thresholds/limits.ts';
import { uncheckedMeasurements } from '../reports/store.ts';
import { pinThresholdsOf } from '../thresholds/store.ts';

export interface MeasurementFindQuery {
  sortBy?: string;
  descending?: boolean;
  rowsPerPage?: number;
  offset?: string;
  search?: string;
  includePinsWithoutReports?: boolean;
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
    if (Array.isArray(v) && v.length === 3 && typeof v[0] === 'string' && Number.isInteger(v[1]) && Number.isInteger(v[2]))
      return v as [string, number, number];
  } catch {
    // fall through
  }
  throw new ParameterError('offset is not a nextPageOffset this service returned');
}

const FIND_SCOPE = namedStatement(
  'measurement-find-scope',
  `SELECT
    ARRAY(SELECT pg.id FROM pin_group pg WHERE pg.environment_id = $1
             AND ($2::text[] IS NULL OR pg.hash_id = ANY($2))
             AND ($3::text[] IS NULL OR pg.id IN (SELECT pin_group_id FROM pin WHERE environment_id = $1 AND hash_id = ANY($3)))) AS groups,
    CASE WHEN $3::text[] IS NOT NULL THEN ARRAY(SELECT id FROM pin WHERE environment_id = $1 AND hash_id = ANY($3)) END AS pins,
    CASE WHEN $4::text[] IS NOT NULL THEN ARRAY(SELECT id FROM quantity WHERE hash_id = ANY($4)) END AS quantities`,
);

/**
 * What a find may read, in one round trip: the ids of its pin groups (the named ones and those of
 * the named pins, or every one of the environment), of the named pins of the environment and of the
 * named quantities (null: not filtered).
 */
async function scopeOf(
  db: Queryable,
  environmentId: number,
  q: MeasurementFindQuery,
): Promise<{ groups: number[]; pinIds: number[] | null; quantityIds: number[] | null }> {
  const {
    rows: [r],
  } = await db.query<{ groups: number[]; pins: number[] | null; quantities: number[] | null }>(FIND_SCOPE, [
    environmentId,
    q.pinGroupHashIds ?? null,
    q.pinHashIds ?? null,
    q.quantityHashIds ?? null,
  ]);
  const ids = (v: (number | string)[] | null) => (v === null ? null : v.map(Number));
  return { groups: ids(r.groups) ?? [], pinIds: ids(r.pins), quantityIds: ids(r.quantities) };
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

interface Observation {
  hashId: string;
  generatedAt: string;
  channelIndex: number;
  channelMeasurementIndex: number;
  orderOfMagnitude: number;
  significand: number;
  quantityId: number;
}

/**
 * Quantity ids to hashIds, kept by this process: a quantity's hashId never changes and a deleted
 * quantity keeps its row, so an entry never goes stale. Joining quantity per measurement in the
 * find cost a third of its time.
 */
const quantityHashIds = new Map<number, string>();
async function quantityHashIdsOf(db: Queryable, ids: Set<number>): Promise<Map<number, string>> {
  let missing = [...ids].filter((id) => !quantityHashIds.has(id));
  if (missing.length > 0) {
    if (quantityHashIds.size + missing.length > 100_000) {
      quantityHashIds.clear();
      missing = [...ids];
    }
    const { rows } = await db.query<{ id: number; hash_id: string }>('SELECT id, hash_id FROM quantity WHERE id = ANY($1::bigint[])', [missing]);
    for (const r of rows) quantityHashIds.set(Number(r.id), r.hash_id);
  }
  return quantityHashIds;
}

/**
 * Sorted by time, the walk answers one row per report with its pins (`pins`: pinId and
 * observations, in page order); these become one row per report and pin, with the pins' and their
 * edges' columns read in one query for the page.
 */
async function expandReports(db: Queryable, reports: Record<string, unknown>[]): Promise<Record<string, unknown>[]> {
  const perReport = reports.map((r) => r.pins as { pinId: number; observations: Observation[] }[]);
  const ids = [...new Set(perReport.flatMap((pins) => pins.map((x) => Number(x.pinId))))];
  if (ids.length === 0) return [];
  const { rows: pins } = await db.query(PAGE_PINS, [ids]);
  const byId = new Map(pins.map((x) => [Number(x.pin_id), x]));
  return reports.flatMap((r, i) =>
    perReport[i].flatMap((x) => {
      const pin = byId.get(Number(x.pinId));
      // a pin deleted since the walk read it: its row goes
      return pin ? [{ ...r, ...pin, observations: x.observations, pins: undefined }] : [];
    }),
  );
}
const PAGE_PINS = namedStatement(
  'measurement-find-page-pins',
  `SELECT p.id AS pin_id, p.hash_id AS p_hash_id, p.name AS p_name, p.fields AS p_fields,
    e.hash_id AS e_hash_id, e.name AS e_name, e.fields AS e_fields FROM pin p LEFT JOIN edge e ON e.id = p.edge_id WHERE p.id = ANY($1::bigint[])`,
);

/** A timestamptz as the API writes it (toISOString's form, to the millisecond), made by PostgreSQL: no Date parsed and printed again per value. */
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** A statement's parameters: `add` gives the placeholder of a value. */
class Params {
  readonly values: unknown[] = [];
  add = (value: unknown) => {
    this.values.push(value);
    return `$${this.values.length}`;
  };
}

/**
 * measurement find: one row per report and pin of this environment that received measurements,
 * filtered by pin group, pin, quantity, report type and report time (`since` included, `before`
 * not), keyset-paged on (sort value, report, pin).
 *
 * With includePinsWithoutReports (the default), each pin the filters name (by pin group, pin and
 * search) that has no row in the range gets one row with `report: null`. Sorted by a name, these
 * rows sit among the others by that name (after a pin's report rows of the same value); sorted by
 * generatedAt they have no time and come after every report row, by pin.
 *
 * Sorted by generatedAt (the chart's case), the reports are walked in index order
 * (condition_report_pin_group_time) and expanded into rows until a page is full; sorted by a
 * name, every matching row is ranked.
 */
export async function findMeasurements(db: Queryable, environmentId: number, q: MeasurementFindQuery) {
  const sortBy = q.sortBy ?? 'pinName';
  const sortExpr = SORTS[sortBy];
  if (!sortExpr) throw new ParameterError(`sortBy must be one of ${Object.keys(SORTS).join(', ')}`);
  const dir = (q.descending ?? true) ? 'DESC' : 'ASC';
  const cmp = dir === 'DESC' ? '<' : '>';
  const rowsPerPage = q.rowsPerPage ?? 10;
  const includeEmpty = q.includePinsWithoutReports ?? true;
  const byTime = sortBy === 'generatedAt';
  const offset = q.offset ? decodeOffset(q.offset) : null;
  // sorted by time, the rows without a report follow all others: an offset among them names report 0
  const pastReports = byTime && offset !== null && offset[1] === 0;
  // named pins and quantities as ids: the per-report lookups stay plain index conditions
  const { groups, pinIds, quantityIds } = await scopeOf(db, environmentId, q);

  /** The filters as conditions on the reports (r), their measurements (m) and the pins (p, pg) of one statement. */
  const conditions = (add: Params['add']) => {
    const report = [groups.length === 1 ? `r.pin_group_id = ${add(groups[0])}` : `r.pin_group_id = ANY(${add(groups)}::bigint[])`];
    const pin = [report[0].replace('r.pin_group_id', 'p.pin_group_id')];
    const measurement = ['m.pin_id IS NOT NULL'];
    if (pinIds) {
      const ids = add(pinIds);
      measurement.push(`m.pin_id = ANY(${ids}::bigint[])`);
      pin.push(`p.id = ANY(${ids}::bigint[])`);
    }
    if (quantityIds) measurement.push(`m.quantity_id = ANY(${add(quantityIds)}::bigint[])`);
    if (q.reportTypeHashIds) report.push(`r.report_type_id IN (SELECT id FROM report_type WHERE hash_id = ANY(${add(q.reportTypeHashIds)}))`);
    if (q.since) report.push(`r.generated_at >= ${add(q.since)}::timestamptz`);
    if (q.before) report.push(`r.generated_at < ${add(q.before)}::timestamptz`);
    const search: string[] = [];
    if (q.search) {
      const like = add(`%${q.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
      search.push(`(p.name ILIKE ${like} OR pg.name ILIKE ${like} OR p.hash_id ILIKE ${like})`);
    }
    return { report, measurement, pin, search };
  };

  /** The rows of reports, ranked; `limit` of them. */
  const reportRows = (p: Params, limit: number) => {
    const c = conditions(p.add);
    const rowWhere = [...c.search];
    // sorted by time, the bound on the pin applies to a report's measurements (the walk joins no pin row)
    const measurementBound: string[] = [];
    if (offset) {
      const [value, reportId, pinId] = offset;
      const [v, r, pin] = [p.add(value), p.add(reportId), p.add(pinId)];
      rowWhere.push(`(${sortExpr}, r.id, p.id) ${cmp} (${v}, ${r}::bigint, ${pin}::bigint)`);
      measurementBound.push(`(r.generated_at, r.id, m.pin_id) ${cmp} (${v}::timestamptz, ${r}::bigint, ${pin}::bigint)`);
      // the same bound on the report alone: an index condition of the walk in time order
      if (byTime) c.report.push(`(r.generated_at, r.id) ${cmp}= (${v}::timestamptz, ${r}::bigint)`);
    }
    const observations = `json_agg(json_build_object('hashId', m.hash_id, 'generatedAt', ${iso('m.generated_at')}, 'channelIndex', m.channel_index,
                  'channelMeasurementIndex', m.channel_measurement_index, 'orderOfMagnitude', m.order_of_magnitude, 'significand', m.significand,
                  'quantityId', m.quantity_id) ORDER BY m.channel_index, m.channel_measurement_index)`;
    const columns = `r.id AS report_id, r.hash_id AS report_hash_id, ${iso('r.created_at')} AS created_at, ${iso('r.generated_at')} AS generated_at, COALESCE(rt.hash_id, '') AS report_type_hash_id,
            r.fields AS report_fields, pg.hash_id AS pg_hash_id, pg.name AS pg_name, p.id AS pin_id, p.hash_id AS p_hash_id, p.name AS p_name,
            p.fields AS p_fields, e.hash_id AS e_hash_id, e.name AS e_name, e.fields AS e_fields, mm.observations, ${sortExpr} AS sort_key, (${sortExpr})::text AS sort_value`;
    if (byTime) {
      // Sorted by time (the chart's case): the reports are walked in the order of
      // condition_report_pin_group_time (one pin group: an index-only scan, in order, no sort) and
      // each becomes one walk row holding its rows (its pins with their observations; a report
      // without any is skipped), so the walk stops after rowsPerPage + 1 reports: enough for a page,
      // since each has a row (the first may have none left after the offset). The pins' columns are
      // read afterwards for the page (expandReports). Named pins are live ones; otherwise the pin is joined.
      // (The pin groups walked are the environment's: scopeOf.)
      const walkOrder = groups.length === 1 ? `r.pin_group_id ${dir}, r.generated_at ${dir}, r.id ${dir}` : `r.generated_at ${dir}, r.id ${dir}`;
      const pinJoins =
        pinIds && c.search.length === 0 ? '' : ` JOIN pin p ON p.id = m.pin_id${c.search.length > 0 ? ' JOIN pin_group pg ON pg.id = p.pin_group_id' : ''}`;
      return `SELECT r.id AS report_id, r.hash_id AS report_hash_id, ${iso('r.created_at')} AS created_at, ${iso('r.generated_at')} AS generated_at, COALESCE(rt.hash_id, '') AS report_type_hash_id,
              r.fields AS report_fields, pg.hash_id AS pg_hash_id, pg.name AS pg_name, w.pins, r.generated_at::text AS sort_value
         FROM (SELECT r.id AS report_id, x.pins
                 FROM condition_report r
                 CROSS JOIN LATERAL (
                   SELECT json_agg(json_build_object('pinId', y.pin_id, 'observations', y.observations) ORDER BY y.pin_id ${dir}) AS pins
                     FROM (SELECT m.pin_id, ${observations} AS observations
                             FROM measurement m${pinJoins}
                            WHERE ${['m.report_id = r.id', ...c.measurement, ...c.search, ...measurementBound].join(' AND ')}
                            GROUP BY m.pin_id) y
                   HAVING count(*) > 0) x
                WHERE ${c.report.join(' AND ')}
                ORDER BY ${walkOrder}
                LIMIT ${p.add(limit)}) w
         JOIN condition_report r ON r.id = w.report_id
         JOIN pin_group pg ON pg.id = r.pin_group_id
         LEFT JOIN report_type rt ON rt.id = r.report_type_id
        ORDER BY r.generated_at ${dir}, r.id ${dir}`;
    }
    // a report's rows: one per pin of its measurements (the filtered ones)
    const rowsOfReport = `CROSS JOIN LATERAL (
         SELECT m.pin_id, ${observations} AS observations
           FROM measurement m
          WHERE m.report_id = r.id AND ${c.measurement.join(' AND ')}
          GROUP BY m.pin_id) mm`;
    return `SELECT ${columns}
       FROM condition_report r
       JOIN pin_group pg ON pg.id = r.pin_group_id
       LEFT JOIN report_type rt ON rt.id = r.report_type_id
       ${rowsOfReport}
       JOIN pin p ON p.id = mm.pin_id
       LEFT JOIN edge e ON e.id = p.edge_id
      WHERE ${[`pg.environment_id = ${p.add(environmentId)}`, ...c.report, ...rowWhere].join(' AND ')}
      ORDER BY ${sortExpr} ${dir}, r.id ${dir}, p.id ${dir}
      LIMIT ${p.add(limit)}`;
  };

  /** The rows of the pins without a report in the range; `limit` of them. */
  const emptyRows = (p: Params, limit: number) => {
    const c = conditions(p.add);
    // a pin without a report: none of its measurements makes a row
    const where = [
      `p.environment_id = ${p.add(environmentId)}`,
      ...c.pin,
      ...c.search,
      `NOT EXISTS (SELECT 1 FROM measurement m JOIN condition_report r ON r.id = m.report_id
        WHERE m.pin_id = p.id AND ${[...c.measurement, ...c.report].join(' AND ')})`,
    ];
    if (offset && byTime && pastReports) where.push(`p.id ${cmp} ${p.add(offset[2])}`);
    if (offset && !byTime) where.push(`(${sortExpr}, 0::bigint, p.id) ${cmp} (${p.add(offset[0])}, ${p.add(offset[1])}::bigint, ${p.add(offset[2])}::bigint)`);
    return `SELECT 0::bigint AS report_id, NULL::text AS report_hash_id, NULL::text AS created_at, NULL::text AS generated_at,
            NULL::text AS report_type_hash_id, NULL::jsonb AS report_fields, pg.hash_id AS pg_hash_id, pg.name AS pg_name, p.id AS pin_id, p.hash_id AS p_hash_id,
            p.name AS p_name, p.fields AS p_fields, e.hash_id AS e_hash_id, e.name AS e_name, e.fields AS e_fields, NULL::json AS observations,
            ${byTime ? 'NULL::timestamptz' : sortExpr} AS sort_key, ${byTime ? "''" : `(${sortExpr})::text`} AS sort_value
       FROM pin p JOIN pin_group pg ON pg.id = p.pin_group_id LEFT JOIN edge e ON e.id = p.edge_id
      WHERE ${where.join(' AND ')}
      ORDER BY ${byTime ? '' : `${sortExpr} ${dir}, `}p.id ${dir}
      LIMIT ${p.add(limit)}`;
  };

  const run = async (build: (p: Params) => string, plan: 'prepared' | 'each time' = 'prepared') => {
    const p = new Params();
    const text = build(p);
    return (await db.query(plan === 'prepared' ? prepared(text) : text, p.values)).rows;
  };
  let rows: Record<string, unknown>[];
  if (byTime) {
    rows = pastReports ? [] : (await expandReports(db, await run((p) => reportRows(p, rowsPerPage + 1)))).slice(0, rowsPerPage + 1);
    // the report rows end on this page: the pins without any follow
    // (planned each time: it runs once per walk, and PostgreSQL's generic plan for it reads far more than a custom one)
    if (includeEmpty && rows.length <= rowsPerPage) rows.push(...(await run((p) => emptyRows(p, rowsPerPage + 1 - rows.length), 'each time')));
  } else if (includeEmpty) {
    rows = await run(
      (p) => `(${reportRows(p, rowsPerPage + 1)}) UNION ALL (${emptyRows(p, rowsPerPage + 1)})
      ORDER BY sort_key ${dir}, report_id ${dir}, pin_id ${dir} LIMIT ${p.add(rowsPerPage + 1)}`,
    );
  } else {
    rows = await run((p) => reportRows(p, rowsPerPage + 1));
  }
  const pairs = rows.flatMap((r) => ((r.observations as Observation[] | null) ?? []).map((o) => ({ pinId: Number(r.pin_id), quantityId: o.quantityId })));
  const reportHashIds = [...new Set(rows.flatMap((r) => (r.report_hash_id === null ? [] : [r.report_hash_id as string])))];
  const [quantities, thresholds, unchecked] = await Promise.all([
    quantityHashIdsOf(db, new Set(pairs.map((x) => x.quantityId))),
    pinThresholdsOf(db, environmentId, pairs),
    uncheckedMeasurements(db, reportHashIds),
  ]);
  let nextPageOffset: string | null = null;
  if (rows.length > rowsPerPage) {
    rows.length = rowsPerPage;
    const last = rows[rows.length - 1];
    nextPageOffset = Buffer.from(JSON.stringify([last.sort_value, Number(last.report_id), Number(last.pin_id)])).toString('base64url');
  }
  return {
    nextPageOffset,
    rows: rows.map((r) => ({
      report:
        r.report_hash_id === null
          ? null
          : {
              hashId: r.report_hash_id as string,
              createdAt: r.created_at as string,
              updatedAt: r.created_at as string,
              generatedAt: r.generated_at as string,
              reportTypeHashId: r.report_type_hash_id as string,
              pinGroupFields: r.report_fields as Record<string, unknown>,
              pinObservations: (r.observations as Observation[]).map(({ quantityId, ...m }) => ({
                measurement: {
                  ...m,
                  reportHashId: r.report_hash_id as string,
                  pinHashId: r.p_hash_id as string,
                  // against the pin's own threshold for the quantity, else the quantity's defaults; -1: entered as not to compare
                  performance: unchecked.has(m.hashId) ? -1 : performanceOf(thresholds.get(`${Number(r.pin_id)}:${quantityId}`), m),
                },
                quantityHashId: quantities.get(quantityId) ?? '',
              })),
            },
      pinGroup: { hashId: r.pg_hash_id as string, name: r.pg_name as string },
      pin: { hashId: r.p_hash_id as string, name: r.p_name as string, fields: r.p_fields as Record<string, unknown> },
      edge: r.e_hash_id === null ? null : { hashId: r.e_hash_id as string, name: r.e_name as string, fields: r.e_fields as Record<string, unknown> },
    })),
  };
}
