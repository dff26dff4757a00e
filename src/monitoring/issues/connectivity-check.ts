import type { AppContext } from '../../app/context.ts';
import type { Queryable } from '../../app/db.ts';

const LOCK_KEY = 'gridgate:connectivity-check';

// Every linked device is judged: silent since its last contact (or its link, whichever is later) for
// a threshold's offlineForSeconds, or past missedReports expected reports (counted from its
// nextReportBefore and the gap that led to it), crosses that threshold; per priority level the
// device type's own threshold applies, else the environment's one without a device type. A device
// under no threshold at all crosses level 1 once its own nextReportBefore passed without contact.
// Crossing opens (or raises) the device's 'missing' issue on its pin group; back to normal closes
// it when the environment allows it (allowAutoCloseConnectivityIssues), else it is left to a user.
/**
 * How many reports device `d` (the alias) missed: none before its nextReportBefore or once it reported after it; else
 * one, plus one per gap (from its last contact to nextReportBefore) that has passed since. Analytics' device.missedReports.
 */
export const missedReports = (
  d: string,
) => `(CASE WHEN ${d}.next_report_before IS NULL OR ${d}.next_report_before > now() OR ${d}.last_online_at >= ${d}.next_report_before THEN 0
    WHEN ${d}.last_online_at IS NULL THEN 1
    ELSE 1 + floor(extract(epoch FROM now() - ${d}.next_report_before) / extract(epoch FROM ${d}.next_report_before - ${d}.last_online_at))::int END)`;

const CHECK = `WITH state AS (
    SELECT l.environment_id, l.pin_group_id, d.id AS device_id, d.hash_id AS device_hash_id, d.device_type_id, e.settings,
           GREATEST(d.last_online_at, l.created_at) AS seen_at,
           ${missedReports('d')} AS missed
      FROM device_link l JOIN device d ON d.id = l.device_id JOIN environment e ON e.id = l.environment_id AND e.deleted_at IS NULL
  ), judged AS (
    SELECT s.*, GREATEST(coalesce(x.level, 0), CASE WHEN x.applicable = 0 AND s.missed > 0 THEN 1 ELSE 0 END) AS level
      FROM state s CROSS JOIN LATERAL (
        SELECT count(*) AS applicable,
               max(t.priority_level) FILTER (WHERE (t.offline_for_seconds > 0 AND now() - s.seen_at >= make_interval(secs => t.offline_for_seconds))
                                              OR (t.missed_reports > 0 AND s.missed >= t.missed_reports)) AS level
          FROM connectivity_threshold t
         WHERE t.environment_id = s.environment_id
           AND (t.device_type_id = s.device_type_id OR (t.device_type_id IS NULL AND NOT EXISTS (
                 SELECT 1 FROM connectivity_threshold o WHERE o.environment_id = t.environment_id AND o.priority_level = t.priority_level AND o.device_type_id = s.device_type_id)))
      ) x
  ), opened AS (
    INSERT INTO issue (hash_id, environment_id, pin_group_id, title, level, automation, cause, last_measured_at, start_at)
    SELECT substr(md5(gen_random_uuid()::text), 1, 12), j.environment_id, j.pin_group_id, concat('Device ', j.device_hash_id, ' is not reporting'),
           j.level, '{"type": "missing"}', concat('missing:', j.device_id), j.seen_at, now()
      FROM judged j
     WHERE j.level > 0 AND NOT EXISTS (SELECT 1 FROM issue i WHERE i.cause = concat('missing:', j.device_id) AND i.closed_at IS NULL AND i.deleted_at IS NULL)
    ON CONFLICT (cause) WHERE cause IS NOT NULL AND closed_at IS NULL AND deleted_at IS NULL DO NOTHING
    RETURNING id
  ), raised AS (
    UPDATE issue i SET level = j.level, updated_at = now()
      FROM judged j WHERE i.cause = concat('missing:', j.device_id) AND i.closed_at IS NULL AND i.deleted_at IS NULL AND j.level > i.level
    RETURNING i.id
  ), closed AS (
    UPDATE issue i SET closed_at = now(), updated_at = now()
      FROM judged j WHERE i.cause = concat('missing:', j.device_id) AND i.closed_at IS NULL AND i.deleted_at IS NULL AND j.level = 0
       AND j.settings->'allowAutoCloseConnectivityIssues' = 'true'
    RETURNING i.id
  ), commented AS (
    INSERT INTO issue_comment (hash_id, issue_id, comment)
    SELECT substr(md5(gen_random_uuid()::text), 1, 12), id, 'Closed automatically: the device reports again' FROM closed
  )
  SELECT (SELECT count(*) FROM opened)::int AS opened, (SELECT count(*) FROM raised)::int AS raised, (SELECT count(*) FROM closed)::int AS closed`;

/** One pass over every linked device: opens, raises and closes connectivity issues. */
export async function checkConnectivity(db: Queryable): Promise<{ opened: number; raised: number; closed: number }> {
  const { rows } = await db.query<{ opened: number; raised: number; closed: number }>(CHECK);
  return rows[0];
}

/**
 * The worker's periodic connectivity check, every CONNECTIVITY_CHECK_MS. Of all worker processes
 * one runs each round: the one that takes the Redis lock, which lasts the interval.
 */
export function startConnectivityCheck(ctx: AppContext): { stop(): Promise<void> } {
  const interval = ctx.config.connectivityCheckMs;
  let running: Promise<void> | null = null;
  const round = async () => {
    const mine = await ctx.redis.set(`${LOCK_KEY}:${ctx.config.queueName}`, '1', 'PX', Math.max(50, interval - 50), 'NX');
    if (mine !== 'OK') return;
    const outcome = await checkConnectivity(ctx.db);
    if (outcome.opened + outcome.raised + outcome.closed > 0) ctx.log.info(outcome, 'connectivity issues');
  };
  const timer = setInterval(() => {
    if (running) return;
    running = round()
      .catch((err: Error) => ctx.log.warn({ err: err.message }, 'connectivity check failed'))
      .finally(() => {
        running = null;
      });
  }, interval);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
