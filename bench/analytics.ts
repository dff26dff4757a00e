// A broad analytics query over the measurement table of bench/measurements.ts (`total` measurements of
// 1,000 pins): the mean per day per pin over a year, its first page of 100 rows, run the way GET /analytics/
// runs it (src/monitoring/analytics/store.ts: one read-only transaction, statement_timeout). It is either
// answered within the timeout or refused with 400 analytics_query_too_broad; the row says which, and how long.
import { performance } from 'node:perf_hooks';
import { AnalyticsQueryTooBroadError, analyticsResults } from '../src/monitoring/analytics/store.ts';
import type { AnalyticsQuery } from '../src/monitoring/analytics/query.ts';
import type { BenchRow } from './dtls.ts';
import { pct } from './harness.ts';
import type { Db } from '../src/app/db.ts';
import type { MeasurementTable } from './measurements.ts';

const MEAN_PER_DAY_PER_PIN: AnalyticsQuery = {
  source: 'measurement',
  columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'day' }, { field: 'pin.hashId' }, { type: 'mean', field: 'measurement.value' }],
  filter: {
    type: 'and',
    restrictions: [
      { left: 'measurement.generatedAt', comparison: '>=', right: { value: '2025-01-01T00:00:00Z' } },
      { left: 'measurement.generatedAt', comparison: '<', right: { value: '2026-01-01T00:00:00Z' } },
    ],
  },
  sort: [{ columnIndex: 0, descending: false }],
  rowsPerPage: 100,
};

/** In a table filled by fillMeasurementTable (its fill analyzes the pins: without statistics the planner takes 1,000 pins for 2 and loops). */
export async function analyticsRow(db: Db, table: MeasurementTable, opts: { rounds: number; timeoutMs: number }): Promise<BenchRow> {
  const n = table.measurements;
  {
    const times: number[] = [];
    let answered = 0;
    let refused = 0;
    let rows = 0;
    for (let round = 0; round < opts.rounds; round++) {
      const t0 = performance.now();
      try {
        rows = (await analyticsResults(db, 1, MEAN_PER_DAY_PER_PIN, opts.timeoutMs)).rows.length;
        answered++;
      } catch (err) {
        if (!(err instanceof AnalyticsQueryTooBroadError)) throw err;
        refused++;
      }
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return {
      name: `analytics: mean per day per pin over a year (first page), table of ${n.toLocaleString('en')} measurements of 1,000 pins, statement_timeout ${opts.timeoutMs} ms`,
      value: Number(pct(times, 50).toFixed(1)),
      unit: 'ms per query (p50)',
      p50Ms: Number(pct(times, 50).toFixed(1)),
      p99Ms: Number(pct(times, 99).toFixed(1)),
      target: `answered, or refused with analytics_query_too_broad, within ${opts.timeoutMs} ms + overhead`,
      detail: `${answered} answered (${rows} rows on the page), ${refused} refused of ${opts.rounds}`,
    };
  }
}
