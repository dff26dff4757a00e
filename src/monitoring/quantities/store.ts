import { softDelete, type Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { ChangeBus } from '../../app/changes.ts';
import { nameText, type Name } from '../../app/names.ts';
import { QUANTITY_SELECT, toQuantity, type QuantityInput } from '../../catalogue/quantities.ts';

export { getQuantity, QUANTITY_SELECT, toQuantity } from '../../catalogue/quantities.ts';
export type { Quantity, QuantityInput } from '../../catalogue/quantities.ts';

export interface QuantityQuery extends FindQuery {
  includeDeleted?: boolean;
  excludeHashIds?: string[];
  /** only the quantities the forms of these manual report types offer */
  environmentReportTypeHashIds?: string[];
}

export async function addQuantity(db: Queryable, environmentId: number, q: QuantityInput): Promise<string> {
  const hashId = newHashId();
  await db.query(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude,
       default_critically_low_threshold, default_low_threshold, default_high_threshold, default_critically_high_threshold, disable_si_prefixes)
     VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`,
    [
      hashId,
      environmentId,
      JSON.stringify(q.name),
      nameText(q.name),
      q.color ?? '#1f77b4',
      q.unit ?? null,
      q.defaultOrderOfMagnitude ?? 0,
      JSON.stringify(q.defaultCriticallyLowThreshold ?? null),
      JSON.stringify(q.defaultLowThreshold ?? null),
      JSON.stringify(q.defaultHighThreshold ?? null),
      JSON.stringify(q.defaultCriticallyHighThreshold ?? null),
      q.disableSiPrefixes ?? false,
    ],
  );
  return hashId;
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
  const page = await findPage(
    db,
    {
      from: 'quantity q',
      select: QUANTITY_SELECT,
      idColumn: 'q.id',
      where,
      params,
      sortable: { hashId: 'q.hash_id', name: 'q.name_text' },
      search: ['q.name_text', 'q.hash_id', "coalesce(q.unit, '')"],
      updatedColumn: 'q.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ quantity: toQuantity(r) })) };
}

const COLUMNS: Record<keyof QuantityInput, string> = {
  name: 'name',
  color: 'color',
  unit: 'unit',
  defaultOrderOfMagnitude: 'default_order_of_magnitude',
  defaultCriticallyLowThreshold: 'default_critically_low_threshold',
  defaultLowThreshold: 'default_low_threshold',
  defaultHighThreshold: 'default_high_threshold',
  defaultCriticallyHighThreshold: 'default_critically_high_threshold',
  disableSiPrefixes: 'disable_si_prefixes',
  deviceQuantityHashIds: '',
};

const JSON_COLUMNS = new Set<keyof QuantityInput>([
  'name',
  'defaultCriticallyLowThreshold',
  'defaultLowThreshold',
  'defaultHighThreshold',
  'defaultCriticallyHighThreshold',
]);

/** quantity update; the report path reads a changed quantity's default thresholds again. */
export async function updateQuantity(
  db: Queryable,
  environmentId: number,
  hashId: string,
  patch: Partial<QuantityInput>,
  changes: Pick<ChangeBus, 'publish'>,
): Promise<void> {
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
    `UPDATE quantity SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`,
    params,
  );
  if (!rowCount) throw new NotFoundError('quantity', hashId);
  // the report path's default limits of the quantity
  await changes.publish('thresholds', { pinIds: [], quantityHashIds: [hashId] });
}

export async function deleteQuantity(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  // soft delete: measurements keep referring to it
  await softDelete(db, 'quantity', 'quantity', environmentId, hashId);
}
