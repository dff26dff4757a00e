// The floor of a durable report, measured in the same run as the rows it is compared with: (a) what libcoap's server
// spends per request (bench/coap.ts reads it from /proc while its row runs) plus (b) what the same PostgreSQL spends to
// keep one report's data durably at the least: the report, measurement and activity rows the service stored in the
// row just run, copied back in by multi-row INSERTs of the size of the service's jobs, committed per batch with a
// synchronous commit (the durability of "answered = committed"), into tables with only the keys a read-back needs:
//   report      primary key (id), unique hash_id   (a report is read by its hashId)
//   measurement primary key (report_id, channel_index, channel_measurement_index)   (read with its report)
//   activity    primary key (id), unique hash_id
// No triggers (the service's hourly aggregates), no second indexes (device, environment, pin and time order).
// ours / floor is comparable across machines where ours / libcoap alone was not (issue 15: 0.06-0.14 on every VM).
import pg from 'pg';
import { cpuMeter } from './cpu.ts';

/** The service's tables and the floor's copy of each, with the one key the floor keeps. */
const TABLES = [
  { source: 'condition_report', floor: 'floor_report', keys: 'PRIMARY KEY (id), UNIQUE (hash_id)' },
  { source: 'measurement', floor: 'floor_measurement', keys: 'PRIMARY KEY (report_id, channel_index, channel_measurement_index)' },
  { source: 'supplier_activity', floor: 'floor_activity', keys: 'PRIMARY KEY (id), UNIQUE (hash_id)' },
] as const;

interface Column {
  name: string;
  type: string;
}

export interface FloorStore {
  /** PostgreSQL CPU ms to store one report's rows durably at the least, in batches of `batchSize` reports */
  msPerReport: number;
  reports: number;
  batchSize: number;
}

/**
 * Measures (b) on the database at `databaseUrl` from the reports stored there for `environmentId` (at most `limit`):
 * their rows are read back as text and written again into empty floor tables, `batchSize` reports a transaction.
 */
export async function floorStore(databaseUrl: string, environmentId: number, batchSize: number, limit = 20_000): Promise<FloorStore> {
  // every value as PostgreSQL's text, sent back as it came: no parsing on either side that the floor would pay for
  const client = new pg.Client({ connectionString: databaseUrl, types: { getTypeParser: () => (v: string) => v } });
  await client.connect();
  try {
    await client.query('SET synchronous_commit = on');
    const columns = new Map<string, Column[]>();
    for (const t of TABLES) {
      const { rows } = await client.query<Column>(
        `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
          WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
        [t.source],
      );
      columns.set(t.source, rows);
      await client.query(`DROP TABLE IF EXISTS ${t.floor}`);
      await client.query(`CREATE TABLE ${t.floor} (LIKE ${t.source}, ${t.keys})`);
    }
    const reports = (
      await client.query<Record<string, string>>('SELECT * FROM condition_report WHERE environment_id = $1 ORDER BY id LIMIT $2', [environmentId, limit])
    ).rows;
    if (reports.length === 0) return { msPerReport: 0, reports: 0, batchSize };
    const ids = reports.map((r) => r.id);
    const measurements = (await client.query<Record<string, string>>('SELECT * FROM measurement WHERE report_id = ANY($1::bigint[])', [ids])).rows;
    // one activity per report: the device request that made it (the service writes one per run)
    const activities = (
      await client.query<Record<string, string>>('SELECT * FROM supplier_activity WHERE environment_id = $1 ORDER BY id LIMIT $2', [
        environmentId,
        reports.length,
      ])
    ).rows;
    const byReport = new Map<string, Record<string, string>[]>();
    for (const m of measurements) byReport.set(m.report_id, [...(byReport.get(m.report_id) ?? []), m]);

    const insert = (table: string, cols: Column[], rows: Record<string, string>[]) => {
      if (rows.length === 0) return Promise.resolve();
      const params: (string | null)[] = [];
      const tuples = rows.map(
        (r) =>
          `(${cols
            .map((c) => {
              params.push(r[c.name] ?? null);
              return `$${params.length}::${c.type}`;
            })
            .join(', ')})`,
      );
      return client.query(`INSERT INTO ${table} (${cols.map((c) => c.name).join(', ')}) VALUES ${tuples.join(', ')}`, params);
    };
    const meter = cpuMeter({ postgres: (p) => p.comm.startsWith('postgres') });
    for (let i = 0; i < reports.length; i += batchSize) {
      const batch = reports.slice(i, i + batchSize);
      await client.query('BEGIN');
      await insert('floor_report', columns.get('condition_report')!, batch);
      await insert(
        'floor_measurement',
        columns.get('measurement')!,
        batch.flatMap((r) => byReport.get(r.id) ?? []),
      );
      await insert('floor_activity', columns.get('supplier_activity')!, activities.slice(i, i + batchSize));
      await client.query('COMMIT');
    }
    const used = meter().postgres;
    return { msPerReport: (used * 1000) / reports.length, reports: reports.length, batchSize };
  } finally {
    for (const t of TABLES) await client.query(`DROP TABLE IF EXISTS ${t.floor}`).catch(() => undefined);
    await client.end();
  }
}
