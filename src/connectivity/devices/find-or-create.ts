import type { AppContext } from '../../app/context.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { newHashId } from '../../app/hash-id.ts';
import { toDeviceType, DEVICE_TYPE_SELECT } from '../device-types/store.ts';
import { defaultFields, identifierOf } from './fields.ts';

export interface FindOrCreateInput {
  /**
   * the connectivity environment, by id or by hashId; with both, the caller vouches that they name
   * one live connectivity environment (it just loaded them), and the lookup is skipped
   */
  environmentId?: number;
  environmentHashId?: string;
  /** the type a new device gets; an existing device keeps its own */
  deviceTypeHashId: string;
  supplierDeviceIdentifier: string;
}

export interface FoundDevice {
  id: number;
  hashId: string;
  environmentId: number;
  environmentHashId: string;
  /** the device's own type: for an existing device it may differ from the one asked for */
  deviceTypeHashId: string;
  created: boolean;
}

/** Same bound as the device add route: the identifier is stored and shown. */
export const SUPPLIER_DEVICE_IDENTIFIER_MAX = 255;

async function resolveEnvironment(ctx: Pick<AppContext, 'db'>, input: FindOrCreateInput): Promise<{ id: number; hashId: string }> {
  if (input.environmentId !== undefined && input.environmentHashId !== undefined) return { id: input.environmentId, hashId: input.environmentHashId };
  const byId = input.environmentId !== undefined;
  const { rows } = await ctx.db.query<{ id: number; hash_id: string }>(
    `SELECT id, hash_id FROM environment WHERE ${byId ? 'id' : 'hash_id'} = $1 AND type = 'connectivity' AND deleted_at IS NULL`,
    [byId ? input.environmentId : input.environmentHashId],
  );
  if (rows.length === 0) throw new NotFoundError('environment', String(byId ? input.environmentId : input.environmentHashId));
  return { id: rows[0].id, hashId: rows[0].hash_id };
}

async function existing(ctx: Pick<AppContext, 'db'>, env: { id: number; hashId: string }, identifier: string): Promise<FoundDevice | null> {
  const { rows } = await ctx.db.query<{ id: number; hash_id: string; type_hash_id: string; type_deleted: boolean }>(
    `SELECT d.id, d.hash_id, t.hash_id AS type_hash_id, t.deleted_at IS NOT NULL AS type_deleted
       FROM device d JOIN device_type t ON t.id = d.device_type_id
      WHERE d.environment_id = $1 AND d.supplier_device_identifier = $2`,
    [env.id, identifier],
  );
  if (rows.length === 0) return null;
  // a deleted device type cuts its devices off the gateway; a webhook or certificate must not revive them
  if (rows[0].type_deleted) {
    throw new ParameterError(
      `supplierDeviceIdentifier ${identifier} belongs to device ${rows[0].hash_id}, whose device type ${rows[0].type_hash_id} was deleted`,
      { field: 'supplierDeviceIdentifier' },
    );
  }
  return {
    id: rows[0].id,
    hashId: rows[0].hash_id,
    environmentId: env.id,
    environmentHashId: env.hashId,
    deviceTypeHashId: rows[0].type_hash_id,
    created: false,
  };
}

/**
 * The device with `supplierDeviceIdentifier` in a connectivity environment, created with the
 * (live, same-environment) `deviceTypeHashId` when there is none. Concurrent calls for one
 * identifier create one device: the unique (environment, identifier) index decides, and the
 * loser reads the winner's row.
 */
export async function findOrCreateDevice(ctx: Pick<AppContext, 'db'>, input: FindOrCreateInput): Promise<FoundDevice> {
  const identifier = input.supplierDeviceIdentifier;
  if (typeof identifier !== 'string' || identifier.length === 0 || identifier.length > SUPPLIER_DEVICE_IDENTIFIER_MAX) {
    throw new ParameterError(`supplierDeviceIdentifier must be a string of 1 to ${SUPPLIER_DEVICE_IDENTIFIER_MAX} characters`, {
      field: 'supplierDeviceIdentifier',
    });
  }
  if (typeof input.deviceTypeHashId !== 'string' || input.deviceTypeHashId.length === 0) {
    throw new ParameterError('deviceTypeHashId must be a non-empty string', { field: 'deviceTypeHashId' });
  }
  const env = await resolveEnvironment(ctx, input);
  // the common case (a known device) costs one read and no transaction
  const found = await existing(ctx, env, identifier);
  if (found) return found;

  const created = await ctx.db.tx(async (client) => {
    // FOR SHARE: a concurrent device type delete waits until this device exists (and is then cut off with the others)
    const { rows: types } = await client.query(
      `SELECT ${DEVICE_TYPE_SELECT} FROM device_type t WHERE t.environment_id = $1 AND t.hash_id = $2 AND t.deleted_at IS NULL FOR SHARE`,
      [env.id, input.deviceTypeHashId],
    );
    if (types.length === 0) {
      throw new ParameterError(
        `deviceTypeHashId ${input.deviceTypeHashId} is not a device type of this environment (unknown, deleted or of another environment)`,
        { field: 'deviceTypeHashId' },
      );
    }
    const type = toDeviceType(types[0]);
    const fields = defaultFields(type.fieldConfigurations);
    const { rows } = await client.query<{ id: number; hash_id: string }>(
      `INSERT INTO device (hash_id, environment_id, device_type_id, supplier_device_identifier, user_facing_identifier, fields)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (environment_id, supplier_device_identifier) DO NOTHING RETURNING id, hash_id`,
      [newHashId(), env.id, types[0].type_id, identifier, identifierOf(fields, type.identifierFieldKey), JSON.stringify(fields)],
    );
    return rows.length === 0
      ? null
      : { id: rows[0].id, hashId: rows[0].hash_id, environmentId: env.id, environmentHashId: env.hashId, deviceTypeHashId: type.hashId, created: true };
  });
  if (created) return created;
  // lost the race: the winner has committed (ON CONFLICT waited for it), so its row is visible now
  const winner = await existing(ctx, env, identifier);
  if (!winner) throw new Error(`device ${identifier} conflicted but cannot be read`);
  return winner;
}
