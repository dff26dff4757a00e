import type { ChangeBus } from '../../app/changes.ts';
import type { Db, Queryable } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { QUANTITY_SELECT, toQuantity } from '../quantities/store.ts';
import { compare, storedLimit, type Limits } from './limits.ts';

export interface ThresholdSet {
  pinHashId: string;
  quantityHashId: string;
  thresholds: Limits | null;
}

const LIMITS = ['criticallyLow', 'low', 'high', 'criticallyHigh'] as const;

/**
 * The quantities an environment may put a threshold on: its own, and those of the suppliers whose
 * devices it claimed (their reports carry the supplier's quantities onto its pins).
 */
export const VISIBLE_QUANTITY = `q.deleted_at IS NULL AND (q.environment_id = $1
  OR EXISTS (SELECT 1 FROM device d WHERE d.environment_id = q.environment_id AND d.claimed_environment_id = $1))`;

/** Limits must rise from criticallyLow to criticallyHigh (equal neighbours allowed); else a parameter_error naming the limit. */
function checkOrder(limits: Limits, field: string): void {
  let previous: { name: string; value: NonNullable<Limits['low']> } | null = null;
  for (const name of LIMITS) {
    const value = limits[name];
    if (value === null) continue;
    if (previous && compare(previous.value, value) > 0) throw new ParameterError(`${field}.${name} must not be below ${field}.${previous.name}`);
    previous = { name, value };
  }
}

/**
 * measurement-threshold set: per item, the pin's limits for the quantity are replaced, or removed
 * when `thresholds` is null. All or nothing. Returns each item's threshold hashId (null for a removal).
 */
export async function setThresholds(
  db: Db,
  environmentId: number,
  items: ThresholdSet[],
  fieldOf: (i: number) => string,
  changes: Pick<ChangeBus, 'publish'>,
): Promise<(string | null)[]> {
  items.forEach((item, i) => {
    if (item.thresholds) checkOrder(item.thresholds, `${fieldOf(i)}thresholds`);
  });
  const pinIds: number[] = [];
  const out = await db.tx(async (client) => {
    const hashIds: (string | null)[] = [];
    for (const [i, item] of items.entries()) {
      const pin = await client.query<{ id: number }>('SELECT id FROM pin WHERE environment_id = $1 AND hash_id = $2', [environmentId, item.pinHashId]);
      if (pin.rows.length === 0) throw new ParameterError(`${fieldOf(i)}pinHashId ${item.pinHashId} is not a pin of this environment`);
      const q = await client.query<{ id: number }>(`SELECT q.id FROM quantity q WHERE q.hash_id = $2 AND ${VISIBLE_QUANTITY}`, [
        environmentId,
        item.quantityHashId,
      ]);
      if (q.rows.length === 0) throw new ParameterError(`${fieldOf(i)}quantityHashId ${item.quantityHashId} is not a quantity this environment measures`);
      pinIds.push(pin.rows[0].id);
      if (item.thresholds === null) {
        await client.query('DELETE FROM pin_threshold WHERE pin_id = $1 AND quantity_id = $2', [pin.rows[0].id, q.rows[0].id]);
        hashIds.push(null);
        continue;
      }
      const t = item.thresholds;
      const { rows } = await client.query<{ hash_id: string }>(
        `INSERT INTO pin_threshold (hash_id, environment_id, pin_id, quantity_id, critically_low, low, high, critically_high)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (pin_id, quantity_id) DO UPDATE SET critically_low = EXCLUDED.critically_low, low = EXCLUDED.low,
           high = EXCLUDED.high, critically_high = EXCLUDED.critically_high, updated_at = now()
         RETURNING hash_id`,
        [newHashId(), environmentId, pin.rows[0].id, q.rows[0].id, ...LIMITS.map((k) => (t[k] === null ? null : JSON.stringify(t[k])))],
      );
      hashIds.push(rows[0].hash_id);
    }
    return hashIds;
  });
  await changes.publish('thresholds', { pinIds: [...pinIds], quantityHashIds: [] });
  return out;
}

const limitsOf = (r: Record<string, unknown>, prefix: string): Limits => ({
  criticallyLow: storedLimit(r[`${prefix}critically_low`]),
  low: storedLimit(r[`${prefix}low`]),
  high: storedLimit(r[`${prefix}high`]),
  criticallyHigh: storedLimit(r[`${prefix}critically_high`]),
});

/** The pin-level thresholds of the pins `where` selects (`p`), as pin get, pin group get and edge get show them. */
export async function thresholdsShown(db: Queryable, where: string, params: unknown[]) {
  const { rows } = await db.query(
    `SELECT t.hash_id AS t_hash_id, p.hash_id AS t_pin_hash_id, t.critically_low AS t_critically_low, t.low AS t_low, t.high AS t_high,
            t.critically_high AS t_critically_high, ${QUANTITY_SELECT}
       FROM pin_threshold t JOIN pin p ON p.id = t.pin_id JOIN quantity q ON q.id = t.quantity_id
      WHERE ${where} ORDER BY p.id, q.id`,
    params,
  );
  return rows.map((r) => ({
    value: { hashId: r.t_hash_id as string, pinHashId: r.t_pin_hash_id as string, ...limitsOf(r, 't_') },
    quantity: toQuantity(r),
  }));
}

/**
 * The thresholds that apply to each (pin, quantity) pair: the pin's own, else the quantity's
 * defaults (null when neither sets a limit). Keyed `${pinId}:${quantityId}`. Pins of other
 * environments are not answered.
 */
export async function pinThresholdsOf(
  db: Queryable,
  environmentId: number,
  pairs: { pinId: number; quantityId: number }[],
): Promise<Map<string, (Limits & { hashId: string | null }) | null>> {
  const out = new Map<string, (Limits & { hashId: string | null }) | null>();
  if (pairs.length === 0) return out;
  const { rows } = await db.query(
    `SELECT v.pin_id, v.quantity_id, t.hash_id, t.critically_low, t.low, t.high, t.critically_high,
            q.default_critically_low_threshold AS d_critically_low, q.default_low_threshold AS d_low,
            q.default_high_threshold AS d_high, q.default_critically_high_threshold AS d_critically_high
       FROM unnest($2::bigint[], $3::bigint[]) AS v(pin_id, quantity_id)
       JOIN pin p ON p.id = v.pin_id AND p.environment_id = $1
       JOIN quantity q ON q.id = v.quantity_id
       LEFT JOIN pin_threshold t ON t.pin_id = v.pin_id AND t.quantity_id = v.quantity_id`,
    [environmentId, pairs.map((p) => p.pinId), pairs.map((p) => p.quantityId)],
  );
  for (const r of rows) {
    const own = r.hash_id !== null;
    const limits = own ? limitsOf(r, '') : limitsOf(r, 'd_');
    const any = LIMITS.some((k) => limits[k] !== null);
    out.set(`${r.pin_id as number}:${r.quantity_id as number}`, any || own ? { hashId: (r.hash_id as string | null) ?? null, ...limits } : null);
  }
  return out;
}

export interface ThresholdFindQuery extends FindQuery {
  type?: 'quantity' | 'port';
}

/**
 * measurement-threshold find: the pins' own thresholds (`type` port) and the quantities' default
 * thresholds of the environment (`type` quantity, location null), sorted by quantity or pin group name.
 */
export async function findThresholds(db: Queryable, environmentId: number, query: ThresholdFindQuery) {
  const parts: string[] = [];
  if (query.type !== 'quantity') {
    parts.push(`SELECT t.id * 2 AS row_id, q.hash_id AS q_hash_id, q.name AS q_name, q.name_text AS q_name_text, q.unit AS q_unit,
        pg.hash_id AS pg_hash_id, pg.name AS pg_name, p.hash_id AS p_hash_id, p.name AS p_name, e.hash_id AS e_hash_id, e.name AS e_name,
        t.critically_low, t.low, t.high, t.critically_high
      FROM pin_threshold t JOIN pin p ON p.id = t.pin_id JOIN pin_group pg ON pg.id = p.pin_group_id JOIN quantity q ON q.id = t.quantity_id
      LEFT JOIN edge e ON e.id = p.edge_id WHERE t.environment_id = $1`);
  }
  if (query.type !== 'port') {
    parts.push(`SELECT q.id * 2 + 1, q.hash_id, q.name, q.name_text, q.unit, NULL, NULL, NULL, NULL, NULL, NULL,
        q.default_critically_low_threshold, q.default_low_threshold, q.default_high_threshold, q.default_critically_high_threshold
      FROM quantity q WHERE q.environment_id = $1 AND q.deleted_at IS NULL`);
  }
  const page = await findPage(
    db,
    {
      from: `(${parts.join(' UNION ALL ')}) x`,
      select: 'x.*',
      idColumn: 'x.row_id',
      where: ['true'],
      params: [environmentId],
      sortable: { quantityName: 'x.q_name_text', pinGroupName: "coalesce(x.pg_name, '')", hashId: 'x.q_hash_id' },
      search: ['x.q_name_text', "coalesce(x.pg_name, '')", "coalesce(x.p_name, '')"],
    },
    { ...query, sortBy: query.sortBy ?? 'quantityName' },
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => ({
      quantity: { name: r.q_name, hashId: r.q_hash_id as string, unit: (r.q_unit as string | null) ?? null },
      location:
        r.p_hash_id === null
          ? null
          : {
              pinGroup: { name: r.pg_name as string, hashId: r.pg_hash_id as string },
              pin: { name: r.p_name as string, hashId: r.p_hash_id as string },
              edge: r.e_hash_id === null ? null : { name: r.e_name as string, hashId: r.e_hash_id as string },
            },
      threshold: limitsOf(r, ''),
    })),
  };
}
