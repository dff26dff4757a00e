import type { Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { measuredPairs } from '../charts/panels.ts';
import type { PinThreshold } from '../charts/pin-threshold.ts';
import { storedLimit } from '../thresholds/limits.ts';
import { QUANTITY_SELECT, toQuantity, type Quantity } from '../quantities/store.ts';

export interface PinQuantity {
  quantity: Quantity;
  pinThreshold: PinThreshold | null;
}

/**
 * graph get-pin-quantities: the quantities of a pin, each with the pin's own threshold (null when the pin has
 * none and only the quantity's defaults apply). A pin's quantities are those measured on it and those it has a
 * threshold for (set before its first report), the environment's own or a supplier's its devices report;
 * sorted by name. A deleted quantity is left out.
 */
export async function pinQuantities(db: Queryable, environmentId: number, pinHashId: string): Promise<{ rows: PinQuantity[] }> {
  const pin = await db.query<{ id: number }>('SELECT id FROM pin WHERE environment_id = $1 AND hash_id = $2', [environmentId, pinHashId]);
  if (pin.rows.length === 0) throw new NotFoundError('pin', pinHashId);
  const pinId = pin.rows[0].id;
  const measured = (await measuredPairs(db, [pinId])).map((p) => p.quantityId);
  const { rows } = await db.query(
    `SELECT ${QUANTITY_SELECT}, t.hash_id AS t_hash_id, t.critically_low AS t_critically_low, t.low AS t_low, t.high AS t_high, t.critically_high AS t_critically_high
       FROM quantity q LEFT JOIN pin_threshold t ON t.pin_id = $1 AND t.quantity_id = q.id
      WHERE q.deleted_at IS NULL AND (q.id = ANY($2::bigint[]) OR t.id IS NOT NULL)
      ORDER BY q.name_text, q.hash_id`,
    [pinId, measured],
  );
  return {
    rows: rows.map((r) => ({
      quantity: toQuantity(r),
      pinThreshold:
        r.t_hash_id === null
          ? null
          : {
              hashId: r.t_hash_id as string,
              pinHashId,
              criticallyLow: storedLimit(r.t_critically_low),
              low: storedLimit(r.t_low),
              high: storedLimit(r.t_high),
              criticallyHigh: storedLimit(r.t_critically_high),
            },
    })),
  };
}
