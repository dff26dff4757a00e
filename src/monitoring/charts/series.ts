import type { Queryable } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';
import { performanceOf, type Limits } from '../thresholds/limits.ts';
import { pinThresholdsOf } from '../thresholds/store.ts';

/**
 * Chart series: one pin's measurements of one quantity in [startAt, endAt). A range with few points
 * is answered raw; a longer one is reduced on the server to at most `maxBuckets` equal time buckets,
 * each answered by its lowest and its highest measurement (real measurements, so a spike stays
 * visible and clickable) plus the bucket's count and mean in `reduction`. Buckets of an hour or
 * more are read from the hourly rollup (migration 014), so a year costs 8,760 rows, not every value.
 */

/** Buckets of a reduced series: 500 buckets = at most 1,000 points, enough for a chart a screen wide (each point costs a random read at answer time; measured in bench/README.md). A series with at most twice as many points as buckets is raw. */
export const MAX_BUCKETS = 500;
/** highResolution: a chart drawn larger. */
export const MAX_BUCKETS_HIGH_RESOLUTION = 5_000;

export interface SeriesRef {
  pinHashId: string;
  quantityHashId: string;
}
export interface ResolvedSeries extends SeriesRef {
  pinId: number;
  quantityId: number;
}

export interface Measurement {
  hashId: string;
  generatedAt: string;
  channelIndex: number;
  channelMeasurementIndex: number;
  reportHashId: string;
  pinHashId: string;
  orderOfMagnitude: number;
  significand: number;
  performance: number;
}

export interface Reduction {
  kind: 'minMax';
  /** measurements of the series in the range */
  pointCount: number;
  bucketCount: number;
  bucketSeconds: number;
  /** the buckets holding measurements: start, number of measurements, mean value (significand * 10^orderOfMagnitude) */
  buckets: { startAt: string; count: number; mean: number }[];
}

export interface Series extends SeriesRef {
  measurements: Measurement[];
  reduction: Reduction | null;
}

/**
 * Resolves (pin, quantity) pairs named by hashId. The pin must be a pin of the environment; the
 * quantity one the environment can see: its own, one measured on that pin, or one of the supplier
 * of a device linked to the pin's pin group. Anything else is a parameter_error naming `field[i]`:
 * another environment's pin or quantity answers exactly like one that does not exist.
 */
export async function resolveSeries(db: Queryable, environmentId: number, refs: SeriesRef[], field: (i: number) => string): Promise<ResolvedSeries[]> {
  if (refs.length === 0) return [];
  const { rows } = await db.query<{ i: number; pin_id: number | null; quantity_id: number | null }>(
    `SELECT x.i::int AS i, p.id AS pin_id, q.id AS quantity_id
       FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS x(pin_hash_id, quantity_hash_id, i)
       LEFT JOIN pin p ON p.environment_id = $1 AND p.hash_id = x.pin_hash_id
       LEFT JOIN quantity q ON q.hash_id = x.quantity_hash_id AND q.deleted_at IS NULL AND (
              q.environment_id = $1
           OR EXISTS (SELECT 1 FROM measurement m WHERE m.pin_id = p.id AND m.quantity_id = q.id)
           OR EXISTS (SELECT 1 FROM device_link l JOIN device d ON d.id = l.device_id
                       WHERE l.pin_group_id = p.pin_group_id AND d.environment_id = q.environment_id))
      ORDER BY x.i`,
    [environmentId, refs.map((r) => r.pinHashId), refs.map((r) => r.quantityHashId)],
  );
  return rows.map((r, i) => {
    if (r.pin_id === null) throw new ParameterError(`${field(i)}.pinHashId ${refs[i].pinHashId} is not a pin of this environment`);
    if (r.quantity_id === null)
      throw new ParameterError(`${field(i)}.quantityHashId ${refs[i].quantityHashId} is not a quantity of this environment or of pin ${refs[i].pinHashId}`);
    return { ...refs[i], pinId: r.pin_id, quantityId: r.quantity_id };
  });
}

// the report's hashId as a subquery: one primary key lookup per row answered (a join is planned as a hash join over every report).
// Reports are partitioned by week (migration 032): the lookup first tries the weeks around the measurement's time, where its
// report almost always is, and only then every week (a lookup in all of 58 partitions cost 0.8 ms per point)
const MEASUREMENT_COLUMNS = `m.hash_id, m.generated_at, m.channel_index, m.channel_measurement_index,
  COALESCE((SELECT r.hash_id FROM condition_report r WHERE r.id = m.report_id
              AND r.generated_at >= m.generated_at - interval '7 days' AND r.generated_at < m.generated_at + interval '7 days'),
           (SELECT r.hash_id FROM condition_report r WHERE r.id = m.report_id)) AS report_hash_id, m.order_of_magnitude, m.significand`;

/** `limits`: the series' thresholds (the pin's own, else the quantity's defaults; performance -1 without). */
function toMeasurement(r: Record<string, unknown>, pinHashId: string, limits: Limits | null | undefined): Measurement {
  return {
    hashId: r.hash_id as string,
    generatedAt: (r.generated_at as Date).toISOString(),
    channelIndex: r.channel_index as number,
    channelMeasurementIndex: r.channel_measurement_index as number,
    reportHashId: r.report_hash_id as string,
    pinHashId,
    orderOfMagnitude: r.order_of_magnitude as number,
    significand: r.significand as number,
    performance: performanceOf(limits, { orderOfMagnitude: r.order_of_magnitude as number, significand: r.significand as number }),
  };
}

const HOUR_MS = 3_600_000;

/** low and high: [value, measurement id, epoch seconds of the hour the measurement is in] */
type Bucket = { start_at: Date; count: number; mean: number; low: number[]; high: number[] };

/**
 * Buckets of `bucketSeconds` from `origin` over [startAt, endAt): whole hours from the hourly rollup
 * (measurement_hourly, migration 014), the partial hours at either end from the measurements.
 * Per bucket: count, mean, and the (value, id, hour) of its lowest and highest measurement.
 */
async function hourlyBuckets(db: Queryable, s: ResolvedSeries, startAt: Date, endAt: Date, origin: Date, bucketSeconds: number): Promise<Bucket[]> {
  const firstHour = new Date(Math.ceil(startAt.getTime() / HOUR_MS) * HOUR_MS);
  const lastHour = new Date(Math.floor(endAt.getTime() / HOUR_MS) * HOUR_MS);
  const raw = (from: string, to: string) => `SELECT m.generated_at, 1, v, v, m.id, v, m.id, date_trunc('hour', m.generated_at)
      FROM measurement m CROSS JOIN LATERAL (SELECT m.significand * power(10::float8, m.order_of_magnitude) AS v) value
     WHERE m.pin_id = $1 AND m.quantity_id = $2 AND m.generated_at >= ${from} AND m.generated_at < ${to}`;
  const { rows } = await db.query<Bucket>(
    `WITH parts (t, count, sum, low_value, low_id, high_value, high_id, at) AS (
       SELECT h.hour, h.count, h.sum, h.low_value, h.low_id, h.high_value, h.high_id, h.hour FROM measurement_hourly h
        WHERE h.pin_id = $1 AND h.quantity_id = $2 AND h.hour >= $5 AND h.hour < $6
       UNION ALL ${raw('$3', '$5')}
       UNION ALL ${raw('$6', '$4')})
     SELECT date_bin(make_interval(secs => $7), t, $8) AS start_at, sum(count)::int AS count, sum(sum) / sum(count) AS mean,
            min(ARRAY[low_value, low_id::float8, extract(epoch FROM at)::float8]) AS low,
            max(ARRAY[high_value, high_id::float8, extract(epoch FROM at)::float8]) AS high
       FROM parts GROUP BY 1 ORDER BY 1`,
    [s.pinId, s.quantityId, startAt, endAt, firstHour, lastHour, bucketSeconds, origin],
  );
  return rows;
}

/** Buckets of `bucketSeconds` from startAt, straight from the measurements (ranges whose buckets are shorter than an hour). */
async function rawBuckets(db: Queryable, s: ResolvedSeries, startAt: Date, endAt: Date, bucketSeconds: number): Promise<Bucket[]> {
  const { rows } = await db.query<Bucket>(
    `SELECT date_bin(make_interval(secs => $5), m.generated_at, $3) AS start_at, count(*)::int AS count, avg(v) AS mean,
            min(ARRAY[v, m.id::float8, extract(epoch FROM date_trunc('hour', m.generated_at))::float8]) AS low,
            max(ARRAY[v, m.id::float8, extract(epoch FROM date_trunc('hour', m.generated_at))::float8]) AS high
       FROM measurement m CROSS JOIN LATERAL (SELECT m.significand * power(10::float8, m.order_of_magnitude) AS v) value
      WHERE m.pin_id = $1 AND m.quantity_id = $2 AND m.generated_at >= $3 AND m.generated_at < $4
      GROUP BY 1 ORDER BY 1`,
    [s.pinId, s.quantityId, startAt, endAt, bucketSeconds],
  );
  return rows;
}

/**
 * The bucket grid of a reduced range: at most `maxBuckets` buckets of a whole number of seconds from
 * startAt; once a bucket is an hour or longer, of whole hours from the UTC hour at or before startAt
 * (so they are made of the hourly rollup's hours).
 */
export function bucketGrid(startAt: Date, endAt: Date, maxBuckets: number): { origin: Date; bucketSeconds: number; bucketCount: number; hourly: boolean } {
  const rangeMs = endAt.getTime() - startAt.getTime();
  const seconds = Math.max(1, Math.ceil(rangeMs / 1000 / maxBuckets));
  if (seconds < 3600) return { origin: startAt, bucketSeconds: seconds, bucketCount: Math.ceil(rangeMs / 1000 / seconds), hourly: false };
  const origin = new Date(Math.floor(startAt.getTime() / HOUR_MS) * HOUR_MS);
  const spanMs = endAt.getTime() - origin.getTime();
  let hours = Math.ceil(seconds / 3600);
  while (Math.ceil(spanMs / (hours * HOUR_MS)) > maxBuckets) hours++;
  return { origin, bucketSeconds: hours * 3600, bucketCount: Math.ceil(spanMs / (hours * HOUR_MS)), hourly: true };
}

// The chosen points by id, each looked for in the hour its bucket names: one primary key probe (id, generated_at) in
// one partition a point. `m.id = ANY(ids)` alone names no partition: it probes every week's index, or, where the weeks
// have no statistics yet (before autovacuum's first ANALYZE of a filled week), the planner's default selectivity for a
// list of 500 ids turns it into sequential scans of every partition: 1.2 s for a year's chart on a 10 M-row table,
// 46 ms this way (bench/README.md, the map group's chart rows).
const POINTS_BY_ID = `SELECT ${MEASUREMENT_COLUMNS}
    FROM unnest($1::bigint[], $2::float8[]) AS k(id, at)
    CROSS JOIN LATERAL (SELECT * FROM measurement m WHERE m.id = k.id AND m.generated_at >= to_timestamp(k.at)
                          AND m.generated_at < to_timestamp(k.at) + interval '1 hour') m
   ORDER BY m.generated_at, m.id`;

/** The low and high points of the buckets, each once: [ids, times]. */
function pointKeys(buckets: Bucket[]): [number[], number[]] {
  const at = new Map<number, number>();
  for (const b of buckets) for (const p of [b.low, b.high]) at.set(p[1], p[2]);
  return [[...at.keys()], [...at.values()]];
}

/** Reads one resolved series over [startAt, endAt), raw or reduced (see the top of this file). */
export async function readSeries(db: Queryable, s: ResolvedSeries, startAt: Date, endAt: Date, maxBuckets: number, limits?: Limits | null): Promise<Series> {
  const range = [s.pinId, s.quantityId, startAt, endAt];
  const where = 'm.pin_id = $1 AND m.quantity_id = $2 AND m.generated_at >= $3 AND m.generated_at < $4';
  // counts no further than the raw limit: at most 2 * maxBuckets + 1 index entries
  const {
    rows: [{ n }],
  } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM (SELECT 1 FROM measurement m WHERE ${where} LIMIT $5) x`, [...range, 2 * maxBuckets + 1]);
  if (n <= 2 * maxBuckets) {
    const { rows } = await db.query(`SELECT ${MEASUREMENT_COLUMNS} FROM measurement m WHERE ${where} ORDER BY m.generated_at, m.id`, range);
    return { pinHashId: s.pinHashId, quantityHashId: s.quantityHashId, measurements: rows.map((r) => toMeasurement(r, s.pinHashId, limits)), reduction: null };
  }
  const grid = bucketGrid(startAt, endAt, maxBuckets);
  const buckets = grid.hourly
    ? await hourlyBuckets(db, s, startAt, endAt, grid.origin, grid.bucketSeconds)
    : await rawBuckets(db, s, startAt, endAt, grid.bucketSeconds);
  const { rows } = await db.query(POINTS_BY_ID, pointKeys(buckets));
  return {
    pinHashId: s.pinHashId,
    quantityHashId: s.quantityHashId,
    measurements: rows.map((r) => toMeasurement(r, s.pinHashId, limits)),
    reduction: {
      kind: 'minMax',
      pointCount: buckets.reduce((a, b) => a + b.count, 0),
      bucketCount: grid.bucketCount,
      bucketSeconds: grid.bucketSeconds,
      buckets: buckets.map((b) => ({ startAt: b.start_at.toISOString(), count: b.count, mean: b.mean })),
    },
  };
}

export interface SeriesQuery {
  startAt: string;
  endAt: string;
  series?: SeriesRef[];
  highResolution?: boolean;
}

/** A date as the SDK sends it (ISO 8601), or milliseconds since 1970; anything else is a parameter_error naming `field`. */
export function parseDate(value: string, field: string): Date {
  const date = /^-?\d+$/.test(value) ? new Date(Number(value)) : new Date(value);
  if (Number.isNaN(date.getTime())) throw new ParameterError(`${field} is not a date: ${value.slice(0, 40)}`);
  if (date.getUTCFullYear() < 1 || date.getUTCFullYear() > 9999) throw new ParameterError(`${field} must lie in the years 1 to 9999`);
  return date;
}

/** chart series: each named series over [startAt, endAt), in the order asked. */
export async function chartSeries(db: Queryable, environmentId: number, q: SeriesQuery): Promise<{ series: Series[] }> {
  const startAt = parseDate(q.startAt, 'startAt');
  const endAt = parseDate(q.endAt, 'endAt');
  if (endAt <= startAt) throw new ParameterError('endAt must be later than startAt');
  const resolved = await resolveSeries(db, environmentId, q.series ?? [], (i) => `series[${i}]`);
  const maxBuckets = q.highResolution ? MAX_BUCKETS_HIGH_RESOLUTION : MAX_BUCKETS;
  const thresholds = await pinThresholdsOf(db, environmentId, resolved);
  return { series: await Promise.all(resolved.map((s) => readSeries(db, s, startAt, endAt, maxBuckets, thresholds.get(`${s.pinId}:${s.quantityId}`)))) };
}
