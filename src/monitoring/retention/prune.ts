import type { AppContext } from '../../app/context.ts';
import type { Queryable } from '../../app/db.ts';

/** How often the API role looks for expired measurements, and how many rows one statement deletes. */
export const RETENTION_DEFAULTS = { intervalMs: 60 * 60 * 1000, batchRows: 10_000 };
const LOCK_KEY = 'retention:lock';

/**
 * Deletes the measurements on a monitoring environment's pins, and the reports registered on its
 * pin groups, that are older than its measurementsExpirationDays (default 3650). Works in batches
 * of `batchRows` so no statement holds locks for long; the BRIN index on generated_at finds the
 * old block ranges without touching the rest of the table. Returns the rows deleted.
 */
export async function pruneExpired(db: Queryable, batchRows = RETENTION_DEFAULTS.batchRows): Promise<{ measurements: number; reports: number }> {
  const { rows: envs } = await db.query<{ id: number; cutoff: Date }>(
    `SELECT id, now() - make_interval(days => COALESCE((settings->>'measurementsExpirationDays')::int, 3650)) AS cutoff
       FROM environment WHERE type = 'monitoring' AND deleted_at IS NULL`);
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
    measurements += await inBatches(`DELETE FROM measurement WHERE ctid = ANY(ARRAY(
           SELECT m.ctid FROM measurement m JOIN pin p ON p.id = m.pin_id
            WHERE m.generated_at < $2 AND p.environment_id = $1 LIMIT $3))`, env);
    // the charts' hourly rollup (migration 014) of the hours that expired entirely
    await inBatches(`DELETE FROM measurement_hourly WHERE ctid = ANY(ARRAY(
           SELECT h.ctid FROM measurement_hourly h JOIN pin p ON p.id = h.pin_id
            WHERE h.hour <= $2::timestamptz - interval '1 hour' AND p.environment_id = $1 LIMIT $3))`, env);
    reports += await inBatches(`DELETE FROM condition_report WHERE id = ANY(ARRAY(
           SELECT r.id FROM condition_report r JOIN pin_group pg ON pg.id = r.pin_group_id
            WHERE r.generated_at < $2 AND pg.environment_id = $1 LIMIT $3))`, env);
  }
  return { measurements, reports };
}

/** Runs pruneExpired every `intervalMs`; one process at a time across the deployment (a Redis lock). */
export function startRetention(ctx: AppContext, intervalMs = RETENTION_DEFAULTS.intervalMs): { stop(): void } {
  const run = async () => {
    const token = String(process.pid) + Math.random();
    if (await ctx.redis.set(LOCK_KEY, token, 'PX', intervalMs, 'NX') !== 'OK') return;
    const pruned = await pruneExpired(ctx.db);
    if (pruned.measurements + pruned.reports > 0) ctx.log.info(pruned, 'pruned expired measurements');
  };
  const tick = () => { run().catch((err: unknown) => ctx.log.warn({ err }, 'retention run failed')); };
  const first = setTimeout(tick, Math.min(intervalMs, 60_000));
  const timer = setInterval(tick, intervalMs);
  first.unref();
  timer.unref();
  return { stop() { clearTimeout(first); clearInterval(timer); } };
}
