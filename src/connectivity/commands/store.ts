import { namedStatement, type Db, type Queryable } from '../../app/db.ts';
import { ConflictError, NotFoundError, ParameterError, RightError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { CommandType } from '../command-types/store.ts';
import { liveCommandTypes } from '../command-types/store.ts';
import type { FieldConfiguration } from '../../app/fields.ts';
import type { Channel } from '../device-types/store.ts';
import { applyFieldsUpdate, type Fields } from '../devices/fields.ts';

/** The seed's Command. */
export interface Command {
  hashId: string;
  deviceHashId: string;
  commandTypeHashId: string;
  fields: Fields;
  pinGroupHashId: string | null;
  userHashId: string | null;
  startAt: string | null;
  delay: number;
  endAt: string | null;
  channelIndices: number[];
  email: string[];
  createdAt: string;
  deletedAt: string | null;
  sentAt: string | null;
}

export interface CommandInput {
  objectType: 'device' | 'pinGroup';
  objectHashIds: string[];
  commandTypeHashId: string;
  fields: Fields;
  startAt?: string | null;
  delay?: number;
  endAt?: string | null;
  channelIndices?: number[];
  email: string[];
}

export interface CommandQuery extends FindQuery {
  deviceHashId?: string;
  pinGroupHashId?: string;
  edgeHashId?: string;
  gridHashId?: string;
  mapLayers?: string[];
}

/** A command together with what the pipeline needs to run its events. */
export interface CommandRecord {
  command: Command;
  commandType: CommandType;
  deviceId: number;
  environmentHashId: string;
  droppedAt: string | null;
}

/** Who is told about a command's lifecycle: the device type's handler, through the queue. */
export interface CommandEvents {
  added(commands: CommandRecord[]): Promise<void>;
  deleted(command: CommandRecord): Promise<void>;
}

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

const FROM = `command c
  JOIN device d ON d.id = c.device_id
  JOIN environment e ON e.id = c.environment_id
  JOIN command_type ct ON ct.id = c.command_type_id
  LEFT JOIN machine_account a ON a.id = c.created_by`;
const SELECT = `c.id, c.hash_id, d.id AS device_id, d.hash_id AS device_hash_id, e.hash_id AS env_hash_id, c.pin_group_hash_id,
  a.hash_id AS user_hash_id, a.name AS user_name, c.fields, c.start_at, c.delay, c.end_at, c.channel_indices, c.email,
  c.created_at, c.deleted_at, c.sent_at, c.dropped_at,
  ct.hash_id AS ct_hash_id, ct.name AS ct_name, ct.start AS ct_start, ct."end" AS ct_end, ct.channel_select AS ct_channel_select,
  ct.environment_access AS ct_environment_access, ct.field_configurations AS ct_field_configurations`;

function toRecord(r: Record<string, unknown>): CommandRecord {
  // a command keeps showing the command type it was made with, even after that type is deleted
  const commandType: CommandType = {
    hashId: r.ct_hash_id as string,
    name: r.ct_name as CommandType['name'],
    start: r.ct_start as CommandType['start'],
    end: r.ct_end as CommandType['end'],
    fieldConfigurations: r.ct_field_configurations as FieldConfiguration[],
    channelSelect: r.ct_channel_select as CommandType['channelSelect'],
    environmentAccess: r.ct_environment_access as CommandType['environmentAccess'],
  };
  return {
    command: {
      hashId: r.hash_id as string,
      deviceHashId: r.device_hash_id as string,
      commandTypeHashId: commandType.hashId,
      fields: r.fields as Fields,
      pinGroupHashId: r.pin_group_hash_id as string | null,
      userHashId: r.user_hash_id as string | null,
      startAt: iso(r.start_at),
      delay: r.delay as number,
      endAt: iso(r.end_at),
      channelIndices: r.channel_indices as number[],
      email: r.email as string[],
      createdAt: iso(r.created_at) as string,
      deletedAt: iso(r.deleted_at),
      sentAt: iso(r.sent_at),
    },
    commandType,
    deviceId: r.device_id as number,
    environmentHashId: r.env_hash_id as string,
    droppedAt: iso(r.dropped_at),
  };
}

/** `fields` of a new command: only the command type's keys, each valid, defaults filled in, non-nullable ones present. */
function commandFields(configs: FieldConfiguration[], fields: Fields): Fields {
  const keys = new Set(configs.map((c) => c.key));
  const unknown = Object.keys(fields).find((k) => !keys.has(k));
  if (unknown !== undefined) {
    throw new ParameterError(`fields.${unknown} is not a field of the command type (its keys: ${[...keys].join(', ') || 'none'})`);
  }
  const checked = applyFieldsUpdate(configs, {}, fields);
  const missing = configs.find((c) => c.allowNull === false && (checked[c.key] === undefined || checked[c.key] === null));
  if (missing) throw new ParameterError(`fields.${missing.key} is required by the command type`);
  return checked;
}

/** The command type's start / end / channelSelect rules (the seed's CommandType table). */
function checkTiming(t: CommandType, input: CommandInput): void {
  const startAt = input.startAt ?? null;
  const delay = input.delay ?? 0;
  const endAt = input.endAt ?? null;
  if (t.start === 'required' && startAt === null) throw new ParameterError(`startAt is required: command type ${t.hashId} has start "required"`);
  if (t.start === 'required' && delay !== 0) throw new ParameterError(`delay is not allowed: command type ${t.hashId} has start "required" (give startAt)`);
  if (t.start === 'disabled' && (startAt !== null || delay !== 0)) {
    throw new ParameterError(`${startAt !== null ? 'startAt' : 'delay'} is not allowed: command type ${t.hashId} has start "disabled"`);
  }
  if (t.start === 'optional' && startAt !== null && delay !== 0)
    throw new ParameterError('startAt and delay: give one of them, not both (delay counts only when startAt is null)');
  if (t.end === 'required' && endAt === null) throw new ParameterError(`endAt is required: command type ${t.hashId} has end "required"`);
  if (t.end === 'disabled' && endAt !== null) throw new ParameterError(`endAt is not allowed: command type ${t.hashId} has end "disabled"`);
  if (endAt !== null && startAt !== null && Date.parse(endAt) <= Date.parse(startAt)) throw new ParameterError('endAt must lie after startAt');
  const indices = input.channelIndices ?? [];
  if (t.channelSelect === 'off' && indices.length > 0)
    throw new ParameterError(`channelIndices must be empty: command type ${t.hashId} has channelSelect "off"`);
  if (t.channelSelect === 'single' && indices.length !== 1)
    throw new ParameterError(`channelIndices must hold exactly one channel index: command type ${t.hashId} has channelSelect "single"`);
  if (t.channelSelect === 'multiple' && indices.length === 0)
    throw new ParameterError(`channelIndices must hold one or more channel indices: command type ${t.hashId} has channelSelect "multiple"`);
  if (new Set(indices).size !== indices.length) throw new ParameterError('channelIndices: an index is listed twice');
}

interface TargetDevice {
  id: number;
  hashId: string;
  typeHashId: string;
  channels: Channel[];
  commandTypeHashIds: string[];
}

/**
 * What adding commands checks, refusing as add would: the command type (live, of the environment), its timing and
 * fields, and each device (of the environment, whose type allows the command type and has the channels). Changes
 * nothing; a dry run's scheduleCommand checks with it too.
 */
export async function checkNewCommands(
  db: Queryable,
  environmentId: number,
  input: CommandInput,
  lock = false,
): Promise<{ commandType: CommandType; fields: Fields; devices: Map<string, TargetDevice> }> {
  const wanted = input.objectHashIds;
  const [commandType] = await liveCommandTypes(db, environmentId, [input.commandTypeHashId], lock);
  if (!commandType) throw new ParameterError(`commandTypeHashId: ${input.commandTypeHashId} is not a command type of this environment`);
  checkTiming(commandType, input);
  const fields = commandFields(commandType.fieldConfigurations, input.fields);
  const { rows } = await db.query(
    `SELECT d.id, d.hash_id, t.hash_id AS type_hash_id, t.channels, t.command_type_hash_ids
       FROM device d JOIN device_type t ON t.id = d.device_type_id
      WHERE d.environment_id = $1 AND d.hash_id = ANY($2) AND t.deleted_at IS NULL`,
    [environmentId, wanted],
  );
  const devices = new Map<string, TargetDevice>(
    rows.map((r) => [
      r.hash_id as string,
      {
        id: r.id as number,
        hashId: r.hash_id as string,
        typeHashId: r.type_hash_id as string,
        channels: r.channels as Channel[],
        commandTypeHashIds: r.command_type_hash_ids as string[],
      },
    ]),
  );
  const indices = input.channelIndices ?? [];
  for (const hashId of wanted) {
    const device = devices.get(hashId);
    if (!device) throw new ParameterError(`objectHashIds: ${hashId} is not a device of this environment`);
    if (!device.commandTypeHashIds.includes(commandType.hashId)) {
      throw new ParameterError(
        `objectHashIds: device ${hashId} has device type ${device.typeHashId}, whose commandTypeHashIds do not include ${commandType.hashId}`,
      );
    }
    const outside = indices.find((i) => i >= device.channels.length);
    if (outside !== undefined) {
      throw new ParameterError(
        `channelIndices: ${outside} is not a channel of device ${hashId} (its device type ${device.typeHashId} has ${device.channels.length} channels)`,
      );
    }
  }
  return { commandType, fields, devices };
}

/**
 * Adds one command per device of `objectHashIds` (all or none), then tells each device's handler
 * (`newCommand`) and schedules its `commandDue`.
 */
export async function addCommands(
  db: Db,
  events: CommandEvents,
  environmentId: number,
  accountId: number | null,
  input: CommandInput,
  fixedHashIds?: string[],
): Promise<string[]> {
  if (input.objectType === 'pinGroup') {
    throw new ParameterError(
      "objectType pinGroup: a command for a location goes to the device linked to that location, and locations (pin groups) are not part of this deployment yet; give objectType device with the devices' hashIds",
    );
  }
  const wanted = input.objectHashIds;
  const twice = wanted.find((h, i) => wanted.indexOf(h) !== i);
  if (twice !== undefined) throw new ParameterError(`objectHashIds: ${twice} is listed twice`);
  const records = await db.tx(async (client) => {
    // share-locked like device types do, so the command type cannot be deleted under the new commands
    const { commandType, fields, devices } = await checkNewCommands(client, environmentId, input, true);
    const indices = input.channelIndices ?? [];
    const { rows: typeRows } = await client.query<{ id: number }>('SELECT id FROM command_type WHERE environment_id = $1 AND hash_id = $2', [
      environmentId,
      commandType.hashId,
    ]);
    const hashIds = fixedHashIds ?? wanted.map(() => newHashId());
    // a fixed hashId seen before is a retried job's command: it is not added (nor announced) twice
    const { rows: inserted } = await client.query<{ hash_id: string }>(
      `INSERT INTO command (hash_id, environment_id, device_id, command_type_id, created_by, fields, start_at, delay, end_at, channel_indices, email)
       SELECT h, $2, dev, $4, $5, $6, $7, $8, $9, $10, $11 FROM unnest($1::text[], $3::bigint[]) AS u(h, dev)
       ON CONFLICT (hash_id) DO NOTHING RETURNING hash_id`,
      [
        hashIds,
        environmentId,
        wanted.map((h) => devices.get(h)!.id),
        typeRows[0].id,
        accountId,
        JSON.stringify(fields),
        input.startAt ?? null,
        input.delay ?? 0,
        input.endAt ?? null,
        JSON.stringify(indices),
        JSON.stringify(input.email),
      ],
    );
    const { rows: added } = await client.query(`SELECT ${SELECT} FROM ${FROM} WHERE c.hash_id = ANY($1) ORDER BY c.id`, [inserted.map((r) => r.hash_id)]);
    return added.map(toRecord);
  });
  await events.added(records);
  return records.map((r) => r.command.hashId);
}

/**
 * Whose commands an environment sees: a supplier those of its own environment; a customer (`claimed`)
 * those of the devices it claimed whose command type's environmentAccess is not none.
 */
const scope = (claimed: boolean) => (claimed ? "d.claimed_environment_id = $1 AND ct.environment_access <> 'none'" : 'c.environment_id = $1');

async function loadCommand(
  db: Queryable,
  environmentId: number,
  hashId: string,
  forUpdate = false,
  claimed = false,
): Promise<CommandRecord & { userName: string | null }> {
  const { rows } = await db.query(
    `SELECT ${SELECT} FROM ${FROM} WHERE ${scope(claimed)} AND c.hash_id = $2 AND c.deleted_at IS NULL${forUpdate ? ' FOR UPDATE OF c' : ''}`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('command', hashId);
  return { ...toRecord(rows[0]), userName: rows[0].user_name as string | null };
}

/** Who made a command no account made: the device type's event handler (exec.scheduleCommand). */
export const HANDLER_AUTHOR = 'device type event handler';

export async function getCommand(db: Queryable, environmentId: number, hashId: string, claimed = false) {
  const record = await loadCommand(db, environmentId, hashId, false, claimed);
  // the seed's command get always names its author (a string; the SDK refuses null)
  return { command: record.command, commandType: record.commandType, createdByUserName: record.userName ?? HANDLER_AUTHOR };
}

export async function findCommands(db: Queryable, environmentId: number, query: CommandQuery, claimed = false) {
  const where = [scope(claimed), 'c.deleted_at IS NULL'];
  const params: unknown[] = [environmentId];
  if (query.deviceHashId) {
    params.push(query.deviceHashId);
    where.push(`d.hash_id = $${params.length}`);
  }
  if (query.pinGroupHashId) {
    params.push(query.pinGroupHashId);
    where.push(`c.pin_group_hash_id = $${params.length}`);
  }
  // the SDK's filters on a location's edge, grid or map layer: a supplier's commands are on devices, on no location
  if (query.edgeHashId || query.gridHashId || query.mapLayers?.length) where.push('false');
  const page = await findPage(
    db,
    {
      from: FROM,
      select: SELECT,
      idColumn: 'c.id',
      where,
      params,
      // milliseconds: the page offset carries the sort value as text (see findActivities)
      sortable: { hashId: 'c.hash_id', createdAt: "date_trunc('milliseconds', c.created_at)" },
      search: ['c.hash_id', 'd.hash_id', 'd.supplier_device_identifier', 'ct.name_text'],
      updatedColumn: 'c.updated_at',
    },
    query,
  );
  // pinGroup: a supplier sees nothing of its customers' graph; a customer's rows get theirs from links/
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ ...pick(toRecord(r)), pinGroup: null })) };
}

const pick = (r: CommandRecord) => ({ command: r.command, commandType: r.commandType });

/**
 * Why a command may not be deleted any more, or null when it may. A device holding it (sentAt set)
 * has executed it once its start has passed, and cannot be told to ignore it when its next report
 * is not expected before that start (or is not expected at all).
 */
function refusal(c: Command, nextReportBefore: Date | null, now: Date): string | null {
  if (c.sentAt === null) return null;
  const executesAt = c.startAt !== null ? Date.parse(c.startAt) : Date.parse(c.sentAt) + c.delay * 1000;
  if (executesAt <= now.getTime()) return `command ${c.hashId} was sent to the device, which has already executed it`;
  if (nextReportBefore === null)
    return `command ${c.hashId} was sent to the device, and the device is not expected to report before it executes it, so it cannot be told to ignore it`;
  if (nextReportBefore.getTime() > executesAt) {
    return `command ${c.hashId} was sent to the device, whose next report is expected before ${nextReportBefore.toISOString()}, after the command executes (${new Date(executesAt).toISOString()}): it cannot be told in time to ignore it`;
  }
  return null;
}

async function deleteOne(db: Db, environmentId: number, hashId: string, claimed: boolean): Promise<CommandRecord> {
  return db.tx(async (client) => {
    const record = await loadCommand(client, environmentId, hashId, true, claimed);
    if (claimed && record.commandType.environmentAccess !== 'full') {
      throw new RightError(
        `command type ${record.commandType.hashId} gives this environment read access only (environmentAccess ${record.commandType.environmentAccess})`,
      );
    }
    const { rows } = await client.query<{ next_report_before: Date | null }>('SELECT next_report_before FROM device WHERE id = $1', [record.deviceId]);
    const reason = refusal(record.command, rows[0]?.next_report_before ?? null, new Date());
    if (reason) throw new ConflictError(reason);
    const { rows: deleted } = await client.query<{ deleted_at: Date }>(
      'UPDATE command SET deleted_at = now(), updated_at = now() WHERE hash_id = $1 RETURNING deleted_at',
      [hashId],
    );
    return { ...record, command: { ...record.command, deletedAt: deleted[0].deleted_at.toISOString() } };
  });
}

/** Soft delete, refused (409) when the device already holds the command and cannot be told in time; the handler hears `deletedCommand`. */
export async function deleteCommand(db: Db, events: CommandEvents, environmentId: number, hashId: string, claimed = false): Promise<void> {
  const record = await deleteOne(db, environmentId, hashId, claimed);
  await events.deleted(record);
}

/** deleteMulti: each command on its own, answered per command. */
export async function deleteCommands(
  db: Db,
  events: CommandEvents,
  environmentId: number,
  hashIds: string[],
  claimed = false,
): Promise<{ hashId: string; deleted: boolean; failureReason?: string }[]> {
  const out: { hashId: string; deleted: boolean; failureReason?: string }[] = [];
  for (const hashId of [...new Set(hashIds)]) {
    try {
      await deleteCommand(db, events, environmentId, hashId, claimed);
      out.push({ hashId, deleted: true });
    } catch (err) {
      if (!(err instanceof ConflictError || err instanceof NotFoundError || err instanceof RightError)) throw err;
      out.push({ hashId, deleted: false, failureReason: err.message });
    }
  }
  return out;
}

/** A command by hashId for the pipeline (any environment: the job names it), deleted ones included. */
export async function commandForEvent(db: Queryable, hashId: string): Promise<CommandRecord | null> {
  const { rows } = await db.query(`SELECT ${SELECT} FROM ${FROM} WHERE c.hash_id = $1`, [hashId]);
  return rows.length === 0 ? null : toRecord(rows[0]);
}

const PENDING_COMMANDS = namedStatement(
  'pending-commands',
  'SELECT id FROM command WHERE device_id = ANY($1) AND sent_at IS NULL AND dropped_at IS NULL AND deleted_at IS NULL',
);

/** `args.scheduledCommands` of each device: commands not sent, dropped or deleted, oldest first. */
export async function scheduledCommandsOf(db: Queryable, deviceIds: number[]): Promise<Map<number, { command: Command; commandType: CommandType }[]>> {
  const out = new Map<number, { command: Command; commandType: CommandType }[]>();
  if (deviceIds.length === 0) return out;
  // most contacts find nothing: a one-table query on the partial index plans and runs in a fraction of the joined one
  const pending = await db.query<{ id: number }>(PENDING_COMMANDS, [deviceIds]);
  if (pending.rows.length === 0) return out;
  const { rows } = await db.query(
    `SELECT ${SELECT} FROM ${FROM} WHERE c.id = ANY($1) AND c.sent_at IS NULL AND c.dropped_at IS NULL AND c.deleted_at IS NULL ORDER BY c.id`,
    [pending.rows.map((r) => r.id)],
  );
  for (const r of rows) {
    const record = toRecord(r);
    const list = out.get(record.deviceId) ?? [];
    list.push(pick(record));
    out.set(record.deviceId, list);
  }
  return out;
}

/**
 * exec.markCommandAsSent: the device's pending command gets its sentAt. Returns the command when this
 * call sent it, null when it was sent before (a retried job), and throws for another device's or an unknown command.
 */
export async function markCommandSent(db: Queryable, deviceId: number, hashId: string, at: Date): Promise<CommandRecord | null> {
  const { rowCount } = await db.query(
    'UPDATE command SET sent_at = $3, updated_at = now() WHERE device_id = $1 AND hash_id = $2 AND sent_at IS NULL AND dropped_at IS NULL AND deleted_at IS NULL',
    [deviceId, hashId, at],
  );
  const { rows } = await db.query(`SELECT ${SELECT} FROM ${FROM} WHERE c.device_id = $1 AND c.hash_id = $2`, [deviceId, hashId]);
  if (rows.length === 0) throw new Error(`command ${hashId} is not a command of this device`);
  const record = toRecord(rows[0]);
  if (rowCount) return record;
  if (record.command.sentAt !== null) return null;
  throw new Error(`command ${hashId} was ${record.droppedAt ? 'dropped' : 'deleted'} and cannot be marked as sent`);
}

/** exec.dropCommand: the command leaves scheduledCommands; `markAsDeleted` also deletes it. */
export async function dropCommand(db: Queryable, deviceId: number, hashId: string, markAsDeleted: boolean): Promise<CommandRecord> {
  const { rowCount } = await db.query(
    `UPDATE command SET dropped_at = COALESCE(dropped_at, now()), deleted_at = CASE WHEN $3 THEN COALESCE(deleted_at, now()) ELSE deleted_at END, updated_at = now()
      WHERE device_id = $1 AND hash_id = $2`,
    [deviceId, hashId, markAsDeleted],
  );
  const { rows } = rowCount ? await db.query(`SELECT ${SELECT} FROM ${FROM} WHERE c.device_id = $1 AND c.hash_id = $2`, [deviceId, hashId]) : { rows: [] };
  if (rows.length === 0) throw new Error(`command ${hashId} is not a command of this device`);
  return toRecord(rows[0]);
}
