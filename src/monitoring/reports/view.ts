import { DEVICE_TYPE_SELECT, toDeviceType } from '../../connectivity/device-types/store.ts';
import type { Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup } from '../pin-groups/view.ts';
import { QUANTITY_SELECT, toQuantity } from '../quantities/store.ts';
import { REPORT_TYPE_SELECT, toEnvironmentReportType } from '../report-types/view.ts';
import { performanceOf } from '../thresholds/limits.ts';
import { pinThresholdsOf } from '../thresholds/store.ts';

// The reads of the SDK's report routes: a monitoring environment sees every condition report on its pin
// groups, a device's and a manual one alike.

/** The reports of environment $1: those on its pin groups. */
const REPORTS_OF_ENVIRONMENT = `condition_report r JOIN pin_group pg ON pg.id = r.pin_group_id
  LEFT JOIN report_type rt ON rt.id = r.report_type_id LEFT JOIN device d ON d.id = r.device_id`;

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

/** report get: the report with its measurements (observations), type, device (type) and author. */
export async function getReport(db: Queryable, environmentId: number, hashId: string) {
  const {
    rows: [r],
  } = await db.query(
    `SELECT r.id, r.hash_id, r.fields, r.generated_at, r.created_at, pg.hash_id AS pg_hash_id, d.hash_id AS device_hash_id, mr.user_name,
            coalesce(mr.unchecked_measurement_hash_ids, '{}') AS unchecked, ${REPORT_TYPE_SELECT}, ${DEVICE_TYPE_SELECT}
       FROM ${REPORTS_OF_ENVIRONMENT} LEFT JOIN device_type t ON t.id = d.device_type_id LEFT JOIN manual_report mr ON mr.report_hash_id = r.hash_id
      WHERE r.hash_id = $2 AND pg.environment_id = $1`,
    [environmentId, hashId],
  );
  if (!r) throw new NotFoundError('report', hashId);
  const { rows: measurements } = await db.query(
    `SELECT m.hash_id, m.generated_at, m.channel_index, m.channel_measurement_index, m.order_of_magnitude, m.significand, m.pin_id, m.quantity_id,
            p.hash_id AS pin_hash_id, q.hash_id AS quantity_hash_id
       FROM measurement m JOIN quantity q ON q.id = m.quantity_id LEFT JOIN pin p ON p.id = m.pin_id
      WHERE m.report_id = $1 ORDER BY m.channel_index NULLS LAST, m.channel_measurement_index, m.id`,
    [r.id],
  );
  const pairs = measurements.filter((m) => m.pin_id !== null).map((m) => ({ pinId: Number(m.pin_id), quantityId: Number(m.quantity_id) }));
  const [thresholds, { rows: quantities }] = await Promise.all([
    pinThresholdsOf(db, environmentId, pairs),
    db.query(`SELECT ${QUANTITY_SELECT} FROM quantity q WHERE q.id = ANY($1::bigint[]) ORDER BY q.id`, [[...new Set(measurements.map((m) => m.quantity_id))]]),
  ]);
  const unchecked = new Set(r.unchecked as string[]);
  return {
    hashId: r.hash_id as string,
    observations: measurements.map((m) => {
      const value = { orderOfMagnitude: m.order_of_magnitude as number, significand: m.significand as number };
      return {
        measurement: {
          hashId: m.hash_id as string,
          generatedAt: iso(m.generated_at),
          channelIndex: m.channel_index as number | null,
          channelMeasurementIndex: m.channel_measurement_index as number | null,
          reportHashId: r.hash_id as string,
          pinHashId: (m.pin_hash_id as string | null) ?? null,
          ...value,
          performance:
            unchecked.has(m.hash_id as string) || m.pin_id === null ? -1 : performanceOf(thresholds.get(`${Number(m.pin_id)}:${Number(m.quantity_id)}`), value),
        },
        quantityHashId: m.quantity_hash_id as string,
      };
    }),
    deviceType: r.type_id === null ? null : toDeviceType(r),
    deviceHashId: (r.device_hash_id as string | null) ?? null,
    fields: r.fields as Record<string, unknown>,
    type: toEnvironmentReportType(r),
    quantities: quantities.map(toQuantity),
    pinGroupHashId: r.pg_hash_id as string,
    userName: (r.user_name as string | null) ?? null,
    generatedAt: iso(r.generated_at),
    createdAt: iso(r.created_at),
  };
}

export interface ReportFindQuery extends FindQuery {
  pinGroupHashId?: string | null;
  edgeHashId?: string | null;
  gridHashId?: string | null;
  mapLayers?: string[] | null;
}

/** report find: the environment's reports, newest first, optionally of one pin group, of the pin groups on an edge or in a grid, or of map layers. */
export async function findReports(db: Queryable, environmentId: number, query: ReportFindQuery) {
  const where = ['pg.environment_id = $1'];
  const params: unknown[] = [environmentId];
  const add = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  if (query.pinGroupHashId) where.push(`pg.hash_id = ${add(query.pinGroupHashId)}`);
  if (query.edgeHashId)
    where.push(
      `pg.id IN (SELECT p.pin_group_id FROM pin p JOIN edge e ON e.id = p.edge_id WHERE e.environment_id = $1 AND e.hash_id = ${add(query.edgeHashId)})`,
    );
  if (query.gridHashId)
    where.push(
      `pg.id IN (SELECT gm.pin_group_id FROM grid g JOIN grid_member gm ON gm.grid_id = g.id WHERE g.environment_id = $1 AND g.hash_id = ${add(query.gridHashId)})`,
    );
  if (query.mapLayers) where.push(`pg.map_layer = ANY(${add(query.mapLayers)}::text[])`);
  const page = await findPage(
    db,
    {
      from: `${REPORTS_OF_ENVIRONMENT} ${PIN_GROUP_LINK_JOIN}`,
      select: `r.hash_id AS r_hash_id, r.generated_at AS r_generated_at, d.hash_id AS d_hash_id, rt.hash_id AS rt_hash_id, rt.type AS rt_type, rt.name_text AS rt_name, ${PIN_GROUP_SELECT}`,
      idColumn: 'r.id',
      where,
      params,
      sortable: { generatedAt: 'r.generated_at' },
      search: ['r.hash_id', 'pg.name', 'rt.name_text'],
    },
    { ...query, sortBy: query.sortBy ?? 'generatedAt', descending: query.descending ?? true },
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => ({
      report: {
        hashId: r.r_hash_id as string,
        deviceHashId: (r.d_hash_id as string | null) ?? null,
        reportTypeHashId: (r.rt_hash_id as string | null) ?? null,
        reportTypeType: (r.rt_type as 'human' | 'device' | null) ?? 'device',
        generatedAt: iso(r.r_generated_at),
      },
      pinGroup: toPinGroup(r),
      reportTypeName: (r.rt_name as string | null) ?? 'unknown report type',
    })),
  };
}
