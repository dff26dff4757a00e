import type { Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';

export type PerformanceInterval = 'day' | 'isoweek' | 'month' | 'year' | 'years';

// the period around asOf and the buckets it is cut into
const PERIODS: Record<PerformanceInterval, { period: string; span: string; bucket: string }> = {
  day: { period: 'day', span: '1 day', bucket: '1 hour' },
  isoweek: { period: 'week', span: '1 week', bucket: '1 day' },
  month: { period: 'month', span: '1 month', bucket: '1 day' },
  year: { period: 'year', span: '1 year', bucket: '1 month' },
  years: { period: 'year', span: '1 year', bucket: '1 year' },
};

/**
 * pin-group performance: per bucket of the period around `asOf` (UTC), the reports registered on
 * the pin group and the measurements on its pins. Thresholds and measurement cycles arrive with
 * later issues: until then every measurement counts as good and a bucket expects what it received.
 */
export async function pinGroupPerformance(db: Queryable, environmentId: number, hashId: string, asOf: string, interval: PerformanceInterval) {
  const { rows: groups } = await db.query<{ id: number }>('SELECT id FROM pin_group WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (groups.length === 0) throw new NotFoundError('pin group', hashId);
  const p = PERIODS[interval];
  // `years`: the ten years up to and including asOf's
  const first =
    interval === 'years'
      ? `date_trunc('year', $2::timestamptz AT TIME ZONE 'UTC') - interval '9 years'`
      : `date_trunc('${p.period}', $2::timestamptz AT TIME ZONE 'UTC')`;
  const last = interval === 'years' ? `date_trunc('year', $2::timestamptz AT TIME ZONE 'UTC') + interval '1 year'` : `${first} + interval '${p.span}'`;
  const { rows } = await db.query(
    `WITH buckets AS (
       SELECT (s AT TIME ZONE 'UTC') AS start_at, ((s + interval '${p.bucket}') AT TIME ZONE 'UTC') AS end_at
         FROM generate_series(${first}, ${last} - interval '${p.bucket}', interval '${p.bucket}') AS s
     )
     SELECT b.start_at, b.end_at,
            (SELECT count(*)::int FROM condition_report r WHERE r.pin_group_id = $1 AND r.generated_at >= b.start_at AND r.generated_at < b.end_at) AS received,
            (SELECT count(*)::int FROM condition_report r JOIN measurement m ON m.report_id = r.id
              WHERE r.pin_group_id = $1 AND r.generated_at >= b.start_at AND r.generated_at < b.end_at AND m.pin_id IS NOT NULL) AS measurements
       FROM buckets b ORDER BY b.start_at`,
    [groups[0].id, asOf],
  );
  return rows.map((r) => ({
    startAt: (r.start_at as Date).toISOString(),
    endAt: (r.end_at as Date).toISOString(),
    reports: { expected: r.received as number, received: r.received as number },
    measurements: { good: r.measurements as number, serious: 0, critical: 0 },
  }));
}
