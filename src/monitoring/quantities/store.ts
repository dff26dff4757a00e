import { softDelete, type Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { thresholdCache } from '../thresholds/cache.ts';
import { nameText, type Name } from '../../app/names.ts';

interface ValuePair { orderOfMagnitude: number; significand: number }

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

export interface Quantity extends Required<Omit<QuantityInput, 'deviceQuantityHashIds'>> { hashId: string; unit: string | null }

export interface QuantityQuery extends FindQuery {
  includeDeleted?: boolean;
  excludeHashIds?: string[];
  /** only the quantities the forms of these manual report types offer */
  environmentReportTypeHashIds?: string[];
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


export async function addQuantity(db: Queryable, environmentId: number, q: QuantityInput): Promise<string> {
  const hashId = newHashId();
  await db.query(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude,
       default_critically_low_threshold, default_low_threshold, default_high_threshold, default_critically_high_threshold, disable_si_prefixes)
     VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`,
    [hashId, environmentId, JSON.stringify(q.name), nameText(q.name), q.color ?? '#1f77b4', q.unit ?? null, q.defaultOrderOfMagnitude ?? 0,
      JSON.stringify(q.defaultCriticallyLowThreshold ?? null), JSON.stringify(q.defaultLowThreshold ?? null),
      JSON.stringify(q.defaultHighThreshold ?? null), JSON.stringify(q.defaultCriticallyHighThreshold ?? null), q.disableSiPrefixes ?? false],
  );
  return hashId;
}

/**
 * A quantity of the environment; with `measuredOnPins` (a monitoring environment) also one of a supplier that
 * measurements on the environment's pins carry, so that a quantity measurement find shows can be read by its hashId.
 */
export async function getQuantity(db: Queryable, environmentId: number, hashId: string, measuredOnPins = false): Promise<Quantity> {
  const seen = measuredOnPins
    ? ' OR EXISTS (SELECT 1 FROM pin p JOIN measurement m ON m.pin_id = p.id AND m.quantity_id = q.id WHERE p.environment_id = $1)'
    : '';
  const { rows } = await db.query(`SELECT ${QUANTITY_SELECT} FROM quantity q WHERE q.hash_id = $2 AND q.deleted_at IS NULL AND (q.environment_id = $1${seen})`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('quantity', hashId);
  return toQuantity(rows[0]);
}

export async function findQuantities(db: Queryable, environmentId: number, query: QuantityQuery) {
  const where = ['q.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (!query.includeDeleted) where.push('q.deleted_at IS NULL');
  if (query.excludeHashIds?.length) {
    params.push(query.excludeHashIds);
    where.push(`NOT (q.hash_id = ANY($${params.length}::text[]))`);
  }
  if (query.environmentReportTypeHashIds?.length) {
    params.push(query.environmentReportTypeHashIds);
    where.push(`q.id IN (SELECT x.quantity_id FROM report_type_quantity x JOIN report_type rt ON rt.id = x.report_type_id
      WHERE rt.environment_id = $1 AND rt.hash_id = ANY($${params.length}::text[]))`);
  }
  const page = await findPage(db, {
    from: 'quantity q', select: QUANTITY_SELECT, idColumn: 'q.id', where, params,
    sortable: { hashId: 'q.hash_id', name: 'q.name_text' }, search: ['q.name_text', 'q.hash_id', "coalesce(q.unit, '')"], updatedColumn: 'q.updated_at',
  }, query);
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ quantity: toQuantity(r) })) };
}

const COLUMNS: Record<keyof QuantityInput, string> = {
  name: 'name', color: 'color', unit: 'unit', defaultOrderOfMagnitude: 'default_order_of_magnitude',
  defaultCriticallyLowThreshold: 'default_critically_low_threshold', defaultLowThreshold: 'default_low_threshold',
  defaultHighThreshold: 'default_high_threshold', defaultCriticallyHighThreshold: 'default_critically_high_threshold',
  disableSiPrefixes: 'disable_si_prefixes',
  deviceQuantityHashIds: '',
};

const JSON_COLUMNS = new Set<keyof QuantityInput>(['name', 'defaultCriticallyLowThreshold', 'defaultLowThreshold', 'defaultHighThreshold', 'defaultCriticallyHighThreshold']);

/** quantity update; the report path reads a changed quantity's default thresholds again. */
export async function updateQuantity(db: Queryable, environmentId: number, hashId: string, patch: Partial<QuantityInput>): Promise<void> {
  const sets: string[] = [];
  const params: unknown[] = [environmentId, hashId];
  for (const [key, value] of Object.entries(patch) as [keyof QuantityInput, unknown][]) {
    // deviceQuantityHashIds has no column (only an empty list is taken): skipped like an unknown key
    if (value === undefined || !Object.hasOwn(COLUMNS, key) || COLUMNS[key] === '') continue;
    // name and thresholds are jsonb (a plain-string name is a JSON string there); unit is text, where null means no unit
    params.push(JSON_COLUMNS.has(key) ? JSON.stringify(value) : value);
    sets.push(`${COLUMNS[key]} = $${params.length}`);
    if (key === 'name') {
      params.push(nameText(value as Name));
      sets.push(`name_text = $${params.length}`);
    }
  }
  const { rowCount } = await db.query(
    `UPDATE quantity SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`, params);
  if (!rowCount) throw new NotFoundError('quantity', hashId);
  thresholdCache.forgetQuantity(hashId);
}

export async function deleteQuantity(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  // soft delete: measurements keep referring to it
  await softDelete(db, 'quantity', 'quantity', environmentId, hashId);
}
