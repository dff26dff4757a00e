// Quantities as both kinds of environment read them: a device type's charts (connectivity) and every monitoring view
// name them. The catalogue sits below the features that share it; monitoring's quantity routes write them.
import type { Queryable } from '../app/db.ts';
import { NotFoundError } from '../app/errors.ts';
import type { Name } from '../app/names.ts';

export interface ValuePair {
  orderOfMagnitude: number;
  significand: number;
}

export interface QuantityInput {
  name: Name;
  color?: string;
  /** null: the quantity has no unit */
  unit?: string | null;
  defaultOrderOfMagnitude?: number;
  defaultCriticallyLowThreshold?: ValuePair | null;
  defaultLowThreshold?: ValuePair | null;
  defaultHighThreshold?: ValuePair | null;
  defaultCriticallyHighThreshold?: ValuePair | null;
  disableSiPrefixes?: boolean;
  deviceQuantityHashIds?: string[];
}

export interface Quantity extends Required<Omit<QuantityInput, 'deviceQuantityHashIds'>> {
  hashId: string;
  unit: string | null;
}

/** The Quantity model's columns of `quantity q`. */
export const QUANTITY_SELECT = `q.hash_id, q.name, q.color, q.unit, q.default_order_of_magnitude, q.default_critically_low_threshold,
  q.default_low_threshold, q.default_high_threshold, q.default_critically_high_threshold, q.disable_si_prefixes`;

export function toQuantity(r: Record<string, unknown>): Quantity {
  return {
    hashId: r.hash_id as string,
    name: r.name as Name,
    color: r.color as string,
    unit: r.unit as string | null,
    defaultOrderOfMagnitude: r.default_order_of_magnitude as number,
    defaultCriticallyLowThreshold: r.default_critically_low_threshold as ValuePair | null,
    defaultLowThreshold: r.default_low_threshold as ValuePair | null,
    defaultHighThreshold: r.default_high_threshold as ValuePair | null,
    defaultCriticallyHighThreshold: r.default_critically_high_threshold as ValuePair | null,
    disableSiPrefixes: r.disable_si_prefixes as boolean,
  };
}

/**
 * A quantity of the environment; with `measuredOnPins` (a monitoring environment) also one of a supplier that
 * measurements on the environment's pins carry, so that a quantity measurement find shows can be read by its hashId.
 */
export async function getQuantity(db: Queryable, environmentId: number, hashId: string, measuredOnPins = false): Promise<Quantity> {
  const seen = measuredOnPins
    ? ' OR EXISTS (SELECT 1 FROM pin p JOIN measurement m ON m.pin_id = p.id AND m.quantity_id = q.id WHERE p.environment_id = $1)'
    : '';
  const { rows } = await db.query(
    `SELECT ${QUANTITY_SELECT} FROM quantity q WHERE q.hash_id = $2 AND q.deleted_at IS NULL AND (q.environment_id = $1${seen})`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('quantity', hashId);
  return toQuantity(rows[0]);
}
