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
  }[];
}

const INGEST_REPORTS = namedStatement('ingest-reports', `WITH input AS (
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
       JOIN quantity q ON q.hash_id = m."quantityHashId" AND q.environment_id = ins.environment_id`);

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
