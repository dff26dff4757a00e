import type { Queryable } from '../../app/db.ts';

/** A condition report as the workers push it to the monitoring core. */
export interface ConditionReportIn {
  hashId: string;
  environmentHashId: string;
  deviceHashId: string;
  reportTypeHashId: string;
  generatedAt: string;
  fields: Record<string, unknown>;
  payload: string;
  measurements: {
    hashId: string;
    channelIndex: number;
    channelMeasurementIndex: number;
    quantityHashId: string;
    generatedAt: string;
    orderOfMagnitude: number;
    significand: number;
  }[];
}

/**
 * Stores a batch of reports and their measurements in one statement. Idempotent by report
 * hashId: a batch pushed twice (a retried job, a retried request) is stored once.
 */
export async function ingestReports(db: Queryable, reports: ConditionReportIn[]): Promise<number> {
  if (reports.length === 0) return 0;
  const heads = reports.map((r) => ({
    hash_id: r.hashId, env: r.environmentHashId, device: r.deviceHashId, report_type: r.reportTypeHashId,
    generated_at: r.generatedAt, fields: r.fields, payload: r.payload,
  }));
  const measurements = reports.flatMap((r) => r.measurements.map((m) => ({
    report: r.hashId, hash_id: m.hashId, channel_index: m.channelIndex, channel_measurement_index: m.channelMeasurementIndex,
    quantity: m.quantityHashId, generated_at: m.generatedAt, order_of_magnitude: m.orderOfMagnitude, significand: m.significand,
  })));
  const { rowCount } = await db.query(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb)
         AS x(hash_id text, env text, device text, report_type text, generated_at timestamptz, fields jsonb, payload text)
     ), ins AS (
       INSERT INTO condition_report (hash_id, environment_id, device_id, report_type_id, generated_at, fields, payload)
       SELECT i.hash_id, e.id, d.id, rt.id, i.generated_at, i.fields, i.payload
         FROM input i
         JOIN environment e ON e.hash_id = i.env
         LEFT JOIN device d ON d.hash_id = i.device AND d.environment_id = e.id
         LEFT JOIN report_type rt ON rt.hash_id = i.report_type AND rt.environment_id = e.id
       ON CONFLICT (hash_id) DO NOTHING
       RETURNING id, hash_id, environment_id, device_id
     )
     INSERT INTO measurement (hash_id, report_id, environment_id, device_id, quantity_id, channel_index, channel_measurement_index,
                              generated_at, order_of_magnitude, significand)
     SELECT m.hash_id, ins.id, ins.environment_id, ins.device_id, q.id, m.channel_index, m.channel_measurement_index,
            m.generated_at, m.order_of_magnitude, m.significand
       FROM ins
       JOIN jsonb_to_recordset($2::jsonb) AS m(report text, hash_id text, channel_index int, channel_measurement_index int,
            quantity text, generated_at timestamptz, order_of_magnitude smallint, significand int) ON m.report = ins.hash_id
       JOIN quantity q ON q.hash_id = m.quantity AND q.environment_id = ins.environment_id`,
    [JSON.stringify(heads), JSON.stringify(measurements)],
  );
  return rowCount ?? 0;
}
