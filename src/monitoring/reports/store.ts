import { namedStatement, recentlyStored, type Queryable } from '../../app/db.ts';

/** A condition report as the workers push it to the monitoring core. */
export interface ConditionReportIn {
  hashId: string;
  environmentHashId: string;
  deviceHashId: string;
  reportTypeHashId: string;
  generatedAt: string;
  fields: Record<string, unknown>;
  payload: string;
  /** the device's pin group link as the worker's device cache knew it */
  linkId?: number | null;
  /** entered by a user on its pin group (report add): its measurements' pins need no link */
  manual?: boolean;
  measurements: {
    hashId: string;
    channelIndex: number;
    channelMeasurementIndex: number;
    quantityHashId: string;
    generatedAt: string;
    orderOfMagnitude: number;
    significand: number;
    /** the pin of the measurement's channel under `linkId` */
    pinId?: number | null;
    /** not compared to thresholds (a manual measurement's doNotCompareToThresholds) */
    unchecked?: boolean;
  }[];
}

const INGEST_REPORTS = namedStatement(
  'ingest-reports',
  `WITH input AS (
       SELECT * FROM json_to_recordset(($1::json)->'reports')
         AS x("hashId" text, "environmentHashId" text, "deviceHashId" text, "reportTypeHashId" text, "generatedAt" timestamptz,
              fields jsonb, payload text, "linkId" bigint, measurements json)
     ), ins AS (
       INSERT INTO condition_report (hash_id, environment_id, device_id, report_type_id, generated_at, fields, payload, pin_group_id)
       SELECT i."hashId", e.id, d.id, rt.id, i."generatedAt", coalesce(i.fields, '{}'), i.payload, l.pin_group_id
         FROM input i
         JOIN environment e ON e.hash_id = i."environmentHashId"
         LEFT JOIN device d ON d.hash_id = i."deviceHashId" AND d.environment_id = e.id
         LEFT JOIN report_type rt ON rt.hash_id = i."reportTypeHashId" AND rt.environment_id = e.id
         LEFT JOIN device_link l ON l.id = i."linkId" AND l.device_id = d.id
        -- a report stored already: at the same time (the same batch again: ON CONFLICT) or, from a retried run of supplier code
        -- that took the time from its clock, between the retry horizon and now
        WHERE NOT EXISTS (SELECT 1 FROM condition_report c WHERE c.hash_id = i."hashId" AND ${recentlyStored('c.generated_at')})
       ON CONFLICT (hash_id, generated_at) DO NOTHING
       RETURNING id, hash_id, environment_id, device_id, pin_group_id
     )
     INSERT INTO measurement (hash_id, report_id, environment_id, device_id, quantity_id, pin_id, channel_index, channel_measurement_index,
                              generated_at, order_of_magnitude, significand)
     SELECT m."hashId", ins.id, ins.environment_id, ins.device_id, q.id, CASE WHEN ins.pin_group_id IS NOT NULL THEN m."pinId" END,
            m."channelIndex", m."channelMeasurementIndex", m."generatedAt", m."orderOfMagnitude", m.significand
       FROM ins
       JOIN input i ON i."hashId" = ins.hash_id
       CROSS JOIN LATERAL json_to_recordset(i.measurements) AS m("hashId" text, "channelIndex" int, "channelMeasurementIndex" int,
            "quantityHashId" text, "generatedAt" timestamptz, "orderOfMagnitude" smallint, significand int, "pinId" bigint)
       JOIN quantity q ON q.hash_id = m."quantityHashId" AND q.environment_id = ins.environment_id`,
);

/**
 * Stores a batch of reports and their measurements in one statement, straight from the JSON the
 * worker sent (`{"reports": ConditionReportIn[]}`): the service neither parses nor re-encodes it.
 * A report whose `linkId` names the device's live link is registered on that link's pin group and
 * its measurements on the pins the worker mapped (`pinId`); a link undone meanwhile (unlink,
 * unclaim, pin group deleted) matches nothing, so a stale device cache cannot put a report on a pin.
 * Idempotent by report hashId: a batch pushed twice (a retried job or request) is stored once, when
 * the retry comes within RETRY_HORIZON or gives the report the same generatedAt.
 * A report lands only when its environment exists, and a measurement only when its quantity
 * belongs to that environment. Returns the number of measurements stored.
 */
export async function ingestReportsJson(db: Queryable, batchJson: string): Promise<number> {
  const { rowCount } = await db.query(INGEST_REPORTS, [batchJson]);
  return rowCount ?? 0;
}

/** A manual report as report add stores it: on its pin group, of no device. */
export interface ManualReportIn {
  hashId: string;
  environmentId: number;
  reportTypeId: number;
  pinGroupId: number;
  generatedAt: string;
  fields: Record<string, unknown>;
}

/** A manual measurement: on a pin of its report's pin group, of no device channel. */
export interface ManualMeasurementIn {
  hashId: string;
  pinId: number;
  quantityId: number;
  generatedAt: string;
  orderOfMagnitude: number;
  significand: number;
}

/** Stores a manual report's row; returns its id. Its measurements follow with insertManualMeasurements. */
export async function insertManualReport(db: Queryable, r: ManualReportIn): Promise<number> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO condition_report (hash_id, environment_id, report_type_id, generated_at, fields, pin_group_id)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
    [r.hashId, r.environmentId, r.reportTypeId, r.generatedAt, JSON.stringify(r.fields), r.pinGroupId],
  );
  return Number(rows[0].id);
}

/** Stores measurements of manual report `reportId` (the charts' hourly rollup follows them, as for a device's). */
export async function insertManualMeasurements(db: Queryable, reportId: number, environmentId: number, list: ManualMeasurementIn[]): Promise<void> {
  if (list.length === 0) return;
  await db.query(
    `INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, generated_at, order_of_magnitude, significand)
     SELECT m."hashId", $1, $2, m."quantityId", m."pinId", m."generatedAt", m."orderOfMagnitude", m.significand
       FROM json_to_recordset($3::json) AS m("hashId" text, "quantityId" bigint, "pinId" bigint, "generatedAt" timestamptz, "orderOfMagnitude" smallint, significand int)`,
    [reportId, environmentId, JSON.stringify(list)],
  );
}

/** The (pin, quantity, hour) rows of the charts' rollup that report `reportId`'s measurements count in. */
export async function rollupKeysOfReport(db: Queryable, reportId: number): Promise<string> {
  const { rows } = await db.query<{ keys: unknown }>(
    `SELECT coalesce(json_agg(DISTINCT jsonb_build_object('p', pin_id, 'q', quantity_id, 'h', date_bin('1 hour', generated_at, timestamptz '2000-01-01 00:00:00+00'))), '[]') AS keys
       FROM measurement WHERE report_id = $1 AND pin_id IS NOT NULL`,
    [reportId],
  );
  return JSON.stringify(rows[0].keys);
}

/**
 * Recomputes rows of the charts' hourly rollup (migration 014) from the measurements stored now: the
 * insert trigger only adds, so a measurement changed or deleted (a manual report's update or delete)
 * needs its hours counted again. `keys`: JSON arrays from rollupKeysOfReport, before and after the change.
 */
export async function refreshRollup(db: Queryable, ...keys: string[]): Promise<void> {
  const k = `(SELECT DISTINCT x.p AS pin_id, x.q AS quantity_id, x.h AS hour
                FROM json_array_elements($1::json) j CROSS JOIN LATERAL json_array_elements(j) e
                CROSS JOIN LATERAL json_to_record(e) AS x(p bigint, q bigint, h timestamptz))`;
  const all = `[${keys.join(',')}]`;
  await db.query(`DELETE FROM measurement_hourly h USING ${k} k WHERE (h.pin_id, h.quantity_id, h.hour) = (k.pin_id, k.quantity_id, k.hour)`, [all]);
  await db.query(
    `INSERT INTO measurement_hourly (pin_id, quantity_id, hour, count, sum, low_value, low_id, high_value, high_id)
     SELECT pin_id, quantity_id, hour, count(*), sum(v), (min(ARRAY[v, id::float8]))[1], (min(ARRAY[v, id::float8]))[2]::bigint,
            (max(ARRAY[v, id::float8]))[1], (max(ARRAY[v, id::float8]))[2]::bigint
       FROM (SELECT k.pin_id, k.quantity_id, k.hour, m.significand * power(10::float8, m.order_of_magnitude) AS v, m.id
               FROM ${k} k JOIN measurement m ON m.pin_id = k.pin_id AND m.quantity_id = k.quantity_id
                AND m.generated_at >= k.hour AND m.generated_at < k.hour + interval '1 hour') x
      GROUP BY pin_id, quantity_id, hour
      ORDER BY pin_id, quantity_id, hour`,
    [all],
  );
}

/** The hashIds of the measurements of these reports that were entered as not to compare to thresholds (doNotCompareToThresholds). */
export async function uncheckedMeasurements(db: Queryable, reportHashIds: string[]): Promise<Set<string>> {
  if (reportHashIds.length === 0) return new Set();
  const { rows } = await db.query<{ hash_id: string }>(
    'SELECT unnest(unchecked_measurement_hash_ids) AS hash_id FROM manual_report WHERE report_hash_id = ANY($1::text[])',
    [reportHashIds],
  );
  return new Set(rows.map((r) => r.hash_id));
}
