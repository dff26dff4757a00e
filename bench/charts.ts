// Chart rows, on the table bench/measurements.ts fills (fillMeasurementTable): (a) chart series of one
// pin and one quantity over a year of 5-minute values (105,120 points, reduced to <= 1,000 buckets), the
// way GET /chart/ runs it plus the JSON encoding of the answer; (b) chart panels get of 100 pin groups,
// each linked to a device whose type has a chart, with measured quantities and one saved manual chart.
import { performance } from 'node:perf_hooks';
import type { Db } from '../src/app/db.ts';
import { getPanels, updatePanels } from '../src/monitoring/charts/panels.ts';
import { chartSeries } from '../src/monitoring/charts/series.ts';
import type { BenchRow } from './dtls.ts';
import { pct } from './harness.ts';
import { FIVE_MINUTES_A_YEAR, type MeasurementTable } from './measurements.ts';

const PANELS = 100;

function row(name: string, latencies: number[], target: string, detail: string): BenchRow {
  latencies.sort((a, b) => a - b);
  return {
    name,
    value: Number(pct(latencies, 50).toFixed(2)),
    unit: 'ms per call (p50)',
    p50Ms: Number(pct(latencies, 50).toFixed(2)),
    p99Ms: Number(pct(latencies, 99).toFixed(2)),
    target,
    detail,
  };
}

/** (a): pin p1_0, quantity q0, all of 2025. */
export async function chartSeriesRow(db: Db, table: MeasurementTable, opts: { rounds: number }): Promise<BenchRow> {
  const query = { startAt: '2025-01-01T00:00:00Z', endAt: '2026-01-01T00:00:00Z', series: [{ pinHashId: 'p1_0', quantityHashId: 'q0' }] };
  const latencies: number[] = [];
  let answer = await chartSeries(db, 1, query);
  for (let round = 0; round < opts.rounds; round++) {
    const t0 = performance.now();
    answer = await chartSeries(db, 1, query);
    JSON.stringify(answer);
    latencies.push(performance.now() - t0);
  }
  const s = answer.series[0];
  if (s.reduction?.pointCount !== FIVE_MINUTES_A_YEAR) throw new Error(`chart series read ${s.reduction?.pointCount} points, expected ${FIVE_MINUTES_A_YEAR}`);
  return row(
    `chart series: 1 pin, 1 quantity, a year of 5-minute values (${FIVE_MINUTES_A_YEAR.toLocaleString('en')}) reduced to ${s.reduction.bucketCount} min/max buckets, table of ${table.measurements.toLocaleString('en')} measurements`,
    latencies,
    'p99 <= 50 ms',
    `${opts.rounds} calls; ${s.measurements.length} points answered; includes JSON encoding`,
  );
}

/** (b): pin groups pg0..pg99, each linked to a device of a type with one chart over both channels. */
export async function chartPanelsRow(db: Db, table: MeasurementTable, opts: { rounds: number }): Promise<BenchRow> {
  // a supplier (environment 2) whose device type charts its two quantities; device i linked to pin group pg<i>, channel c to pin p<i>_<c>
  await db.query(`INSERT INTO environment (hash_id, type, name) VALUES ('benchsupplier', 'connectivity', 'supplier')`);
  await db.query(`INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude)
    SELECT 'sq' || i, 2, '"sq"', 'sq', '#000000', 'V', 0 FROM generate_series(0, 1) i`);
  await db.query(`INSERT INTO device_type (hash_id, environment_id, name, name_text, event_handler, event_handler_hash, subscription_hash_id, channels, charts)
    VALUES ('benchtype', 2, '"t"', 't', '', '', 'benchsub', '[{"name": "a", "pinFieldConfigurations": []}, {"name": "b", "pinFieldConfigurations": []}]',
            '[{"title": "both", "series": [{"channelIndex": 0, "quantityHashId": "sq0"}, {"channelIndex": 1, "quantityHashId": "sq1"}]}]')`);
  await db.query(`INSERT INTO device (hash_id, environment_id, device_type_id, supplier_device_identifier, claimed_environment_id)
    SELECT 'bd' || i, 2, (SELECT id FROM device_type WHERE hash_id = 'benchtype'), 'bd' || i, 1 FROM generate_series(0, ${PANELS - 1}) i`);
  await db.query(`INSERT INTO device_link (hash_id, environment_id, device_id, pin_group_id)
    SELECT 'bl' || i, 1, (SELECT id FROM device WHERE hash_id = 'bd' || i), (SELECT id FROM pin_group WHERE hash_id = 'pg' || i) FROM generate_series(0, ${PANELS - 1}) i`);
  await db.query(`INSERT INTO device_link_channel (link_id, channel, pin_id)
    SELECT l.id, c, (SELECT id FROM pin WHERE hash_id = 'p' || substr(l.hash_id, 3) || '_' || c) FROM device_link l, generate_series(0, 1) c WHERE l.hash_id LIKE 'bl%'`);
  const hashIds = Array.from({ length: PANELS }, (_, i) => `pg${i}`);
  await updatePanels(db, 1, {
    pinGroups: hashIds.map((hashId, i) => ({
      hashId,
      panel: {
        manualCharts: [
          {
            title: 'saved',
            series: [
              { pinHashId: `p${i}_0`, quantityHashId: 'q0' },
              { pinHashId: `p${i}_1`, quantityHashId: 'q1' },
            ],
          },
        ],
      },
    })),
  });
  await db.query('ANALYZE');
  const latencies: number[] = [];
  let answer = await getPanels(db, 1, { pinGroupHashIds: hashIds });
  for (let round = 0; round < opts.rounds; round++) {
    const t0 = performance.now();
    answer = await getPanels(db, 1, { pinGroupHashIds: hashIds });
    JSON.stringify(answer);
    latencies.push(performance.now() - t0);
  }
  const charts = (answer.pinGroups ?? []).reduce((a, p) => a + p.panel.charts.automatic.length + p.panel.charts.manual.length, 0);
  const series = (answer.pinGroups ?? []).reduce(
    (a, p) => a + [...p.panel.charts.automatic, ...p.panel.charts.manual].reduce((b, c) => b + c.series.length, 0),
    0,
  );
  if (charts !== PANELS * 4) throw new Error(`chart panels answered ${charts} charts, expected ${PANELS * 4}`);
  return row(
    `chart panels get: ${PANELS} pin groups (linked device type with a chart, measured quantities, a saved manual chart), table of ${table.measurements.toLocaleString('en')} measurements`,
    latencies,
    'p99 <= 100 ms',
    `${opts.rounds} calls; ${charts} charts, ${series} series answered; includes JSON encoding`,
  );
}
