import { softDelete, type Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';

/** The seed's DeviceConnectivityCounterKey. */
export interface CounterKey {
  hashId: string;
  name: string;
}

const SELECT = 'k.id, k.hash_id, k.name';
const toCounterKey = (r: Record<string, unknown>): CounterKey => ({ hashId: r.hash_id as string, name: r.name as string });

export async function addCounterKey(db: Queryable, environmentId: number, input: { name: string }): Promise<string> {
  const hashId = newHashId();
  await db.query('INSERT INTO connectivity_counter_key (hash_id, environment_id, name) VALUES ($1, $2, $3)', [hashId, environmentId, input.name]);
  return hashId;
}

export async function getCounterKey(db: Queryable, environmentId: number, hashId: string): Promise<CounterKey> {
  const { rows } = await db.query(`SELECT ${SELECT} FROM connectivity_counter_key k WHERE k.environment_id = $1 AND k.hash_id = $2 AND k.deleted_at IS NULL`, [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError('deviceConnectivityCounterKey', hashId);
  return toCounterKey(rows[0]);
}

/** Rows are the keys themselves, `{hashId, name}`, like the get. */
export async function findCounterKeys(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: 'connectivity_counter_key k',
      select: SELECT,
      idColumn: 'k.id',
      where: ['k.environment_id = $1', 'k.deleted_at IS NULL'],
      params: [environmentId],
      sortable: { hashId: 'k.hash_id', name: 'k.name' },
      search: ['k.name', 'k.hash_id'],
      updatedColumn: 'k.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(toCounterKey) };
}

export async function updateCounterKey(db: Queryable, environmentId: number, hashId: string, patch: { name?: string }): Promise<void> {
  const { rowCount } = await db.query(
    'UPDATE connectivity_counter_key SET name = COALESCE($3, name), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL',
    [environmentId, hashId, patch.name ?? null],
  );
  if (!rowCount) throw new NotFoundError('deviceConnectivityCounterKey', hashId);
}

/** Soft delete. */
export async function deleteCounterKey(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  await softDelete(db, 'connectivity_counter_key', 'deviceConnectivityCounterKey', environmentId, hashId);
}
