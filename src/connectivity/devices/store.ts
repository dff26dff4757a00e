import type { AppContext } from '../../app/context.ts';
import { namedStatement, type Db, type Queryable } from '../../app/db.ts';
import { ConflictError, NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { encryptSecret } from '../../app/keys.ts';
import { DEVICE_TYPE_SELECT, loadDeviceType, toDeviceType } from '../device-types/store.ts';
import { pskAad } from './credentials.ts';
import { applyFieldsUpdate, defaultFields, identifierOf, type Fields, type FieldsUpdate } from './fields.ts';

export interface Device {
  hashId: string;
  supplierHashId: string;
  supplierDeviceIdentifier: string;
  deviceTypeHashId: string;
  fields: Fields;
  measurementCycle: unknown;
  nextReportBefore: string | null;
  lastOnlineAt: string | null;
  validated: boolean;
  userFacingIdentifier: string;
}

/**
 * Columns of a device's JSON. The query joins `environment de` on the device's environment and
 * the device's own type under `typeAlias`. Never selects the sealed key.
 */
export const deviceSelect = (typeAlias: string) => `d.id AS device_id, d.hash_id AS device_hash_id, de.hash_id AS device_env_hash_id,
  d.supplier_device_identifier, ${typeAlias}.hash_id AS device_type_hash_id, d.fields AS device_fields, d.measurement_cycle,
  d.next_report_before, d.last_online_at, d.validated, d.user_facing_identifier`;

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

export function toDevice(r: Record<string, unknown>): Device {
  return {
    hashId: r.device_hash_id as string,
    supplierHashId: r.device_env_hash_id as string,
    supplierDeviceIdentifier: r.supplier_device_identifier as string,
    deviceTypeHashId: r.device_type_hash_id as string,
    fields: r.device_fields as Fields,
    measurementCycle: r.measurement_cycle ?? null,
    nextReportBefore: iso(r.next_report_before),
    lastOnlineAt: iso(r.last_online_at),
    validated: r.validated as boolean,
    // without an identifier field the hashId is what users see
    userFacingIdentifier: (r.user_facing_identifier as string | null) ?? (r.device_hash_id as string),
  };
}

const FROM = `device d JOIN environment de ON de.id = d.environment_id JOIN device_type t ON t.id = d.device_type_id
  LEFT JOIN environment ce ON ce.id = d.claimed_environment_id`;
const SELECT = `${deviceSelect('t')}, ${DEVICE_TYPE_SELECT}, ce.hash_id AS claimed_env_hash_id, ce.name AS claimed_env_name`;

function toRow(r: Record<string, unknown>) {
  // environmentName/-HashId name the monitoring environment that claimed the device (null while
  // the supplier holds it) and pinGroup its location there: linking arrives with the monitoring side
  return {
    device: toDevice(r),
    deviceType: toDeviceType(r),
    environmentName: (r.claimed_env_name as string | null) ?? null,
    environmentHashId: (r.claimed_env_hash_id as string | null) ?? null,
    pinGroup: null,
  };
}

export interface AddWithPsk {
  supplierDeviceIdentifier: string;
  deviceTypeHashId: string;
  /** hexadecimal, validated by the route */
  psk: string;
  pskIdentity: string;
}

const isUniqueViolation = (err: unknown): err is { code: string; constraint?: string } =>
  typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';

export async function addDeviceWithPsk(ctx: Pick<AppContext, 'db' | 'keys' | 'changes'>, environmentId: number, input: AddWithPsk): Promise<string> {
  const type = await loadDeviceType(ctx.db, environmentId, input.deviceTypeHashId);
  const fields = defaultFields(type.deviceType.fieldConfigurations);
  const hashId = newHashId();
  const sealed = encryptSecret(ctx.keys.pskEncryption, Buffer.from(input.psk, 'hex'), pskAad(input.pskIdentity));
  try {
    await ctx.db.query(
      `INSERT INTO device (hash_id, environment_id, device_type_id, supplier_device_identifier, user_facing_identifier, fields, psk_identity, psk_sealed)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        hashId,
        environmentId,
        type.id,
        input.supplierDeviceIdentifier,
        identifierOf(fields, type.deviceType.identifierFieldKey),
        JSON.stringify(fields),
        input.pskIdentity,
        sealed,
      ],
    );
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    // the identity is unique across the deployment, so this may be another tenant's device: say nothing about it
    if (err.constraint?.includes('psk_identity')) throw new ConflictError(`pskIdentity ${input.pskIdentity} is already in use`);
    throw new ConflictError(`supplierDeviceIdentifier ${input.supplierDeviceIdentifier} is already used by another device of this environment`);
  }
  // a device that knocked before it was provisioned left a short "unknown identity" entry
  await ctx.changes.publish('credentials', { identities: [input.pskIdentity] });
  return hashId;
}

export async function getDevice(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT ${SELECT} FROM ${FROM} WHERE d.environment_id = $1 AND d.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('device', hashId);
  return toRow(rows[0]);
}

export interface DeviceQuery extends FindQuery {
  /** the SDK's filter: devices whose type can receive commands of this type */
  forCommandTypeHashId?: string;
}

export async function findDevices(db: Queryable, environmentId: number, query: DeviceQuery) {
  const where = ['d.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.forCommandTypeHashId) {
    params.push(query.forCommandTypeHashId);
    where.push(`t.command_type_hash_ids @> jsonb_build_array($${params.length}::text)`);
  }
  const page = await findPage(
    db,
    {
      from: FROM,
      select: SELECT,
      idColumn: 'd.id',
      where,
      params,
      sortable: { hashId: 'd.hash_id', supplierDeviceIdentifier: 'd.supplier_device_identifier' },
      search: ['d.hash_id', 'd.supplier_device_identifier', "COALESCE(d.user_facing_identifier, '')"],
      updatedColumn: 'd.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(toRow) };
}

export async function updateDevice(db: Db, environmentId: number, hashId: string, update: FieldsUpdate): Promise<{ device: Device }> {
  return { device: (await updateDeviceFields(db, environmentId, hashId, update)).device };
}

/** Applies a fields update (validated against the device type) and returns the device with the fields before and after. */
export async function updateDeviceFields(
  db: Db,
  environmentId: number,
  hashId: string,
  update: FieldsUpdate,
): Promise<{ device: Device; before: Fields; after: Fields }> {
  return db.tx(async (client) => {
    const { rows } = await client.query(`SELECT ${SELECT} FROM ${FROM} WHERE d.environment_id = $1 AND d.hash_id = $2 FOR UPDATE OF d`, [
      environmentId,
      hashId,
    ]);
    if (rows.length === 0) throw new NotFoundError('device', hashId);
    const type = toDeviceType(rows[0]);
    const before = rows[0].device_fields as Fields;
    const fields = applyFieldsUpdate(type.fieldConfigurations, before, update);
    await client.query('UPDATE device SET fields = $2, user_facing_identifier = $3, updated_at = now() WHERE id = $1', [
      rows[0].device_id,
      JSON.stringify(fields),
      identifierOf(fields, type.identifierFieldKey),
    ]);
    return {
      device: toDevice({ ...rows[0], device_fields: fields, user_facing_identifier: identifierOf(fields, type.identifierFieldKey) }),
      before,
      after: fields,
    };
  });
}

const TOUCH_DEVICES = namedStatement(
  'touch-devices',
  `UPDATE device d SET last_online_at = GREATEST(d.last_online_at, v.at)
  FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, at) WHERE d.id = v.id`,
);

/** Moves each device's lastOnlineAt to its contact time (never back): one statement for all of them. */
export async function touchDevices(db: Queryable, latest: Map<number, Date>): Promise<void> {
  await db.query(TOUCH_DEVICES, [[...latest.keys()], [...latest.values()]]);
}

/** The device expects its next report before `before` (exec.expectNextReportBefore). */
export async function setNextReportBefore(db: Queryable, deviceId: number, before: string | null): Promise<void> {
  await db.query('UPDATE device SET next_report_before = $2, updated_at = now() WHERE id = $1', [deviceId, before]);
}

/** Deletes all of `hashIds` or none: one of another environment (or unknown) is a not_found_error, a claimed one a conflict_error. */
export async function deleteDevices(ctx: Pick<AppContext, 'db' | 'changes'>, environmentId: number, hashIds: string[]): Promise<void> {
  const wanted = [...new Set(hashIds)];
  const identities = await ctx.db.tx(async (client) => {
    const { rows } = await client.query<{ id: number; hash_id: string; psk_identity: string | null; claimed: boolean }>(
      `SELECT id, hash_id, psk_identity, claimed_environment_id IS NOT NULL AS claimed FROM device
        WHERE environment_id = $1 AND hash_id = ANY($2) FOR UPDATE`,
      [environmentId, wanted],
    );
    const found = new Set(rows.map((r) => r.hash_id));
    const missing = wanted.filter((h) => !found.has(h));
    if (missing.length > 0) throw new NotFoundError(missing.length === 1 ? 'device' : 'devices', missing.join(', '));
    const claimed = rows.filter((r) => r.claimed).map((r) => r.hash_id);
    if (claimed.length > 0) {
      throw new ConflictError(
        `device ${claimed.join(', ')} is claimed by a monitoring environment and cannot be deleted until it is unclaimed; nothing was deleted`,
      );
    }
    await client.query('DELETE FROM device WHERE id = ANY($1)', [rows.map((r) => r.id)]);
    return rows.map((r) => r.psk_identity);
  });
  await ctx.changes.publish('credentials', { identities: identities.filter((i): i is string => i !== null) });
}
