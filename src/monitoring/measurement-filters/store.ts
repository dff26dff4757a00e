import { softDelete, type Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { toGrid } from '../grids/store.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup } from '../pin-groups/view.ts';
import { QUANTITY_SELECT, toQuantity } from '../quantities/store.ts';
import { VISIBLE_QUANTITY } from '../thresholds/store.ts';
import { MEASUREMENT_FILTER_SELECT, toMeasurementFilter, type Period } from './view.ts';

export interface MeasurementFilterInput {
  name: string;
  description: string;
  period: Period;
  includePinsWithoutReports?: boolean;
  reportTypeHashIds: string[];
  gridHashId?: string;
  pinGroupHashIds?: string[];
  quantityHashIds: string[];
  fieldKeys: string[];
  pinFieldKeys?: string[];
  edgeFieldKeys?: string[];
}

/**
 * The report types an environment may filter on: its own, and those of the suppliers whose devices it
 * claimed (their reports carry the supplier's report types onto its pin groups), as VISIBLE_QUANTITY.
 */
export const VISIBLE_REPORT_TYPE = `rt.deleted_at IS NULL AND (rt.environment_id = $1
  OR EXISTS (SELECT 1 FROM device d WHERE d.environment_id = rt.environment_id AND d.claimed_environment_id = $1))`;

const LOOKUPS = {
  reportTypeHashIds: {
    sql: `SELECT rt.id, rt.hash_id FROM report_type rt WHERE rt.hash_id = ANY($2) AND ${VISIBLE_REPORT_TYPE}`,
    what: 'a report type this environment receives',
  },
  pinGroupHashIds: { sql: 'SELECT id, hash_id FROM pin_group WHERE environment_id = $1 AND hash_id = ANY($2)', what: 'a pin group of this environment' },
  quantityHashIds: {
    sql: `SELECT q.id, q.hash_id FROM quantity q WHERE q.hash_id = ANY($2) AND ${VISIBLE_QUANTITY}`,
    what: 'a quantity this environment measures',
  },
} as const;

/** The ids `hashIds` name, in order and without repeats; one the environment cannot use is a parameter_error naming `field[i]`. */
async function idsOf(db: Queryable, environmentId: number, field: keyof typeof LOOKUPS, hashIds: string[]): Promise<number[]> {
  if (hashIds.length === 0) return [];
  const { rows } = await db.query<{ id: string; hash_id: string }>(LOOKUPS[field].sql, [environmentId, hashIds]);
  const ids = new Map(rows.map((r) => [r.hash_id, Number(r.id)]));
  return [
    ...new Set(
      hashIds.map((h, i) => {
        const id = ids.get(h);
        if (id === undefined) throw new ParameterError(`${field}[${i}] ${h} is not ${LOOKUPS[field].what}`);
        return id;
      }),
    ),
  ];
}

async function gridIdOf(db: Queryable, environmentId: number, hashId: string): Promise<number> {
  const { rows } = await db.query<{ id: string }>('SELECT id FROM grid WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (rows.length === 0) throw new ParameterError(`gridHashId ${hashId} is not a grid of this environment`);
  return Number(rows[0].id);
}

/** A period as stored: since and before in one (ISO 8601, UTC) form whatever form they were given in. */
function storedPeriod(period: Period): string {
  if (typeof period === 'string') return JSON.stringify(period);
  const out: { since?: string; before?: string } = {};
  if (period.since !== undefined) out.since = new Date(period.since).toISOString();
  if (period.before !== undefined) out.before = new Date(period.before).toISOString();
  return JSON.stringify(out);
}

/** The columns a (partial) input sets, with every hashId resolved to an id of this environment. */
async function columnsOf(db: Queryable, environmentId: number, input: Partial<MeasurementFilterInput>): Promise<Record<string, unknown>> {
  const c: Record<string, unknown> = {};
  if (input.name !== undefined) c.name = input.name;
  if (input.description !== undefined) c.description = input.description;
  if (input.period !== undefined) c.period = storedPeriod(input.period);
  if (input.includePinsWithoutReports !== undefined) c.include_pins_without_reports = input.includePinsWithoutReports;
  if (input.reportTypeHashIds !== undefined) c.report_type_ids = await idsOf(db, environmentId, 'reportTypeHashIds', input.reportTypeHashIds);
  if (input.gridHashId !== undefined) c.grid_id = await gridIdOf(db, environmentId, input.gridHashId);
  if (input.pinGroupHashIds !== undefined) c.pin_group_ids = await idsOf(db, environmentId, 'pinGroupHashIds', input.pinGroupHashIds);
  if (input.quantityHashIds !== undefined) c.quantity_ids = await idsOf(db, environmentId, 'quantityHashIds', input.quantityHashIds);
  if (input.fieldKeys !== undefined) c.field_keys = input.fieldKeys;
  if (input.pinFieldKeys !== undefined) c.pin_field_keys = input.pinFieldKeys;
  if (input.edgeFieldKeys !== undefined) c.edge_field_keys = input.edgeFieldKeys;
  return c;
}

export async function addMeasurementFilter(db: Queryable, environmentId: number, input: MeasurementFilterInput): Promise<string> {
  const hashId = newHashId();
  // the SDK's default: pins without reports in the period are shown too
  const c = { include_pins_without_reports: true, ...(await columnsOf(db, environmentId, input)) };
  const names = Object.keys(c);
  await db.query(
    `INSERT INTO measurement_filter (hash_id, environment_id, ${names.join(', ')}) VALUES ($1, $2, ${names.map((_, i) => `$${i + 3}`).join(', ')})`,
    [hashId, environmentId, ...Object.values(c)],
  );
  return hashId;
}

export async function updateMeasurementFilter(db: Queryable, environmentId: number, hashId: string, patch: Partial<MeasurementFilterInput>): Promise<void> {
  const c = await columnsOf(db, environmentId, patch);
  const sets = Object.keys(c).map((name, i) => `${name} = $${i + 3}`);
  const { rowCount } = await db.query(
    `UPDATE measurement_filter SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`,
    [environmentId, hashId, ...Object.values(c)],
  );
  if (!rowCount) throw new NotFoundError('measurement filter', hashId);
}

export async function deleteMeasurementFilter(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  await softDelete(db, 'measurement_filter', 'measurement filter', environmentId, hashId);
}

export async function findMeasurementFilters(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: 'measurement_filter f',
      select: MEASUREMENT_FILTER_SELECT,
      idColumn: 'f.id',
      where: ['f.environment_id = $1', 'f.deleted_at IS NULL'],
      params: [environmentId],
      sortable: { hashId: 'f.hash_id', name: 'f.name', updatedAt: 'f.updated_at' },
      search: ['f.name', 'f.description', 'f.hash_id'],
      updatedColumn: 'f.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'hashId' },
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ measurementFilter: toMeasurementFilter(r) })) };
}

/** Rows of `table` by an id list, in the list's order (a pin group or grid deleted since has dropped out). */
const inOrder = (ids: string, join: string) => `unnest(${ids}::bigint[]) WITH ORDINALITY AS x(id, o) ${join}`;

/** measurement-filter get: the filter with the report types, grid, pin groups and quantities it names, in the order it names them. */
export async function getMeasurementFilter(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(
    `SELECT ${MEASUREMENT_FILTER_SELECT}, f.report_type_ids, f.grid_id, f.pin_group_ids, f.quantity_ids, f.field_keys, f.pin_field_keys, f.edge_field_keys
      FROM measurement_filter f WHERE f.environment_id = $1 AND f.hash_id = $2 AND f.deleted_at IS NULL`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('measurement filter', hashId);
  const f = rows[0];
  const [reportTypes, grid, pinGroups, quantities] = await Promise.all([
    db.query(
      `SELECT rt.hash_id, rt.name_text, rt.field_configurations, rt.deleted_at FROM ${inOrder('$1', 'JOIN report_type rt ON rt.id = x.id')} ORDER BY x.o`,
      [f.report_type_ids],
    ),
    db.query('SELECT hash_id, type_key, name, fields FROM grid WHERE id = $1', [f.grid_id]),
    db.query(`SELECT ${PIN_GROUP_SELECT} FROM ${inOrder('$1', `JOIN pin_group pg ON pg.id = x.id ${PIN_GROUP_LINK_JOIN}`)} ORDER BY x.o`, [f.pin_group_ids]),
    db.query(`SELECT ${QUANTITY_SELECT} FROM ${inOrder('$1', 'JOIN quantity q ON q.id = x.id AND q.deleted_at IS NULL')} ORDER BY x.o`, [f.quantity_ids]),
  ]);
  return {
    measurementFilter: toMeasurementFilter(f),
    // the SDK's environmentReportType: a supplier's report type reaches a monitoring environment through its devices
    reportTypes: reportTypes.rows.map((r) => ({
      hashId: r.hash_id as string,
      name: r.name_text as string,
      fieldConfigurations: r.field_configurations as unknown,
      type: 'device' as const,
      deletedAt: r.deleted_at instanceof Date ? r.deleted_at.toISOString() : null,
    })),
    grid: grid.rows.length === 0 ? null : toGrid(grid.rows[0]),
    pinGroups: pinGroups.rows.map(toPinGroup),
    quantities: quantities.rows.map(toQuantity),
    fieldKeys: f.field_keys as string[],
    pinFieldKeys: f.pin_field_keys as string[],
    edgeFieldKeys: f.edge_field_keys as string[],
  };
}
