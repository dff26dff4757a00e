// The read side of the measurement table: one table of `total` measurements of 1,000 pins
// (fillMeasurementTable, filled with generate_series in a private database) serves measurement find
// of one pin and one quantity over a year of hourly values (8,760; pages of 500 sorted by generatedAt,
// the way the API runs them: src/monitoring/measurements/store.ts) and the chart rows (bench/charts.ts).
// Beside it, the ingest statement for linked vs unlinked devices.
import { performance } from 'node:perf_hooks';
import { openDb, recreateDatabase, type Db, type Queryable } from '../src/app/db.ts';
import { findMeasurements } from '../src/monitoring/measurements/store.ts';
import type { BenchRow } from './dtls.ts';
import { benchDbName, pct } from './harness.ts';

const HOURS = 8760;
/** one year of 5-minute values: the chart row's series */
export const FIVE_MINUTES_A_YEAR = 105_120;
const PIN_GROUPS = 500;

export interface MeasurementTable {
  measurements: number;
  fillSeconds: number;
}

/**
 * Fills a bench database with about `total` measurements of 1,000 pins (500 pin groups `pg<g>` of two
 * pins `p<g>_<c>`, pin c measuring quantity `q<c>`, one report per pin group and time step, one
 * measurement per pin): pin group pg0 reports hourly for 2025 (measurement find's series), pg1 every
 * 5 minutes for 2025 (the chart's series, FIVE_MINUTES_A_YEAR reports), the other 498 hourly from
 * 2025-01-01 for as long as the total needs. Environment id 1, quantities q0/q1 are ids 1/2.
 */
export async function fillMeasurementTable(db: Queryable, total: number): Promise<MeasurementTable> {
  const otherHours = Math.max(1, Math.floor((total / 2 - HOURS - FIVE_MINUTES_A_YEAR) / (PIN_GROUPS - 2)));
  const fillStart = performance.now();
  await db.query(`INSERT INTO environment (hash_id, type, name) VALUES ('benchenv', 'monitoring', 'bench')`);
  await db.query(`INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude)
    SELECT 'q' || i, 1, '"q"', 'q', '#000000', 'V', 0 FROM generate_series(0, 1) i`);
  await db.query(`INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, map_layer)
    SELECT 'pg' || g, 1, 'group ' || g, 's', 'default' FROM generate_series(0, ${PIN_GROUPS - 1}) g`);
  // pin p<g>_<c> gets id 2g + c + 1 (the measurements below rely on it)
  await db.query(`INSERT INTO pin (hash_id, environment_id, pin_group_id, name)
    SELECT 'p' || g || '_' || c, 1, g + 1, 'pin ' || g || '/' || c FROM generate_series(0, ${PIN_GROUPS - 1}) g, generate_series(0, 1) c ORDER BY g, c`);
  // rows in time order, as devices write them
  await db.query(`INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id)
    SELECT 'r' || g || '_' || s, 1, timestamptz '2025-01-01' + CASE WHEN g = 1 THEN make_interval(mins => 5 * s) ELSE make_interval(hours => s) END, g + 1
      FROM generate_series(0, ${PIN_GROUPS - 1}) g, generate_series(0, ${Math.max(HOURS, FIVE_MINUTES_A_YEAR, otherHours) - 1}) s
     WHERE s < CASE g WHEN 0 THEN ${HOURS} WHEN 1 THEN ${FIVE_MINUTES_A_YEAR} ELSE ${otherHours} END
     ORDER BY 3`);
  await db.query(`INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
    SELECT 'm' || r.id || '_' || c, r.id, 1, c + 1, (r.pin_group_id - 1) * 2 + c + 1, c, 0, r.generated_at, -3, (random() * 1000)::int
      FROM condition_report r, generate_series(0, 1) c ORDER BY r.id`);
  await db.query('VACUUM ANALYZE condition_report');
  await db.query('VACUUM ANALYZE measurement');
  // as autovacuum would have by now: the graph tables' statistics
  await db.query('ANALYZE pin_group, pin, quantity');
  const {
    rows: [{ n }],
  } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM measurement');
  return { measurements: n, fillSeconds: (performance.now() - fillStart) / 1000 };
}

/** A private bench database, recreated empty (migrated). */
const benchAdminUrl = () => process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export async function benchDatabase(name: string): Promise<Db> {
  return openDb({ databaseUrl: await recreateDatabase(benchAdminUrl(), benchDbName(name)), dataDir: '/tmp' });
}

/** The URL of the bench database `name` (made by benchDatabase), for a child process. */
export function benchDatabaseUrl(name: string): string {
  const url = new URL(benchAdminUrl());
  url.pathname = `/${benchDbName(name)}`;
  return url.toString();
}

/** measurement find over pg0's year of hourly values, in a table filled by fillMeasurementTable. */
export async function measurementFindRow(db: Queryable, table: MeasurementTable, opts: { rounds: number }): Promise<BenchRow> {
  const latencies: number[] = [];
  let values = 0;
  // round -1 warms up (JIT, prepared statements, the pages of the index): like the chart rows, it is not timed
  for (let round = -1; round < opts.rounds; round++) {
    let offset: string | undefined;
    values = 0;
    do {
      const t0 = performance.now();
      const page = await findMeasurements(db, 1, {
        pinGroupHashIds: ['pg0'],
        pinHashIds: ['p0_0'],
        quantityHashIds: ['q0'],
        since: '2025-01-01T00:00:00Z',
        before: '2026-01-01T00:00:00Z',
        sortBy: 'generatedAt',
        descending: false,
        rowsPerPage: 500,
        offset,
      });
      if (round >= 0) latencies.push(performance.now() - t0);
      values += page.rows.length;
      offset = page.nextPageOffset ?? undefined;
    } while (offset);
  }
  latencies.sort((a, b) => a - b);
  return {
    name: `measurement find: 1 pin, 1 quantity, ${values} hourly values in pages of 500, table of ${table.measurements.toLocaleString('en')} measurements of 1,000 pins`,
    value: Number(pct(latencies, 50).toFixed(2)),
    unit: 'ms per page (p50)',
    p50Ms: Number(pct(latencies, 50).toFixed(2)),
    p99Ms: Number(pct(latencies, 99).toFixed(2)),
    target: 'p99 <= 50 ms',
    detail: `${latencies.length} pages over ${opts.rounds} walks after one warm-up walk; fill ${table.fillSeconds.toFixed(0)} s`,
  };
}

/**
 * What the ingest statement needs, in an empty bench database: a supplier (environment 1) with quantity `q`
 * (id 1), device type `t` and report type `rt`, and `devices` devices `d<i>`, the first `claimed` of them
 * claimed by the customer (environment 2).
 */
export async function ingestWorld(db: Queryable, devices: number, claimed: number): Promise<void> {
  await db.query(`INSERT INTO environment (hash_id, type, name) VALUES ('supplier', 'connectivity', 's'), ('customer', 'monitoring', 'c')`);
  await db.query(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude) VALUES ('q', 1, '"q"', 'q', '#000000', 'V', 0)`,
  );
  await db.query(
    `INSERT INTO device_type (hash_id, environment_id, name, name_text, event_handler, event_handler_hash, subscription_hash_id) VALUES ('t', 1, '"t"', 't', '', '', 's')`,
  );
  await db.query(
    `INSERT INTO report_type (hash_id, environment_id, name, name_text, field_configurations, parser, parser_hash) VALUES ('rt', 1, '"r"', 'r', '{}', '', '')`,
  );
  await db.query(
    `INSERT INTO device (hash_id, environment_id, device_type_id, supplier_device_identifier, claimed_environment_id)
    SELECT 'd' || i, 1, 1, 'd' || i, CASE WHEN i < $2 THEN 2 END FROM generate_series(0, $1 - 1) i`,
    [devices, claimed],
  );
}

/**
 * The report path's store step for linked and unlinked devices side by side: batches of 50 reports
 * (two measurements each) through the one ingest statement, rotating a batch of linked devices, a
 * batch of unlinked ones and a linked batch with the charts' rollup trigger off, in the same database
 * and run. Reports the statement's time per batch.
 */
export async function ingestLinkedRow(opts: { batches: number }): Promise<BenchRow[]> {
  const db = await benchDatabase('gridgate_bench_ingest');
  const { ingestReportsJson } = await import('../src/monitoring/reports/store.ts');
  try {
    await ingestWorld(db, 100, 50);
    await db.query(
      `INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, map_layer) SELECT 'pg' || i, 2, 'g', 's', 'default' FROM generate_series(0, 49) i`,
    );
    await db.query(
      `INSERT INTO pin (hash_id, environment_id, pin_group_id, name) SELECT 'p' || i || '_' || c, 2, i + 1, 'p' FROM generate_series(0, 49) i, generate_series(0, 1) c`,
    );
    await db.query(`INSERT INTO device_link (hash_id, environment_id, device_id, pin_group_id) SELECT 'l' || i, 2, i + 1, i + 1 FROM generate_series(0, 49) i`);
    const { rows: pins } = await db.query<{ id: number; pin_group_id: number }>('SELECT id, pin_group_id FROM pin ORDER BY id');
    let n = 0;
    const batch = (linked: boolean) =>
      JSON.stringify({
        reports: Array.from({ length: 50 }, (_, i) => {
          const device = linked ? i : 50 + i;
          const at = new Date(Date.UTC(2026, 0, 1) + n++ * 1000).toISOString();
          return {
            hashId: `r${n}`,
            environmentHashId: 'supplier',
            deviceHashId: `d${device}`,
            reportTypeHashId: 'rt',
            generatedAt: at,
            fields: {},
            payload: '{}',
            linkId: linked ? i + 1 : null,
            measurements: [0, 1].map((c) => ({
              hashId: `m${n}_${c}`,
              channelIndex: c,
              channelMeasurementIndex: 0,
              quantityHashId: 'q',
              generatedAt: at,
              orderOfMagnitude: 0,
              significand: c,
              pinId: linked ? pins[i * 2 + c].id : null,
            })),
          };
        }),
      });
    // the third kind is a linked batch with the charts' hourly rollup trigger (migration 014) switched off: the trigger's cost
    type Kind = 'linked' | 'unlinked' | 'linked, charts rollup trigger off';
    const kinds: Kind[] = ['linked', 'unlinked', 'linked, charts rollup trigger off'];
    const times: Record<Kind, number[]> = { linked: [], unlinked: [], 'linked, charts rollup trigger off': [] };
    for (let b = 0; b < opts.batches; b++) {
      for (const kind of kinds.map((_, i) => kinds[(b + i) % kinds.length])) {
        const json = batch(kind !== 'unlinked');
        const off = kind === 'linked, charts rollup trigger off';
        if (off) await db.query('ALTER TABLE measurement DISABLE TRIGGER measurement_hourly_add');
        const t0 = performance.now();
        await ingestReportsJson(db, json);
        times[kind].push(performance.now() - t0);
        if (off) await db.query('ALTER TABLE measurement ENABLE TRIGGER measurement_hourly_add');
      }
    }
    const {
      rows: [check],
    } = await db.query<{ on_pins: number }>('SELECT count(*)::int AS on_pins FROM measurement WHERE pin_id IS NOT NULL');
    return kinds.map((kind) => {
      const sorted = times[kind].sort((a, b) => a - b);
      return {
        name: `ingest statement, 50 reports x 2 measurements, ${kind} devices (batches in turn)`,
        value: Number(pct(sorted, 50).toFixed(2)),
        unit: 'ms per batch (p50)',
        p50Ms: Number(pct(sorted, 50).toFixed(2)),
        p99Ms: Number(pct(sorted, 99).toFixed(2)),
        target: kind === 'unlinked' ? 'linked no worse than unlinked' : 'linked with the trigger: its cost over the trigger off',
        detail: `${sorted.length} batches; ${check.on_pins} measurements on pins`,
      };
    });
  } finally {
    await db.close();
  }
}
