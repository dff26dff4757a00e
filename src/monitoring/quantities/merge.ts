import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import type { ChangeBus } from '../../app/changes.ts';

// quantity merge (the SDK's POST /quantity/:sourceQuantityHashId/merge): every reference to the source
// quantity is moved to the target and the source is deleted, in one transaction, so a failure leaves both
// quantities as they were. What refers to a quantity, and how each moves:
//   - measurements (of any environment's pins: a supplier's quantity is measured on its customers' pins)
//     and their hourly rollup, whose (pin, quantity, hour) rows are added to the target's;
//   - pin thresholds: a pin with a threshold for both keeps the target's (the one it already applies to
//     the target's measurements);
//   - issues: their quantities, and the cause that ties an open threshold issue to its (pin, quantity);
//     where a pin has an open threshold issue for both, the source's is closed (the target's goes on);
//   - chart panels' manual series, and the device types' charts and channel charts.
// The source's hashId is not kept as an alias: a report parser that still names it reports a quantity
// that is not one of the environment's, as after a quantity delete.

/** Replaces, in a JSON value, every member `key` equal to `from` with `to`; whether anything changed. */
function replaceMember(value: unknown, key: string, from: unknown, to: unknown): boolean {
  if (Array.isArray(value)) return value.map((v) => replaceMember(v, key, from, to)).some(Boolean);
  if (typeof value !== 'object' || value === null) return false;
  const o = value as Record<string, unknown>;
  let changed = false;
  for (const [k, v] of Object.entries(o)) {
    if (k === key && v === from) {
      o[k] = to;
      changed = true;
    } else if (replaceMember(v, key, from, to)) changed = true;
  }
  return changed;
}

interface Ids {
  source: number;
  target: number;
  sourceHashId: string;
  targetHashId: string;
}

async function moveMeasurements(db: Queryable, q: Ids): Promise<number[]> {
  await db.query('UPDATE measurement SET quantity_id = $2 WHERE quantity_id = $1', [q.source, q.target]);
  // the rollup's rows of the source join the target's (the insert trigger does not see an update)
  const { rows } = await db.query<{ pin_id: number }>(
    `WITH gone AS (DELETE FROM measurement_hourly WHERE quantity_id = $1 RETURNING *),
     added AS (
       INSERT INTO measurement_hourly AS h (pin_id, quantity_id, hour, count, sum, low_value, low_id, high_value, high_id)
       SELECT pin_id, $2, hour, count, sum, low_value, low_id, high_value, high_id FROM gone ORDER BY pin_id, hour
       ON CONFLICT (pin_id, quantity_id, hour) DO UPDATE SET
         count = h.count + EXCLUDED.count,
         sum = h.sum + EXCLUDED.sum,
         low_value = LEAST(h.low_value, EXCLUDED.low_value),
         low_id = CASE WHEN EXCLUDED.low_value < h.low_value THEN EXCLUDED.low_id ELSE h.low_id END,
         high_value = GREATEST(h.high_value, EXCLUDED.high_value),
         high_id = CASE WHEN EXCLUDED.high_value > h.high_value THEN EXCLUDED.high_id ELSE h.high_id END
       RETURNING pin_id)
     SELECT DISTINCT pin_id FROM added`,
    [q.source, q.target],
  );
  return rows.map((r) => r.pin_id);
}

async function moveThresholds(db: Queryable, q: Ids): Promise<number[]> {
  const { rows } = await db.query<{ pin_id: number }>(
    `WITH dropped AS (
       DELETE FROM pin_threshold s WHERE s.quantity_id = $1 AND EXISTS (SELECT 1 FROM pin_threshold t WHERE t.pin_id = s.pin_id AND t.quantity_id = $2)
       RETURNING s.pin_id),
     moved AS (
       UPDATE pin_threshold SET quantity_id = $2, updated_at = now() WHERE quantity_id = $1 AND pin_id NOT IN (SELECT pin_id FROM dropped)
       RETURNING pin_id)
     SELECT pin_id FROM dropped UNION SELECT pin_id FROM moved`,
    [q.source, q.target],
  );
  return rows.map((r) => r.pin_id);
}

async function moveIssues(db: Queryable, q: Ids): Promise<void> {
  const sourceCause = `^threshold:[0-9]+:${q.source}$`;
  await db.query(
    `UPDATE issue s SET closed_at = now(), updated_at = now()
      WHERE s.cause ~ $1 AND s.closed_at IS NULL AND s.deleted_at IS NULL
        AND EXISTS (SELECT 1 FROM issue t WHERE t.cause = regexp_replace(s.cause, '[0-9]+$', $2::text) AND t.closed_at IS NULL AND t.deleted_at IS NULL)`,
    [sourceCause, String(q.target)],
  );
  await db.query(`UPDATE issue SET cause = regexp_replace(cause, '[0-9]+$', $2::text) WHERE cause ~ $1`, [sourceCause, String(q.target)]);
  await replaceInQuantityIds(db, 'issue', q);
}

/** The source replaced by the target in a table's `quantity_ids` list, each id once, in the list's order. */
async function replaceInQuantityIds(db: Queryable, table: 'issue' | 'measurement_filter', q: Ids): Promise<void> {
  await db.query(
    `UPDATE ${table} SET quantity_ids = ARRAY(SELECT d.id FROM (SELECT DISTINCT ON (x.id) x.id, x.n FROM unnest(array_replace(quantity_ids, $1::bigint, $2::bigint)) WITH ORDINALITY AS x(id, n)
                                  ORDER BY x.id, x.n) d ORDER BY d.n),
            updated_at = now()
      WHERE $1::bigint = ANY(quantity_ids)`,
    [q.source, q.target],
  );
}

async function moveCharts(db: Queryable, q: Ids): Promise<void> {
  const panels = await db.query<{ id: number; manual_charts: unknown }>(
    `SELECT id, manual_charts FROM chart_panel WHERE jsonb_path_exists(manual_charts, '$[*].series[*] ? (@.quantityId == $q)', jsonb_build_object('q', $1::bigint)) FOR UPDATE`,
    [q.source],
  );
  for (const p of panels.rows) {
    replaceMember(p.manual_charts, 'quantityId', Number(q.source), Number(q.target));
    await db.query('UPDATE chart_panel SET manual_charts = $2, updated_at = now() WHERE id = $1', [p.id, JSON.stringify(p.manual_charts)]);
  }
  // a device type refers to its own environment's quantities by hashId
  const types = await db.query<{ id: number; charts: unknown; channels: unknown }>(
    `SELECT t.id, t.charts, t.channels FROM device_type t JOIN quantity q ON q.environment_id = t.environment_id AND q.id = $1
      WHERE jsonb_path_exists(t.charts, '$[*].series[*] ? (@.quantityHashId == $h)', jsonb_build_object('h', $2::text))
         OR jsonb_path_exists(t.channels, '$[*].charts[*].series[*] ? (@.quantityHashId == $h)', jsonb_build_object('h', $2::text))
      FOR UPDATE OF t`,
    [q.source, q.sourceHashId],
  );
  for (const t of types.rows) {
    replaceMember(t.charts, 'quantityHashId', q.sourceHashId, q.targetHashId);
    replaceMember(t.channels, 'quantityHashId', q.sourceHashId, q.targetHashId);
    await db.query('UPDATE device_type SET charts = $2, channels = $3, updated_at = now() WHERE id = $1', [
      t.id,
      JSON.stringify(t.charts),
      JSON.stringify(t.channels),
    ]);
  }
}

/** quantity merge: the source's measurements, thresholds, issues and charts go to the target; the source is deleted. Answers the target's hashId. */
export async function mergeQuantity(
  db: Db,
  environmentId: number,
  sourceHashId: string,
  targetHashId: string,
  changes: Pick<ChangeBus, 'publish'>,
): Promise<{ hashId: string }> {
  if (sourceHashId === targetHashId)
    throw new ParameterError('targetQuantityHashId must differ from sourceQuantityHashId (a quantity cannot be merged into itself)');
  const pins = await db.tx(async (client) => {
    // both rows locked in id order: two merges of the same pair the other way round wait instead of deadlocking
    const { rows } = await client.query<{ id: number; hash_id: string }>(
      'SELECT id, hash_id FROM quantity WHERE environment_id = $1 AND hash_id = ANY($2::text[]) AND deleted_at IS NULL ORDER BY id FOR UPDATE',
      [environmentId, [sourceHashId, targetHashId]],
    );
    const source = rows.find((r) => r.hash_id === sourceHashId);
    const target = rows.find((r) => r.hash_id === targetHashId);
    if (!source) throw new NotFoundError('quantity', sourceHashId);
    if (!target) throw new NotFoundError('quantity', targetHashId);
    const q: Ids = { source: Number(source.id), target: Number(target.id), sourceHashId, targetHashId };
    const touched = [...(await moveMeasurements(client, q)), ...(await moveThresholds(client, q))];
    await moveIssues(client, q);
    await moveCharts(client, q);
    await replaceInQuantityIds(client, 'measurement_filter', q);
    await client.query('UPDATE quantity SET deleted_at = now(), updated_at = now() WHERE id = $1', [q.source]);
    return touched;
  });
  // the report path's cached limits and open issues of these pins name the source
  await changes.publish('thresholds', { pinIds: [...pins], quantityHashIds: [sourceHashId] });
  return { hashId: targetHashId };
}
