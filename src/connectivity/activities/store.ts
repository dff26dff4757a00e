import { namedStatement, recentlyStored, RETRY_HORIZON, type Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { replacedMessage, storableJson } from '../../app/storable.ts';
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

const INPUT = `x AS (SELECT * FROM json_to_recordset($1::json)
    AS x(h text, e bigint, d bigint, t bigint, tt text, td json, f boolean, l json, a json, s timestamptz, fin timestamptz))`;
// the table is partitioned by created_at (migration 032), which a retry does not repeat: its first run's row is found by hashId in the last RETRY_HORIZON
const INSERT_NEW = `INSERT INTO supplier_activity (hash_id, environment_id, device_id, device_type_id, trigger_type, trigger_data, failed, log, activities, started_at, finished_at)
  SELECT x.h, x.e, x.d, x.t, x.tt, x.td, x.f, x.l, x.a, x.s, x.fin FROM x
   WHERE NOT EXISTS (SELECT 1 FROM supplier_activity a WHERE a.hash_id = x.h AND ${recentlyStored('a.created_at')})`;
/** Rows of the last RETRY_HORIZON with a hashId of `hashIds` (SQL giving an array), found through the hashId index. */
const storedOf = (hashIds: string) =>
  `a.hash_id = ANY(${hashIds}) AND a.created_at > now() - interval '${RETRY_HORIZON}' AND a.created_at <= now() AND a.hash_id = x.h`;

/**
 * A batch of activities as one JSON array, one fixed statement whatever the batch size: prepared
 * once per connection (a multi-row VALUES list is a new statement, parsed and planned again, for
 * every batch size). Idempotent: a retried job writes the same hashIds again, and those rows are skipped,
 * unless the row there is the record of a job given up on (src/pipeline/given-up.ts) and this run succeeded.
 * Both parts see the rows as they were before the statement: a row updated is not inserted again.
 */
const INSERT_ACTIVITIES = namedStatement(
  'insert-activities',
  `WITH ${INPUT}, replaced AS (
    UPDATE supplier_activity a SET trigger_data = x.td, failed = x.f, log = x.l, activities = x.a, started_at = x.s, finished_at = x.fin
      FROM x WHERE ${storedOf('ARRAY(SELECT h FROM x WHERE NOT f)')} AND a.failed)
  ${INSERT_NEW}`,
);

/** The run of a job given up on: its activity says so, whether or not the run had written it already. */
const GIVEN_UP_ACTIVITY = `WITH ${INPUT}, marked AS (
    UPDATE supplier_activity a SET failed = true, log = (a.log::jsonb || x.l::jsonb)::json, finished_at = x.fin
      FROM x WHERE ${storedOf('ARRAY(SELECT h FROM x)')})
  ${INSERT_NEW}`;

/**
 * Stores a batch of activities in one statement. Each row is made storable first, alone: bounded
 * to `maxBytes` of JSON (ACTIVITY_MAX_BYTES, the context's `config.supplierCode.maxActivityBytes`) and with NUL and unpaired surrogates replaced (jsonb refuses both), each
 * said in an error line of the row's log, so one poisoned row neither fails nor hides the others.
 */
export async function insertActivities(db: Queryable, rows: ActivityRow[], maxBytes: number): Promise<void> {
  if (rows.length === 0) return;
  await db.query(INSERT_ACTIVITIES, [`[${rows.map((r) => storableRow(r, maxBytes)).join(',')}]`]);
}

/** Records a run given up on as failed: a new row, or the run's own row marked failed with `row.log` added to its log. */
export async function recordGivenUpActivity(db: Queryable, row: ActivityRow, maxBytes: number): Promise<void> {
  await db.query(GIVEN_UP_ACTIVITY, [`[${storableRow(row, maxBytes)}]`]);
}

type LogLine = ActivityRow['log'][number];
interface SubActivityShape {
  log?: unknown;
  triggerData?: unknown;
}

/** The JSON of a row as stored. */
function storableRow(r: ActivityRow, maxBytes: number): string {
  let row = r;
  const object = (log: LogLine[]) => ({
    h: row.hashId,
    e: row.environmentId,
    d: row.deviceId,
    t: row.deviceTypeId,
    tt: row.triggerType,
    td: row.triggerData ?? null,
    f: row.failed,
    // the times as strings: a Date in the object takes JSON.stringify off its fast path (3x slower for the whole row)
    l: log,
    a: row.activities,
    s: row.startedAt.toISOString(),
    fin: row.finishedAt.toISOString(),
  });
  let json: string | null;
  try {
    json = JSON.stringify(object(row.log));
  } catch {
    json = null;
  }
  // the common case costs one JSON.stringify and one scan; only a large or unserialisable row is measured part by part
  if (json === null || (json.length * 3 > maxBytes && Buffer.byteLength(json) > maxBytes)) {
    row = boundActivity(r, maxBytes);
    json = JSON.stringify(object(row.log));
  }
  const first = storableJson(json);
  if (first.replaced === 0) return first.json;
  return storableJson(JSON.stringify(object([...row.log, { type: 'error', message: replacedMessage(first.replaced, 'this activity') }]))).json;
}

const PREVIEW_CHARS = 200;

function jsonBytes(value: unknown): { json: string; bytes: number } | null {
  try {
    const json = JSON.stringify(value ?? null);
    return { json, bytes: Buffer.byteLength(json) };
  } catch {
    // nested too deep for JSON.stringify (or otherwise not serialisable)
    return null;
  }
}

/**
 * The activity within `maxBytes` of JSON: its parts (triggerData, log; then each sub-activity's) are
 * kept in order while they fit; a triggerData that does not is stored as a preview marked
 * `truncated: true`, a log keeps the lines that fit and says how many it lost.
 */
export function boundActivity(r: ActivityRow, maxBytes: number): ActivityRow {
  const subs = r.activities as SubActivityShape[];
  const sizes = [jsonBytes(r.triggerData), jsonBytes(r.log), ...subs.flatMap((a) => [jsonBytes(a?.triggerData), jsonBytes(a?.log)])];
  const total = sizes.reduce((sum, s) => sum + (s?.bytes ?? Infinity), 0);
  if (total <= maxBytes) return r;
  let budget = maxBytes;
  let cut = 0;
  const fitData = (size: { json: string; bytes: number } | null, data: unknown): unknown => {
    if (size && size.bytes <= budget) {
      budget -= size.bytes;
      return data;
    }
    cut++;
    const preview = size && budget > PREVIEW_CHARS * 3 ? size.json.slice(0, PREVIEW_CHARS).replace(/[\ud800-\udbff]$/, '') : undefined;
    const marker = {
      truncated: true,
      bytes: size?.bytes ?? null,
      limit: maxBytes,
      reason: size ? 'ACTIVITY_MAX_BYTES' : 'not serialisable as JSON (nested too deep)',
      ...(preview !== undefined ? { preview } : {}),
    };
    budget -= JSON.stringify(marker).length;
    return marker;
  };
  const fitLog = (size: { json: string; bytes: number } | null, log: unknown): unknown => {
    if (size && size.bytes <= budget) {
      budget -= size.bytes;
      return log;
    }
    if (!Array.isArray(log)) return fitData(size, log);
    if (log.length === 0) return log;
    cut++;
    const kept: unknown[] = [];
    for (const line of log) {
      const b = jsonBytes(line);
      if (!b || b.bytes > budget) break;
      budget -= b.bytes;
      kept.push(line);
    }
    kept.push({ type: 'error', message: `${log.length - kept.length} more log lines not stored (ACTIVITY_MAX_BYTES: ${maxBytes} bytes per activity)` });
    return kept;
  };
  const triggerData = fitData(sizes[0], r.triggerData);
  const log = [...(fitLog(sizes[1], r.log) as LogLine[])];
  const activities = subs.map((a, i) => {
    if (a === null || typeof a !== 'object') return a;
    return { ...a, triggerData: fitData(sizes[2 + 2 * i], a.triggerData), log: fitLog(sizes[3 + 2 * i], a.log) };
  });
  const totalText = Number.isFinite(total) ? `${total} bytes of JSON` : 'not serialisable as JSON';
  log.push({
    type: 'error',
    message: `this activity is ${totalText}, over the limit of ${maxBytes} (ACTIVITY_MAX_BYTES): ${cut} parts stored cut short, marked "truncated": true or with a line saying how many log lines were lost`,
  });
  return { ...r, triggerData, log, activities };
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
  const page = await findPage(
    db,
    {
      from: FROM,
      select: SELECT,
      idColumn: 'a.id',
      where,
      params,
      // millisecond precision: the page offset carries the sort value as an ISO string, and rows of one
      // batch share a microsecond timestamp that an ISO string cannot hold
      sortable: { createdAt: "date_trunc('milliseconds', a.created_at)", hashId: 'a.hash_id' },
      search: ['a.hash_id', 'a.trigger_type', 'd.hash_id', 'd.supplier_device_identifier'],
      updatedColumn: 'a.created_at',
    },
    { ...query, sortBy: query.sortBy ?? 'createdAt' },
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(summary) };
}

/** One activity in the SDK's shape (./view.ts). */
export async function getActivity(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT ${SELECT}, a.trigger_data, a.log, a.activities FROM ${FROM} WHERE a.environment_id = $1 AND a.hash_id = $2`, [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError('activity', hashId);
  const { activity, device, deviceType } = summary(rows[0]);
  const r = rows[0];
  const stored: StoredActivity = {
    ...activity,
    log: r.log as StoredActivity['log'],
    triggerData: r.trigger_data,
    activities: (r.activities ?? []) as StoredActivity['activities'],
  };
  const reportTypes = await reportTypesByHashId(db, environmentId, reportTypeHashIds([stored]));
  return { device, deviceType, activity: activityView(stored, reportTypes) };
}
