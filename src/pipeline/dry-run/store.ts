import type { Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import type { FieldConfiguration } from '../../app/fields.ts';

// What a dry run reads: the code to run and a stored run to replay, each only within the caller's environment.

/** The live device type's id and event handler. */
export async function deviceTypeCode(db: Queryable, environmentId: number, hashId: string): Promise<{ id: number; hashId: string; eventHandler: string }> {
  const { rows } = await db.query<{ id: number; event_handler: string }>(
    'SELECT id, event_handler FROM device_type WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL',
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('device type', hashId);
  return { id: rows[0].id, hashId, eventHandler: rows[0].event_handler };
}

/** The live report type's parser. */
export async function reportTypeCode(db: Queryable, environmentId: number, hashId: string): Promise<{ hashId: string; name: unknown; parser: string }> {
  const { rows } = await db.query<{ name: unknown; parser: string }>(
    'SELECT name, parser FROM report_type WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL',
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('report type', hashId);
  return { hashId, name: rows[0].name, parser: rows[0].parser };
}

const IDENTIFIER_TABLES = { webhook: ['supplier_webhook', 'supplier webhook'], certificate: ['supplier_certificate', 'supplier certificate'] } as const;

/** The identifier of a live supplier webhook or supplier certificate. */
export async function identifierCode(db: Queryable, kind: keyof typeof IDENTIFIER_TABLES, environmentId: number, hashId: string): Promise<string> {
  const [table, noun] = IDENTIFIER_TABLES[kind];
  const { rows } = await db.query<{ identifier: string }>(`SELECT identifier FROM ${table} WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`, [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError(noun, hashId);
  return rows[0].identifier;
}

/** A stored run of the environment's: its trigger, as stored, and its device. */
export async function storedRun(
  db: Queryable,
  environmentId: number,
  hashId: string,
): Promise<{ triggerType: string; triggerData: unknown; deviceHashId: string | null; deviceTypeId: number | null }> {
  const { rows } = await db.query<{ trigger_type: string; trigger_data: unknown; device_hash_id: string | null; device_type_id: number | null }>(
    `SELECT a.trigger_type, a.trigger_data, d.hash_id AS device_hash_id, a.device_type_id
       FROM supplier_activity a LEFT JOIN device d ON d.id = a.device_id
      WHERE a.environment_id = $1 AND a.hash_id = $2`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('activity', hashId);
  const r = rows[0];
  return { triggerType: r.trigger_type, triggerData: r.trigger_data, deviceHashId: r.device_hash_id, deviceTypeId: r.device_type_id };
}

/** An existing device of the environment with this supplier identifier, or null (an identifier's run would create it). */
export async function deviceByIdentifier(
  db: Queryable,
  environmentId: number,
  supplierDeviceIdentifier: string,
): Promise<{ hashId: string; deviceTypeHashId: string } | null> {
  const { rows } = await db.query<{ hash_id: string; type_hash_id: string }>(
    `SELECT d.hash_id, t.hash_id AS type_hash_id FROM device d JOIN device_type t ON t.id = d.device_type_id
      WHERE d.environment_id = $1 AND d.supplier_device_identifier = $2`,
    [environmentId, supplierDeviceIdentifier],
  );
  return rows.length === 0 ? null : { hashId: rows[0].hash_id, deviceTypeHashId: rows[0].type_hash_id };
}

/** Whether the environment has this live device type. */
export async function deviceTypeExists(db: Queryable, environmentId: number, hashId: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM device_type WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL', [environmentId, hashId]);
  return rows.length > 0;
}

/** A device type's field configurations (what setDeviceFields is checked against). */
export async function deviceFieldConfigurations(db: Queryable, deviceTypeId: number): Promise<FieldConfiguration[]> {
  const { rows } = await db.query<{ field_configurations: FieldConfiguration[] }>('SELECT field_configurations FROM device_type WHERE id = $1', [deviceTypeId]);
  return rows[0]?.field_configurations ?? [];
}

/** The last `limit` stored runs of a device type's handler on a device request, newest first, with their devices. */
export async function lastIncomingRequests(
  db: Queryable,
  environmentId: number,
  deviceTypeId: number,
  limit: number,
): Promise<{ hashId: string; createdAt: string; triggerType: string; triggerData: unknown; deviceHashId: string | null }[]> {
  // newest first by id, the order of the (environment_id, id) index: created_at of one batch is one timestamp
  const { rows } = await db.query<{ hash_id: string; created_at: Date; trigger_type: string; trigger_data: unknown; device_hash_id: string | null }>(
    `SELECT a.hash_id, a.created_at, a.trigger_type, a.trigger_data, d.hash_id AS device_hash_id
       FROM supplier_activity a LEFT JOIN device d ON d.id = a.device_id
      WHERE a.environment_id = $1 AND a.device_type_id = $2 AND a.trigger_type = 'handleIncomingRequest'
      ORDER BY a.id DESC LIMIT $3`,
    [environmentId, deviceTypeId, limit],
  );
  return rows.map((r) => ({
    hashId: r.hash_id,
    createdAt: r.created_at.toISOString(),
    triggerType: r.trigger_type,
    triggerData: r.trigger_data,
    deviceHashId: r.device_hash_id,
  }));
}

/** Activities a report type compare looks through for its payloads, newest first: a bound on the rows one compare reads. */
const PAYLOAD_SCAN_ACTIVITIES = 5000;

/**
 * The payloads of the last `limit` parseReport calls of a report type in the environment's last PAYLOAD_SCAN_ACTIVITIES
 * activities, newest first; payloads stored cut short (ACTIVITY_MAX_BYTES) are left out.
 */
export async function lastParsedPayloads(
  db: Queryable,
  environmentId: number,
  reportTypeHashId: string,
  limit: number,
): Promise<{ activityHashId: string; subActivityHashId: string; createdAt: string; deviceHashId: string | null; payload: string }[]> {
  const { rows } = await db.query<{ hash_id: string; sub_hash_id: string; created_at: Date; device_hash_id: string | null; payload: string }>(
    `SELECT a.hash_id, sub.value->>'hashId' AS sub_hash_id, a.created_at, d.hash_id AS device_hash_id, sub.value->'triggerData'->>'payload' AS payload
       FROM (SELECT id, hash_id, created_at, device_id, activities FROM supplier_activity WHERE environment_id = $1 ORDER BY id DESC LIMIT ${PAYLOAD_SCAN_ACTIVITIES}) a
       CROSS JOIN LATERAL json_array_elements(a.activities) WITH ORDINALITY AS sub(value, n)
       LEFT JOIN device d ON d.id = a.device_id
      WHERE sub.value->>'triggerType' = 'parseReport' AND sub.value->'triggerData'->'reportType'->>'hashId' = $2
        AND json_typeof(sub.value->'triggerData'->'payload') = 'string'
      ORDER BY a.id DESC, sub.n DESC LIMIT $3`,
    [environmentId, reportTypeHashId, limit],
  );
  return rows.map((r) => ({
    activityHashId: r.hash_id,
    subActivityHashId: r.sub_hash_id,
    createdAt: r.created_at.toISOString(),
    deviceHashId: r.device_hash_id,
    payload: r.payload,
  }));
}
