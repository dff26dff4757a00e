import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { uniqueKeys, unwrapConfigurations, type FieldConfiguration, type UpdatableFieldConfiguration } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { nameText, type Name } from '../../app/names.ts';
import type { AppContext } from '../../app/context.ts';
import { getQuantity, type Quantity } from '../../catalogue/quantities.ts';
import { liveCommandTypes } from '../command-types/store.ts';
import type { SupplierCodeLimits } from '../../sandbox/limits.ts';
import { compileOnSave } from '../user-code.ts';
import { subscribeUser, subscriptionOf } from '../subscriptions/store.ts';

interface Series {
  quantityHashId: string;
  color?: string | null;
}
interface ChannelChart {
  title: Name | null;
  series: Series[];
}
export interface Channel {
  name: Name;
  pinFieldConfigurations: FieldConfiguration[];
  defaultPinName?: Name;
  charts?: ChannelChart[];
}
interface Chart {
  title: Name | null;
  series: (Series & { channelIndex: number })[];
}

export interface DeviceTypeInput {
  name: Name;
  eventHandler: string;
  fieldConfigurations: FieldConfiguration[];
  pinGroupFieldConfigurations: FieldConfiguration[];
  channels: Channel[];
  charts?: Chart[];
  commandTypeHashIds: string[];
  measurementCycleCommandTypeHashId?: string | null;
  identifierFieldKey?: string | null;
}

export interface DeviceTypePatch extends Partial<Omit<DeviceTypeInput, 'fieldConfigurations' | 'pinGroupFieldConfigurations' | 'channels'>> {
  fieldConfigurations?: UpdatableFieldConfiguration[];
  pinGroupFieldConfigurations?: UpdatableFieldConfiguration[];
  channels?: (Omit<Channel, 'pinFieldConfigurations'> & { pinFieldConfigurations: UpdatableFieldConfiguration[] })[];
}

export interface DeviceType {
  hashId: string;
  name: Name;
  fieldConfigurations: FieldConfiguration[];
  pinGroupFieldConfigurations: FieldConfiguration[];
  channels: Channel[];
  charts: Chart[];
  commandTypeHashIds: string[];
  measurementCycleCommandTypeHashId: string | null;
  identifierFieldKey: string | null;
}

/** What a device type is inside the service: its JSON plus the ids and code the API does not show. */
export interface DeviceTypeRecord {
  id: number;
  deviceType: DeviceType;
  eventHandler: string;
}

export const DEVICE_TYPE_SELECT = `t.id AS type_id, t.hash_id AS type_hash_id, t.name AS type_name, t.field_configurations AS type_field_configurations,
  t.pin_group_field_configurations AS type_pin_group_field_configurations, t.channels AS type_channels, t.charts AS type_charts,
  t.command_type_hash_ids AS type_command_type_hash_ids, t.measurement_cycle_command_type_hash_id AS type_measurement_cycle_command_type_hash_id,
  t.identifier_field_key AS type_identifier_field_key`;

/** Builds the DeviceType JSON from a row selected with DEVICE_TYPE_SELECT (device and activity queries join it too). */
export function toDeviceType(r: Record<string, unknown>): DeviceType {
  return {
    hashId: r.type_hash_id as string,
    name: r.type_name as Name,
    fieldConfigurations: r.type_field_configurations as FieldConfiguration[],
    pinGroupFieldConfigurations: r.type_pin_group_field_configurations as FieldConfiguration[],
    // the SDK's model requires charts on every channel; a channel added without them has none
    channels: (r.type_channels as Channel[]).map((c) => ({ ...c, charts: c.charts ?? [] })),
    charts: (r.type_charts as Chart[] | null) ?? [],
    commandTypeHashIds: r.type_command_type_hash_ids as string[],
    measurementCycleCommandTypeHashId: r.type_measurement_cycle_command_type_hash_id as string | null,
    identifierFieldKey: r.type_identifier_field_key as string | null,
  };
}

/** Quantity hashIds a device type's charts and channel charts refer to, each once. */
function chartQuantityHashIds(t: Pick<DeviceType, 'charts' | 'channels'>): string[] {
  const ids = new Set<string>();
  for (const chart of t.charts) for (const s of chart.series) ids.add(s.quantityHashId);
  for (const channel of t.channels) for (const chart of channel.charts ?? []) for (const s of chart.series) ids.add(s.quantityHashId);
  return [...ids];
}

/**
 * The rules across members that a schema cannot state; checked on the complete (merged) device type.
 * Run inside the transaction that stores it: the listed command types are share-locked (see deleteCommandType).
 */
async function checkDeviceType(db: Queryable, environmentId: number, t: Omit<DeviceType, 'hashId'>): Promise<void> {
  uniqueKeys('fieldConfigurations', t.fieldConfigurations);
  uniqueKeys('pinGroupFieldConfigurations', t.pinGroupFieldConfigurations);
  t.channels.forEach((c, i) => uniqueKeys(`channels[${i}].pinFieldConfigurations`, c.pinFieldConfigurations));
  if (t.measurementCycleCommandTypeHashId !== null && !t.commandTypeHashIds.includes(t.measurementCycleCommandTypeHashId)) {
    throw new ParameterError(`measurementCycleCommandTypeHashId must be one of commandTypeHashIds (${t.measurementCycleCommandTypeHashId} is not)`);
  }
  if (t.identifierFieldKey !== null && !t.fieldConfigurations.some((c) => c.key === t.identifierFieldKey)) {
    throw new ParameterError(`identifierFieldKey must be a key of fieldConfigurations (${t.identifierFieldKey} is not)`);
  }
  t.charts.forEach((chart, i) =>
    chart.series.forEach((s, j) => {
      if (s.channelIndex >= t.channels.length) {
        throw new ParameterError(`charts[${i}].series[${j}].channelIndex ${s.channelIndex} has no channel (the device type has ${t.channels.length})`);
      }
    }),
  );
  if (t.commandTypeHashIds.length > 0) {
    const live = new Set((await liveCommandTypes(db, environmentId, t.commandTypeHashIds, true)).map((c) => c.hashId));
    const unknown = t.commandTypeHashIds.filter((id) => !live.has(id));
    if (unknown.length > 0)
      throw new ParameterError(
        `commandTypeHashIds: ${unknown.join(', ')} ${unknown.length > 1 ? 'are not command types' : 'is not a command type'} of this environment`,
      );
  }
  const wanted = chartQuantityHashIds(t);
  if (wanted.length === 0) return;
  const { rows } = await db.query<{ hash_id: string }>('SELECT hash_id FROM quantity WHERE environment_id = $1 AND hash_id = ANY($2) AND deleted_at IS NULL', [
    environmentId,
    wanted,
  ]);
  const found = new Set(rows.map((r) => r.hash_id));
  const missing = wanted.find((id) => !found.has(id));
  if (missing) throw new ParameterError(`charts: quantityHashId ${missing} is not a quantity of this environment`);
}

/**
 * In a transaction: the command types it lists stay share-locked until it is stored, so a concurrent command-type delete sees it.
 * The adding account is subscribed to alerts on its event handler (the SDK's subscriptionHashId).
 */
export async function addDeviceType(
  db: Db,
  environmentId: number,
  input: DeviceTypeInput,
  subscriberId: number,
  limits: SupplierCodeLimits,
): Promise<{ hashId: string; subscriptionHashId: string }> {
  const t: Omit<DeviceType, 'hashId'> = {
    name: input.name,
    fieldConfigurations: input.fieldConfigurations,
    pinGroupFieldConfigurations: input.pinGroupFieldConfigurations,
    channels: input.channels,
    charts: input.charts ?? [],
    commandTypeHashIds: input.commandTypeHashIds,
    measurementCycleCommandTypeHashId: input.measurementCycleCommandTypeHashId ?? null,
    identifierFieldKey: input.identifierFieldKey ?? null,
  };
  return db.tx(async (client) => {
    await checkDeviceType(client, environmentId, t);
    const eventHandlerHash = await compileOnSave(limits, 'eventHandler', input.eventHandler, environmentId);
    const hashId = newHashId();
    const subscriptionHashId = newHashId();
    const { rows } = await client.query<{ id: number }>(
      `INSERT INTO device_type (hash_id, environment_id, name, name_text, event_handler, event_handler_hash, field_configurations,
         pin_group_field_configurations, channels, charts, command_type_hash_ids, measurement_cycle_command_type_hash_id,
         identifier_field_key, subscription_hash_id)
       VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14) RETURNING id`,
      [
        hashId,
        environmentId,
        JSON.stringify(t.name),
        nameText(t.name),
        input.eventHandler,
        eventHandlerHash,
        JSON.stringify(t.fieldConfigurations),
        JSON.stringify(t.pinGroupFieldConfigurations),
        JSON.stringify(t.channels),
        JSON.stringify(t.charts),
        JSON.stringify(t.commandTypeHashIds),
        t.measurementCycleCommandTypeHashId,
        t.identifierFieldKey,
        subscriptionHashId,
      ],
    );
    await subscribeUser(client, environmentId, subscriberId, 'deviceType', rows[0].id, subscriptionHashId);
    return { hashId, subscriptionHashId };
  });
}

/** A live device type of the environment, or a not_found_error (also for another environment's). */
export async function loadDeviceType(db: Queryable, environmentId: number, hashId: string, forUpdate = false): Promise<DeviceTypeRecord> {
  const { rows } = await db.query(
    `SELECT ${DEVICE_TYPE_SELECT}, t.event_handler FROM device_type t
      WHERE t.environment_id = $1 AND t.hash_id = $2 AND t.deleted_at IS NULL${forUpdate ? ' FOR UPDATE' : ''}`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('deviceType', hashId);
  return { id: rows[0].type_id as number, deviceType: toDeviceType(rows[0]), eventHandler: rows[0].event_handler as string };
}

/** `subscriptionHashId` is the reader's subscription to the type's alerts, absent when it has none (as the SDK's get has it). */
export async function getDeviceType(db: Queryable, environmentId: number, hashId: string, readerId: number) {
  const record = await loadDeviceType(db, environmentId, hashId);
  const subscriptionHashId = await subscriptionOf(db, readerId, 'deviceType', record.id);
  const chartQuantities: Quantity[] = [];
  for (const id of chartQuantityHashIds(record.deviceType)) {
    // a quantity deleted after the chart was made is left out rather than failing the get
    const quantity = await getQuantity(db, environmentId, id).catch((err: unknown) => {
      if (err instanceof NotFoundError) return null;
      throw err;
    });
    if (quantity) chartQuantities.push(quantity);
  }
  return {
    deviceType: record.deviceType,
    eventHandler: record.eventHandler,
    commandTypes: await liveCommandTypes(db, environmentId, record.deviceType.commandTypeHashIds),
    ...(subscriptionHashId === undefined ? {} : { subscriptionHashId }),
    chartQuantities,
  };
}

/** The device types (`t`) a monitoring environment ($1) reads: those of the devices it claimed. */
export const CLAIMED_DEVICE_TYPES = 't.deleted_at IS NULL AND EXISTS (SELECT 1 FROM device d WHERE d.device_type_id = t.id AND d.claimed_environment_id = $1)';

/** device-type find in a monitoring environment: the types of the devices it claimed. */
export const findClaimedDeviceTypes = (db: Queryable, environmentId: number, query: FindQuery) =>
  findDeviceTypes(db, environmentId, query, CLAIMED_DEVICE_TYPES);

export async function findDeviceTypes(db: Queryable, environmentId: number, query: FindQuery, scope = 't.environment_id = $1 AND t.deleted_at IS NULL') {
  const page = await findPage(
    db,
    {
      from: 'device_type t',
      select: DEVICE_TYPE_SELECT,
      idColumn: 't.id',
      where: [scope],
      params: [environmentId],
      sortable: { hashId: 't.hash_id', name: 't.name_text' },
      search: ['t.name_text', 't.hash_id'],
      updatedColumn: 't.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ deviceType: toDeviceType(r) })) };
}

export async function updateDeviceType(db: Db, environmentId: number, hashId: string, patch: DeviceTypePatch, limits: SupplierCodeLimits): Promise<void> {
  await db.tx(async (client) => {
    const current = await loadDeviceType(client, environmentId, hashId, true);
    const old = current.deviceType;
    if (patch.channels && patch.channels.length < old.channels.length) {
      throw new ParameterError(`channels cannot be removed: the device type has ${old.channels.length} channels, the update has ${patch.channels.length}`);
    }
    const t: DeviceType = {
      hashId,
      name: patch.name ?? old.name,
      fieldConfigurations: patch.fieldConfigurations ? unwrapConfigurations(patch.fieldConfigurations) : old.fieldConfigurations,
      pinGroupFieldConfigurations: patch.pinGroupFieldConfigurations
        ? unwrapConfigurations(patch.pinGroupFieldConfigurations)
        : old.pinGroupFieldConfigurations,
      channels: patch.channels ? patch.channels.map((c) => ({ ...c, pinFieldConfigurations: unwrapConfigurations(c.pinFieldConfigurations) })) : old.channels,
      charts: patch.charts ?? old.charts,
      commandTypeHashIds: patch.commandTypeHashIds ?? old.commandTypeHashIds,
      measurementCycleCommandTypeHashId:
        patch.measurementCycleCommandTypeHashId === undefined ? old.measurementCycleCommandTypeHashId : patch.measurementCycleCommandTypeHashId,
      identifierFieldKey: patch.identifierFieldKey === undefined ? old.identifierFieldKey : patch.identifierFieldKey,
    };
    await checkDeviceType(client, environmentId, t);
    const eventHandler = patch.eventHandler ?? current.eventHandler;
    const eventHandlerHash = patch.eventHandler === undefined ? null : await compileOnSave(limits, 'eventHandler', patch.eventHandler, environmentId);
    await client.query(
      `UPDATE device_type SET name = $2, name_text = $3, event_handler = $4, event_handler_hash = COALESCE($5, event_handler_hash),
         field_configurations = $6, pin_group_field_configurations = $7, channels = $8, charts = $9, command_type_hash_ids = $10,
         measurement_cycle_command_type_hash_id = $11, identifier_field_key = $12, updated_at = now()
       WHERE id = $1`,
      [
        current.id,
        JSON.stringify(t.name),
        nameText(t.name),
        eventHandler,
        eventHandlerHash,
        JSON.stringify(t.fieldConfigurations),
        JSON.stringify(t.pinGroupFieldConfigurations),
        JSON.stringify(t.channels),
        JSON.stringify(t.charts),
        JSON.stringify(t.commandTypeHashIds),
        t.measurementCycleCommandTypeHashId,
        t.identifierFieldKey,
      ],
    );
    if (t.identifierFieldKey !== old.identifierFieldKey) {
      // userFacingIdentifier follows the field the type names, for every device of the type
      await client.query(
        `UPDATE device SET user_facing_identifier = CASE WHEN $2::text IS NULL THEN NULL ELSE fields ->> $2::text END, updated_at = now()
          WHERE device_type_id = $1`,
        [current.id, t.identifierFieldKey],
      );
    }
  });
}

/** Soft delete: the type's devices lose access at once (the credential lookup skips deleted types). */
export async function deleteDeviceType(ctx: Pick<AppContext, 'db' | 'changes'>, environmentId: number, hashId: string): Promise<void> {
  const identities = await ctx.db.tx(async (client) => {
    const { rows } = await client.query<{ id: number }>(
      'UPDATE device_type SET deleted_at = now(), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL RETURNING id',
      [environmentId, hashId],
    );
    if (rows.length === 0) throw new NotFoundError('deviceType', hashId);
    const devices = await client.query<{ psk_identity: string | null }>(
      'SELECT psk_identity FROM device WHERE device_type_id = $1 AND psk_identity IS NOT NULL',
      [rows[0].id],
    );
    return devices.rows.map((d) => d.psk_identity);
  });
  await ctx.changes.publish('credentials', { identities: identities.filter((i): i is string => i !== null) });
}
