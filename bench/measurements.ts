// measurement find of one pin and one quantity over a year of hourly values (8,760), from a table
// holding `total` measurements of 1,000 pins (500 pin groups of two pins, one report per pin group
// and hour, one measurement per pin). Fills a private database `gridgate_bench_measurements` with
// generate_series, then times pages of measurement find (500 rows, sorted by generatedAt) the way
// the API runs them (src/monitoring/measurements/store.ts).
import { performance } from 'node:perf_hooks';
import { openDb, recreateDatabase } from '../src/app/db.ts';
import { findMeasurements } from '../src/monitoring/measurements/store.ts';
import type { BenchRow } from './dtls.ts';
import { pct } from './harness.ts';

const HOURS = 8760;
const PIN_GROUPS = 500;

export async function measurementFindRow(opts: { total: number; rounds: number }): Promise<BenchRow> {
  const admin = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const db = await openDb({ databaseUrl: await recreateDatabase(admin, 'gridgate_bench_measurements'), dataDir: '/tmp' });
  try {
    // the target pin group reports hourly for a year; the other 499 share the rest of the total
    const otherHours = Math.max(1, Math.floor((opts.total / 2 - HOURS) / (PIN_GROUPS - 1)));
    const fillStart = performance.now();
    await db.query(`INSERT INTO environment (hash_id, type, name) VALUES ('benchenv', 'monitoring', 'bench')`);
    await db.query(`INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude)
      SELECT 'q' || i, 1, '"q"', 'q', '#000000', 'V', 0 FROM generate_series(0, 1) i`);
    await db.query(`INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, map_layer)
      SELECT 'pg' || g, 1, 'group ' || g, 's', 'default' FROM generate_series(0, ${PIN_GROUPS - 1}) g`);
    await db.query(`INSERT INTO pin (hash_id, environment_id, pin_group_id, name)
      SELECT 'p' || g || '_' || c, 1, g + 1, 'pin ' || g || '/' || c FROM generate_series(0, ${PIN_GROUPS - 1}) g, generate_series(0, 1) c`);
    await db.query(`INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id)
      SELECT 'r' || g || '_' || h, 1, timestamptz '2025-01-01' + make_interval(hours => h), g + 1
        FROM generate_series(0, ${PIN_GROUPS - 1}) g, generate_series(0, ${HOURS - 1}) h WHERE g = 0 OR h < ${otherHours}
       ORDER BY 3`);
    await db.query(`INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
      SELECT 'm' || r.id || '_' || c, r.id, 1, c + 1, (r.pin_group_id - 1) * 2 + c + 1, c, 0, r.generated_at, -3, (random() * 1000)::int
        FROM condition_report r, generate_series(0, 1) c ORDER BY r.id`);
    await db.query('VACUUM ANALYZE condition_report');
    await db.query('VACUUM ANALYZE measurement');
    const { rows: [{ n }] } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM measurement');
    const fillSeconds = (performance.now() - fillStart) / 1000;

    const latencies: number[] = [];
    let values = 0;
    for (let round = 0; round < opts.rounds; round++) {
      let offset: string | undefined;
      values = 0;
      do {
        const t0 = performance.now();
        const page = await findMeasurements(db, 1, {
          pinGroupHashIds: ['pg0'], pinHashIds: ['p0_0'], quantityHashIds: ['q0'], since: '2025-01-01T00:00:00Z', before: '2026-01-01T00:00:00Z',
          sortBy: 'generatedAt', descending: false, rowsPerPage: 500, offset,
        });
        latencies.push(performance.now() - t0);
        values += page.rows.length;
        offset = page.nextPageOffset ?? undefined;
      } while (offset);
    }
    latencies.sort((a, b) => a - b);
    return {
      name: `measurement find: 1 pin, 1 quantity, ${values} hourly values in pages of 500, table of ${n.toLocaleString('en')} measurements of 1,000 pins`,
      value: Number(pct(latencies, 50).toFixed(2)), unit: 'ms per page (p50)', p50Ms: Number(pct(latencies, 50).toFixed(2)), p99Ms: Number(pct(latencies, 99).toFixed(2)),
      target: 'p99 <= 50 ms', detail: `${latencies.length} pages over ${opts.rounds} walks; fill ${fillSeconds.toFixed(0)} s`,
    };
  } finally {
    await db.close();
  }
}
