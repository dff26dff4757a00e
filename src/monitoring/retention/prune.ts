import type { AppContext } from '../../app/context.ts';
import type { Queryable } from '../../app/db.ts';
import { OutageLog } from '../../app/outage-log.ts';
import { ensurePartitions, PARTITIONED_TABLES, weekPartitions } from '../partitions/weeks.ts';

/** How often the API role looks for expired measurements, and how many rows one statement deletes. */
export const RETENTION_DEFAULTS = { intervalMs: 60 * 60 * 1000, batchRows: 10_000 };
const LOCK_KEY = 'retention:lock';

/**
 * Drops the week partitions of reports, measurements and activities (src/monitoring/partitions/) that end
 * before the longest measurementsExpirationDays of any environment: every environment's data in them has
 * expired. Shorter settings are honoured row by row (pruneExpired). Returns the partitions dropped.
 */
export async function dropExpiredPartitions(db: Queryable): Promise<string[]> {
  const {
    rows: [{ horizon }],
  } = await db.query<{ horizon: Date | null }>(
    `SELECT now() - make_interval(days => max(COALESCE((settings->>'measurementsExpirationDays')::int, 3650))) AS horizon
       FROM environment WHERE deleted_at IS NULL`,
  );
  if (!horizon) return [];
  const dropped: string[] = [];
  for (const { table } of PARTITIONED_TABLES) {
    for (const p of await weekPartitions(db, table)) {
      if (p.to > horizon) break;
      await db.query(`DROP TABLE ${p.name}`);
      dropped.push(p.name);
    }
  }
  return dropped;
}

/**
 * Deletes the measurements on a monitoring environment's pins, and the reports registered on its
 * pin groups, that are older than its measurementsExpirationDays (default 3650). Works in batches
 * of `batchRows` so no statement holds locks for long; the BRIN index on generated_at finds the
 * old block ranges without touching the rest of the table. Returns the rows deleted.
 */
export async function pruneExpired(db: Queryable, batchRows = RETENTION_DEFAULTS.batchRows): Promise<{ measurements: number; reports: number }> {
  const { rows: envs } = await db.query<{ id: number; cutoff: Date }>(
    `SELECT id, now() - make_interval(days => COALESCE((settings->>'measurementsExpirationDays')::int, 3650)) AS cutoff
       FROM environment WHERE type = 'monitoring' AND deleted_at IS NULL`,
  );
  let measurements = 0;
  let reports = 0;
  // one statement deletes at most batchRows rows: it is run again until a batch comes back short
  const inBatches = async (sql: string, env: { id: number; cutoff: Date }): Promise<number> => {
    let deleted = 0;
    for (;;) {
      const { rowCount } = await db.query(sql, [env.id, env.cutoff, batchRows]);
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < batchRows) return deleted;
    }
  };
  for (const env of envs) {
    // by id, not ctid: a ctid names a row within one partition only (migration 032)
    measurements += await inBatches(
      `DELETE FROM measurement WHERE generated_at < $2 AND id = ANY(ARRAY(
           SELECT m.id FROM measurement m JOIN pin p ON p.id = m.pin_id
            WHERE m.generated_at < $2 AND p.environment_id = $1 LIMIT $3))`,
      env,
    );
    // the charts' hourly rollup (migration 014) of the hours that expired entirely
    await inBatches(
      `DELETE FROM measurement_hourly WHERE ctid = ANY(ARRAY(
           SELECT h.ctid FROM measurement_hourly h JOIN pin p ON p.id = h.pin_id
            WHERE h.hour <= $2::timestamptz - interval '1 hour' AND p.environment_id = $1 LIMIT $3))`,
      env,
    );
    reports += await inBatches(
      `DELETE FROM condition_report WHERE generated_at < $2 AND id = ANY(ARRAY(
           SELECT r.id FROM condition_report r JOIN pin_group pg ON pg.id = r.pin_group_id
            WHERE r.generated_at < $2 AND pg.environment_id = $1 LIMIT $3))`,
      env,
    );
  }
  return { measurements, reports };
}

/**
 * Every `intervalMs`, one process at a time across the deployment (a Redis lock): makes the coming weeks'
 * partitions, drops the expired ones, then prunes what expired sooner (pruneExpired). A store outage is
 * logged once when it begins and once when it ends; the next run does what this one could not.
 */
export function startRetention(ctx: AppContext, intervalMs = RETENTION_DEFAULTS.intervalMs, firstRunMs = Math.min(intervalMs, 60_000)): { stop(): void } {
  const outage = new OutageLog(
    ctx.log,
    'partitions and retention could not run: a store is unavailable; tried again next run',
    'partitions and retention run again',
  );
  const run = async (): Promise<boolean> => {
    const token = String(process.pid) + Math.random();
    // per deployment (its queue name), as the connectivity check's: deployments sharing a Redis do not wait for each other
    if ((await ctx.redis.set(`${LOCK_KEY}:${ctx.config.queueName}`, token, 'PX', intervalMs, 'NX')) !== 'OK') return false;
    // housekeeping, on a connection that names no author: rows it moves or deletes are nobody's change (Db.maintenance)
    await ctx.db.maintenance(async (db) => {
      const made = await ensurePartitions(db);
      if (made.length > 0) ctx.log.info({ made }, 'partitions made');
      const dropped = await dropExpiredPartitions(db);
      if (dropped.length > 0) ctx.log.info({ dropped }, 'expired partitions dropped');
      const pruned = await pruneExpired(db);
      if (pruned.measurements + pruned.reports > 0) ctx.log.info(pruned, 'pruned expired measurements');
    });
    return true;
  };
  // a run another process has (the lock) says nothing about the stores
  const tick = () => {
    run().then(
      (ran) => {
        if (ran) outage.up();
      },
      (err: unknown) => outage.down(err),
    );
  };
  const first = setTimeout(tick, firstRunMs);
  const timer = setInterval(tick, intervalMs);
  first.unref();
  timer.unref();
  return {
    stop() {
      clearTimeout(first);
      clearInterval(timer);
    },
  };
}
