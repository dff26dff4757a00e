import type { Queryable } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { DEVICE_TYPE_SELECT, toDeviceType } from '../../connectivity/device-types/store.ts';

export interface ConnectivityThresholdKey {
  priorityLevel: 1 | 2;
  deviceTypeHashId?: string;
}
export interface ConnectivityThresholdFindQuery extends FindQuery {
  priorityLevel?: 1 | 2;
  deviceTypeHashId?: string;
}

/** A device type a monitoring environment may name: the type of a device it claimed. */
async function deviceTypeIdOf(db: Queryable, environmentId: number, hashId: string | undefined): Promise<number | null> {
  if (hashId === undefined) return null;
  const { rows } = await db.query<{ id: number }>(
    `SELECT t.id FROM device_type t WHERE t.hash_id = $2 AND t.deleted_at IS NULL
        AND EXISTS (SELECT 1 FROM device d WHERE d.device_type_id = t.id AND d.claimed_environment_id = $1)`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new ParameterError(`deviceTypeHashId ${hashId} is not the type of a device this environment claimed`);
  return rows[0].id;
}

/** connectivity-threshold set: creates or replaces the threshold of (priorityLevel, deviceType); null removes it. */
export async function setConnectivityThreshold(
  db: Queryable,
  environmentId: number,
  key: ConnectivityThresholdKey,
  threshold: { missedReports: number; offlineForSeconds: number } | null,
): Promise<void> {
  const typeId = await deviceTypeIdOf(db, environmentId, key.deviceTypeHashId);
  if (threshold === null) {
    await db.query(
      'DELETE FROM connectivity_threshold WHERE environment_id = $1 AND priority_level = $2 AND coalesce(device_type_id, 0) = coalesce($3::bigint, 0)',
      [environmentId, key.priorityLevel, typeId],
    );
    return;
  }
  await db.query(
    `INSERT INTO connectivity_threshold (environment_id, device_type_id, priority_level, missed_reports, offline_for_seconds) VALUES ($1, $3, $2, $4, $5)
     ON CONFLICT (environment_id, priority_level, coalesce(device_type_id, 0))
     DO UPDATE SET missed_reports = EXCLUDED.missed_reports, offline_for_seconds = EXCLUDED.offline_for_seconds, updated_at = now()`,
    [environmentId, key.priorityLevel, typeId, threshold.missedReports, threshold.offlineForSeconds],
  );
}

/** connectivity-threshold find: the environment's thresholds, each with its device type when it has one. */
export async function findConnectivityThresholds(db: Queryable, environmentId: number, query: ConnectivityThresholdFindQuery) {
  const where = ['c.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.priorityLevel !== undefined) {
    params.push(query.priorityLevel);
    where.push(`c.priority_level = $${params.length}`);
  }
  if (query.deviceTypeHashId) {
    params.push(query.deviceTypeHashId);
    where.push(`t.hash_id = $${params.length}`);
  }
  const page = await findPage(
    db,
    {
      from: 'connectivity_threshold c LEFT JOIN device_type t ON t.id = c.device_type_id',
      select: `c.priority_level, c.missed_reports, c.offline_for_seconds, ${DEVICE_TYPE_SELECT}`,
      idColumn: 'c.id',
      where,
      params,
      sortable: { hashId: "coalesce(t.hash_id, '')", priorityLevel: 'c.priority_level', deviceTypeHashId: "coalesce(t.hash_id, '')" },
      search: ["coalesce(t.hash_id, '')"],
      updatedColumn: 'c.updated_at',
    },
    query,
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => {
      const typed = r.type_hash_id !== null;
      return {
        connectivityThreshold: {
          ...(typed ? { deviceTypeHashId: r.type_hash_id as string } : {}),
          priorityLevel: r.priority_level as 1 | 2,
          missedReports: r.missed_reports as number,
          offlineForSeconds: r.offline_for_seconds as number,
        },
        ...(typed ? { deviceType: toDeviceType(r) } : {}),
      };
    }),
  };
}
