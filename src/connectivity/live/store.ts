import type { Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';

/** A stream's filters as the ids its notices carry; a device or device type of another environment is one that does not exist. */
export async function streamFilter(
  db: Queryable,
  environmentId: number,
  query: { deviceHashId?: string; deviceTypeHashId?: string },
): Promise<{ deviceId: number | null; deviceTypeId: number | null }> {
  const idOf = async (table: 'device' | 'device_type', noun: string, hashId: string | undefined) => {
    if (hashId === undefined) return null;
    const { rows } = await db.query<{ id: string }>(`SELECT id FROM ${table} WHERE environment_id = $1 AND hash_id = $2`, [environmentId, hashId]);
    if (rows.length === 0) throw new NotFoundError(noun, hashId);
    return Number(rows[0].id);
  };
  return { deviceId: await idOf('device', 'device', query.deviceHashId), deviceTypeId: await idOf('device_type', 'device type', query.deviceTypeHashId) };
}
