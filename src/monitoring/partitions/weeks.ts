import type { Queryable } from '../../app/db.ts';

/**
 * Reports, measurements and activities are partitioned by week on these columns (migration 032): one
 * partition per UTC week starting Monday, named `<table>_wYYYYMMDD`, and `<table>_default` for a row whose
 * week has none yet. gridgate_week_partition() (in the migration) makes a week's partition and moves into it
 * what the default partition holds of that week.
 */
export const PARTITIONED_TABLES = [
  { table: 'condition_report', key: 'generated_at' },
  { table: 'measurement', key: 'generated_at' },
  { table: 'supplier_activity', key: 'created_at' },
] as const;

/** Weeks made ahead of time; rows dated further ahead than `maxFutureDays` (a device's clock gone wrong) stay in the default partition. */
export const PARTITION_DEFAULTS = { weeksAhead: 4, maxFutureDays: 366 };

const WEEK_MS = 7 * 24 * 3600 * 1000;

export interface WeekPartition {
  table: string;
  name: string;
  from: Date;
  to: Date;
}

/** The week partitions of `table`, oldest first (the bounds read from their names, which the migration's function sets). */
export async function weekPartitions(db: Queryable, table: string): Promise<WeekPartition[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = $1::regclass AND c.relname ~ '_w[0-9]{8}$' ORDER BY c.relname`,
    [table],
  );
  return rows.map(({ name }) => {
    const d = name.slice(-8);
    const from = new Date(`${d.slice(0, 4)}-${d.slice(4, 6)}-${d.slice(6, 8)}T00:00:00Z`);
    return { table, name, from, to: new Date(from.getTime() + WEEK_MS) };
  });
}

/**
 * Makes this week's partition and the next `weeksAhead`, and the partitions of the weeks that rows in a
 * default partition belong to (moving those rows there). Returns the names of the partitions made.
 */
export async function ensurePartitions(db: Queryable, now = new Date(), opts = PARTITION_DEFAULTS): Promise<string[]> {
  const made: string[] = [];
  for (const { table, key } of PARTITIONED_TABLES) {
    const before = new Set((await weekPartitions(db, table)).map((p) => p.name));
    const ahead = Array.from({ length: opts.weeksAhead + 1 }, (_, i) => new Date(now.getTime() + i * WEEK_MS));
    const { rows: strays } = await db.query<{ week: Date }>(
      `SELECT DISTINCT date_trunc('week', ${key}, 'UTC') AS week FROM ${table}_default WHERE ${key} < $1::timestamptz + make_interval(days => $2)`,
      [now, opts.maxFutureDays],
    );
    const madeHere: string[] = [];
    for (const at of [...ahead, ...strays.map((s) => s.week)]) {
      const { rows } = await db.query<{ name: string }>('SELECT gridgate_week_partition($1::regclass, $2)::text AS name', [table, at]);
      if (!before.has(rows[0].name)) {
        before.add(rows[0].name);
        madeHere.push(rows[0].name);
      }
    }
    // Rows moved out of the default partition leave it dead tuples its indexes still walk (a read of a range it no
    // longer holds read 38,000 pages to find nothing after a 10 M-row import), and the weeks they moved into have no
    // statistics (the planner's defaults turned a chart's 500-point fetch into sequential scans of every week).
    // Autovacuum would see to both, in its time; the mover does it at once, on what it moved.
    if (strays.length > 0) {
      for (const name of madeHere) await db.query(`ANALYZE ${name}`);
      await db.query(`VACUUM (ANALYZE) ${table}_default`);
    }
    made.push(...madeHere);
  }
  return made;
}
