import { namedStatement, type Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { DEVICE_TYPE_SELECT, toDeviceType } from '../device-types/store.ts';
import { deviceSelect, toDevice } from '../devices/store.ts';
import { reportTypesByHashId } from '../report-types/store.ts';
import { activityView, reportTypeHashIds, type StoredActivity } from './view.ts';

/** One run of supplier code as the worker records it. */
export interface ActivityRow {
  hashId: string;
  environmentId: number;
  deviceId: number | null;
  deviceTypeId: number | null;
  triggerType: string;
  triggerData: unknown;
  failed: boolean;
  log: { type: 'log' | 'error'; message: string }[];
  activities: unknown[];
  startedAt: Date;
  finishedAt: Date;
}

/**
 * A batch of activities as one JSON array, one fixed statement whatever the batch size: prepared
 * once per connection (a multi-row VALUES list is a new statement, parsed and planned again, for
 * every batch size). Idempotent: a retried job writes the same hashIds again, and those rows are skipped.
 */
const INSERT_ACTIVITIES = namedStatement('insert-activities', `
  INSERT INTO supplier_activity (hash_id, environment_id, device_id, device_type_id, trigger_type, trigger_data, failed, log, activities, started_at, finished_at)
  SELECT x.h, x.e, x.d, x.t, x.tt, x.td, x.f, x.l, x.a, x.s, x.fin
    FROM json_to_recordset($1::json) AS x(h text, e bigint, d bigint, t bigint, tt text, td json, f boolean, l json, a json, s timestamptz, fin timestamptz)
  ON CONFLICT (hash_id) DO NOTHING`);

/** Stores a batch of activities in one statement. */
export async function insertActivities(db: Queryable, rows: ActivityRow[]): Promise<void> {
  if (rows.length === 0) return;
  const json = JSON.stringify(rows.map((r) => ({
    h: r.hashId, e: r.environmentId, d: r.deviceId, t: r.deviceTypeId, tt: r.triggerType, td: r.triggerData ?? null, f: r.failed,
    l: r.log, a: r.activities, s: r.startedAt, fin: r.finishedAt,
  })));
  await db.query(INSERT_ACTIVITIES, [json]);
}

// the device and the type are shown as they are now, deleted type included: the activity happened under it
const FROM = `supplier_activity a
  LEFT JOIN device d ON d.id = a.device_id
  LEFT JOIN environment de ON de.id = d.environment_id
  LEFT JOIN device_type dt ON dt.id = d.device_type_id
  LEFT JOIN device_type t ON t.id = a.device_type_id`;
const SELECT = `a.hash_id AS activity_hash_id, a.created_at AS activity_created_at, a.trigger_type, a.failed, ${deviceSelect('dt')}, ${DEVICE_TYPE_SELECT}`;

function summary(r: Record<string, unknown>) {
  return {
    activity: {
      hashId: r.activity_hash_id as string,
      createdAt: (r.activity_created_at as Date).toISOString(),
      triggerType: r.trigger_type as string,
      failed: r.failed as boolean,
    },
    device: r.device_id === null ? null : toDevice(r),
    deviceType: r.type_id === null ? null : toDeviceType(r),
  };
}

export interface ActivityQuery extends FindQuery {
  deviceHashId?: string | null;
  deviceTypeHashId?: string | null;
  triggerType?: string;
  failed?: boolean;
}

/** The environment's activities, newest first by default; filters per the SDK's query. */
export async function findActivities(db: Queryable, environmentId: number, query: ActivityQuery) {
  const where = ['a.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.deviceHashId) {
    params.push(query.deviceHashId);
    where.push(`d.hash_id = $${params.length}`);
  }
  if (query.deviceTypeHashId) {
    params.push(query.deviceTypeHashId);
    where.push(`t.hash_id = $${params.length}`);
  }
  if (query.triggerType) {
    params.push(query.triggerType);
    where.push(`a.trigger_type = $${params.length}`);
  }
  if (query.failed !== undefined) {
    params.push(query.failed);
    where.push(`a.failed = $${params.length}`);
  }
  const page = await findPage(db, {
    from: FROM, select: SELECT, idColumn: 'a.id', where, params,
    // millisecond precision: the page offset carries the sort value as an ISO string, and rows of one
    // batch share a microsecond timestamp that an ISO string cannot hold
    sortable: { createdAt: "date_trunc('milliseconds', a.created_at)", hashId: 'a.hash_id' },
    search: ['a.hash_id', 'a.trigger_type', 'd.hash_id', 'd.supplier_device_identifier'],
    updatedColumn: 'a.created_at',
  }, { ...query, sortBy: query.sortBy ?? 'createdAt' });
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(summary) };
}

/** One activity in the SDK's shape (./view.ts). */
export async function getActivity(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(
    `SELECT ${SELECT}, a.trigger_data, a.log, a.activities FROM ${FROM} WHERE a.environment_id = $1 AND a.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('activity', hashId);
  const { activity, device, deviceType } = summary(rows[0]);
  const r = rows[0];
  const stored: StoredActivity = { ...activity, log: r.log as StoredActivity['log'], triggerData: r.trigger_data, activities: (r.activities ?? []) as StoredActivity['activities'] };
  const reportTypes = await reportTypesByHashId(db, environmentId, reportTypeHashIds([stored]));
  return { device, deviceType, activity: activityView(stored, reportTypes) };
}
