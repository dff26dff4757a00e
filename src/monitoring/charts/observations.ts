import type { Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { QUANTITY_SELECT, toQuantity, type Quantity } from '../quantities/store.ts';
import { pinThresholdsOf } from '../thresholds/store.ts';
import { parseDate, readSeries, type Measurement, type ResolvedSeries } from './series.ts';

/**
 * Observations of a pin, or of every pin on an edge, over [from, to): SDK 17's plotting routes
 * (graph getPinMeasurements, getEdgeMeasurements; 18.3.1 reads the same through chart series).
 * At most MAX_OBSERVATIONS measurements: a range holding more is answered as each (pin, quantity)
 * series' lowest and highest measurement per equal time bucket (readSeries) over the time the series
 * has values in, the series sharing the budget, so a spike stays in the plot.
 */

/** The SDK's bound: "up to 310 measurements". */
export const MAX_OBSERVATIONS = 310;

export interface Observations {
  moreMeasurementsAvailable: boolean;
  /** generatedAt of the first and of the last measurement in the range (null when there is none) */
  lowerbound: string | null;
  upperbound: string | null;
  observations: { measurement: Measurement; quantity: Quantity }[];
}

export type ObservedObject = { pinHashId: string } | { edgeHashId: string };

/** The observations of a pin or an edge of the environment; another environment's is not_found_error. */
export async function observationsOf(db: Queryable, environmentId: number, target: ObservedObject, range: { from: string; to: string }): Promise<Observations> {
  const from = parseDate(range.from, 'from');
  const to = parseDate(range.to, 'to');
  if (to <= from) throw new ParameterError('to must be later than from');
  const pins = await pinsOf(db, environmentId, target);
  const { rows: pairs } = await db.query<{ pin_id: number; pin_hash_id: string; quantity_id: number; n: number; first: Date; last: Date }>(
    `SELECT m.pin_id, m.quantity_id, count(*)::int AS n, min(m.generated_at) AS first, max(m.generated_at) AS last
       FROM measurement m
      WHERE m.pin_id = ANY($1::bigint[]) AND m.generated_at >= $2 AND m.generated_at < $3
      GROUP BY 1, 2 ORDER BY 1, 2`,
    [pins.map((p) => p.id), from, to],
  );
  const total = pairs.reduce((a, p) => a + p.n, 0);
  const hashIdOf = new Map(pins.map((p) => [String(p.id), p.hash_id]));
  const series: ResolvedSeries[] = pairs.map((p) => ({
    pinId: p.pin_id,
    quantityId: p.quantity_id,
    pinHashId: hashIdOf.get(String(p.pin_id))!,
    quantityHashId: '',
  }));
  // each reduced series answers at most two measurements per bucket
  const buckets = total <= MAX_OBSERVATIONS ? MAX_OBSERVATIONS : Math.max(1, Math.floor(MAX_OBSERVATIONS / 2 / Math.max(1, series.length)));
  const thresholds = await pinThresholdsOf(db, environmentId, series);
  // each series is bucketed over the time it has measurements in, not the whole range asked: the budget goes where the values are
  const read = await Promise.all(
    series.map((s, i) => readSeries(db, s, pairs[i].first, new Date(pairs[i].last.getTime() + 1), buckets, thresholds.get(`${s.pinId}:${s.quantityId}`))),
  );
  const quantities = await quantitiesOf(db, [...new Set(series.map((s) => s.quantityId))]);
  const observations = read
    .flatMap((r, i) => r.measurements.map((measurement) => ({ measurement, quantity: quantities.get(String(series[i].quantityId))! })))
    .sort((a, b) => a.measurement.generatedAt.localeCompare(b.measurement.generatedAt) || a.measurement.hashId.localeCompare(b.measurement.hashId))
    .slice(0, MAX_OBSERVATIONS);
  const times = pairs.flatMap((p) => [p.first.getTime(), p.last.getTime()]);
  return {
    moreMeasurementsAvailable: total > observations.length,
    lowerbound: times.length ? new Date(Math.min(...times)).toISOString() : null,
    upperbound: times.length ? new Date(Math.max(...times)).toISOString() : null,
    observations,
  };
}

async function pinsOf(db: Queryable, environmentId: number, target: ObservedObject): Promise<{ id: number; hash_id: string }[]> {
  if ('pinHashId' in target) {
    const { rows } = await db.query<{ id: number; hash_id: string }>('SELECT id, hash_id FROM pin WHERE environment_id = $1 AND hash_id = $2', [
      environmentId,
      target.pinHashId,
    ]);
    if (rows.length === 0) throw new NotFoundError('pin', target.pinHashId);
    return rows;
  }
  const { rows: edges } = await db.query<{ id: number }>('SELECT id FROM edge WHERE environment_id = $1 AND hash_id = $2', [environmentId, target.edgeHashId]);
  if (edges.length === 0) throw new NotFoundError('edge', target.edgeHashId);
  const { rows } = await db.query<{ id: number; hash_id: string }>('SELECT id, hash_id FROM pin WHERE environment_id = $1 AND edge_id = $2', [
    environmentId,
    edges[0].id,
  ]);
  return rows;
}

async function quantitiesOf(db: Queryable, ids: number[]): Promise<Map<string, Quantity>> {
  const { rows } = await db.query(`SELECT q.id, ${QUANTITY_SELECT} FROM quantity q WHERE q.id = ANY($1::bigint[])`, [ids]);
  return new Map(rows.map((r) => [String(r.id), toQuantity(r)]));
}
