import type { Db, Queryable } from '../../app/db.ts';
import { checkEdgeGeometry } from '../graph-schemas.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { refreshBoundingBox } from '../environments/settings.ts';

/**
 * graph find: pin groups, edges and pin group grids of the environment in one list, by name. The
 * rows of the kinds are keyed apart (id * 3 + kind) so the keyset stays unique across them.
 */
export async function findGraph(db: Queryable, environmentId: number, query: FindQuery) {
  const from = `(SELECT 'pinGroup' AS object_type, hash_id, name, id * 3 AS key, environment_id, updated_at FROM pin_group
     UNION ALL SELECT 'edge', hash_id, name, id * 3 + 1, environment_id, updated_at FROM edge
     UNION ALL SELECT 'grid', hash_id, name, id * 3 + 2, environment_id, updated_at FROM grid WHERE type_key = 'pinGroup') o`;
  const page = await findPage(
    db,
    {
      from,
      select: 'o.object_type, o.hash_id, o.name',
      idColumn: 'o.key',
      where: ['o.environment_id = $1'],
      params: [environmentId],
      sortable: { name: 'o.name', hashId: 'o.hash_id' },
      search: ['o.name', 'o.hash_id'],
      updatedColumn: 'o.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'name' },
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => ({ objectType: r.object_type as string, hashId: r.hash_id as string, name: r.name as string })),
  };
}

export type LocationUpdate =
  | { type: 'pinGroup'; hashId: string; geometry: { type: 'Point'; coordinates: [number, number] } | null }
  | { type: 'node'; hashId: string; geometry: { type: 'Point'; coordinates: [number, number] } }
  | { type: 'edge'; hashId: string; geometry: { type: 'LineString' | 'MultiLineString'; coordinates: unknown[] } };

const LOCATED = { pinGroup: ['pin_group', 'pin group'], node: ['node', 'node'], edge: ['edge', 'edge'] } as const;

/** locations update: every geometry or none (an unknown hashId rolls the whole call back). */
export async function updateLocations(db: Db, environmentId: number, items: LocationUpdate[]): Promise<void> {
  // an edge's points in all within the limit that edge add and update keep (what one map tile may cost)
  items.forEach((item, i) => {
    if (item.type === 'edge') checkEdgeGeometry(item.geometry, `${i}.geometry`);
  });
  await db.tx(async (client) => {
    for (const item of items) {
      const [table, what] = LOCATED[item.type];
      const { rowCount } = await client.query(`UPDATE ${table} SET geometry = $3, updated_at = now() WHERE environment_id = $1 AND hash_id = $2`, [
        environmentId,
        item.hashId,
        item.geometry === null ? null : JSON.stringify(item.geometry),
      ]);
      if (!rowCount) throw new NotFoundError(what, item.hashId);
    }
    await refreshBoundingBox(client, environmentId);
  });
}
