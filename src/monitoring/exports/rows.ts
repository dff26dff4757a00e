// The rows an export writes, as statements whose results are read through a cursor: however many rows, the
// process holds one batch at a time. Every statement is scoped to the environment (its pins) here, whatever the scope.

import type { Queryable } from '../../app/db.ts';
import { compileQuery } from '../analytics/compile.ts';
import type { ExportScope, MeasurementScope, StaticScope } from './scope.ts';

export interface RowsStatement {
  header: string[];
  sql: string;
  params: unknown[];
}

const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The pins a scope's pin groups and pins name (either, when both: a grid holds pin groups and pins). */
function pinConditions(scope: { pinGroupIds?: number[]; pinIds?: number[] }, params: unknown[]): string[] {
  if (scope.pinGroupIds === undefined && scope.pinIds === undefined) return [];
  params.push(scope.pinGroupIds ?? [], scope.pinIds ?? []);
  return [`(p.pin_group_id = ANY($${params.length - 1}::bigint[]) OR p.id = ANY($${params.length}::bigint[]))`];
}

export const MEASUREMENT_HEADER = ['generatedAt', 'pinGroupHashId', 'pinGroupName', 'pinHashId', 'pinName', 'quantityHashId', 'quantityName', 'unit', 'value'];

function measurementRows(environmentId: number, scope: MeasurementScope): RowsStatement {
  const params: unknown[] = [environmentId];
  const where = ['p.environment_id = $1', ...pinConditions(scope, params)];
  if (scope.from !== null) {
    params.push(scope.from);
    where.push(`m.generated_at >= $${params.length}::timestamptz`);
  }
  if (scope.to !== null) {
    params.push(scope.to);
    where.push(`m.generated_at < $${params.length}::timestamptz`);
  }
  if (scope.quantityIds) {
    params.push(scope.quantityIds);
    where.push(`m.quantity_id = ANY($${params.length}::bigint[])`);
  }
  if (scope.reportTypeIds) {
    // the environment's reports of those types (by its pin groups, as measurement find reads them) as one set the
    // measurements are matched against, not a report looked up per measurement: that per-row lookup is what keeps
    // the report out of the columns (below)
    params.push(scope.reportTypeIds);
    where.push(`m.report_id IN (SELECT r.id FROM condition_report r JOIN pin_group rg ON rg.id = r.pin_group_id
                                 WHERE rg.environment_id = $1 AND r.report_type_id = ANY($${params.length}::bigint[]))`);
  }
  if (scope.series) {
    params.push(
      scope.series.map((s) => s[0]),
      scope.series.map((s) => s[1]),
    );
    where.push(`(m.pin_id, m.quantity_id) IN (SELECT * FROM unnest($${params.length - 1}::bigint[], $${params.length}::bigint[]))`);
  }
  // by pin, quantity and time: the order of the index measurement_pin_quantity_time, so rows stream from the first
  // fetch on; in time order alone, 10 M rows were sorted on disk before the first row came (over 5 minutes). No
  // report column: its lookup per row (10 M index probes) made the export several times slower.
  return {
    header: MEASUREMENT_HEADER,
    // the value as the decimal it is (significand × 10^orderOfMagnitude), without trailing zeros
    sql: `SELECT ${iso('m.generated_at')}, pg.hash_id, pg.name, p.hash_id, p.name, q.hash_id, q.name_text, q.unit,
                 trim_scale(m.significand::numeric * 10::numeric ^ m.order_of_magnitude)::text
            FROM measurement m JOIN pin p ON p.id = m.pin_id JOIN pin_group pg ON pg.id = p.pin_group_id
            JOIN quantity q ON q.id = m.quantity_id
           WHERE ${where.join(' AND ')}
           ORDER BY m.pin_id, m.quantity_id, m.generated_at`,
    params,
  };
}

function staticRows(environmentId: number, scope: StaticScope): RowsStatement {
  const params: unknown[] = [environmentId];
  const where = ['p.environment_id = $1', ...pinConditions(scope, params)];
  return {
    header: ['pinGroupHashId', 'pinGroupName', 'pinGroupFields', 'pinGroupGeometry', 'pinHashId', 'pinName', 'pinFields'],
    sql: `SELECT pg.hash_id, pg.name, pg.fields::text, pg.geometry::text, p.hash_id, p.name, p.fields::text
            FROM pin p JOIN pin_group pg ON pg.id = p.pin_group_id WHERE ${where.join(' AND ')} ORDER BY pg.name, pg.id, p.name, p.id`,
    params,
  };
}

/** The statement of a scope's rows (analytics: its whole result, unpaged). */
export function rowsStatement(environmentId: number, scope: ExportScope): RowsStatement {
  if (scope.kind === 'measurements') return measurementRows(environmentId, scope);
  if (scope.kind === 'static') return staticRows(environmentId, scope);
  // one page as large as a bigint allows: the whole result, its columns in the query's order
  const compiled = compileQuery(scope.query, environmentId, 0, Number.MAX_SAFE_INTEGER - 1);
  const header = scope.query.columns.map((c, i) => c.name ?? (typeof c.field === 'string' ? c.field : `column ${i}`));
  return { header, sql: compiled.sql, params: compiled.params };
}

/**
 * About how many rows the statement yields, for the progress: the planner's estimate (a count would run the
 * statement twice; measured, it doubled the export's database time).
 */
export async function estimateRows(db: Queryable, s: RowsStatement): Promise<number> {
  const { rows } = await db.query<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>(`EXPLAIN (FORMAT JSON) ${s.sql}`, s.params);
  return Math.max(1, Math.round(rows[0]['QUERY PLAN'][0].Plan['Plan Rows']));
}
