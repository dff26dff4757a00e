import type { Db, Queryable } from '../../app/db.ts';
import { ConflictError, NotFoundError } from '../../app/errors.ts';
import { uniqueKeys, unwrapConfigurations, type FieldConfiguration, type UpdatableFieldConfiguration } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { nameText, type Name } from '../../app/names.ts';

export type StartEnd = 'required' | 'optional' | 'disabled';
export type ChannelSelect = 'single' | 'multiple' | 'off';
export type EnvironmentAccess = 'full' | 'read' | 'none';

export interface CommandTypeInput {
  name: Name;
  start?: StartEnd;
  end?: StartEnd;
  channelSelect?: ChannelSelect;
  environmentAccess?: EnvironmentAccess;
  fieldConfigurations: FieldConfiguration[];
}

export interface CommandTypePatch extends Partial<Omit<CommandTypeInput, 'fieldConfigurations'>> {
  fieldConfigurations?: UpdatableFieldConfiguration[];
}

/** The seed's CommandType. */
export interface CommandType {
  hashId: string;
  name: Name;
  start: StartEnd;
  end: StartEnd;
  fieldConfigurations: FieldConfiguration[];
  channelSelect: ChannelSelect;
  environmentAccess: EnvironmentAccess;
}

const SELECT = 'c.id, c.hash_id, c.name, c.start, c."end", c.channel_select, c.environment_access, c.field_configurations';

function toCommandType(r: Record<string, unknown>): CommandType {
  return {
    hashId: r.hash_id as string,
    name: r.name as Name,
    start: r.start as StartEnd,
    end: r.end as StartEnd,
    fieldConfigurations: r.field_configurations as FieldConfiguration[],
    channelSelect: r.channel_select as ChannelSelect,
    environmentAccess: r.environment_access as EnvironmentAccess,
  };
}

export async function addCommandType(db: Queryable, environmentId: number, input: CommandTypeInput): Promise<string> {
  uniqueKeys('fieldConfigurations', input.fieldConfigurations);
  const hashId = newHashId();
  await db.query(
    `INSERT INTO command_type (hash_id, environment_id, name, name_text, start, "end", channel_select, environment_access, field_configurations)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      hashId,
      environmentId,
      JSON.stringify(input.name),
      nameText(input.name),
      input.start ?? 'optional',
      input.end ?? 'disabled',
      input.channelSelect ?? 'off',
      input.environmentAccess ?? 'full',
      JSON.stringify(input.fieldConfigurations),
    ],
  );
  return hashId;
}

async function loadCommandType(db: Queryable, environmentId: number, hashId: string, forUpdate = false): Promise<{ id: number; commandType: CommandType }> {
  const { rows } = await db.query(
    `SELECT ${SELECT} FROM command_type c WHERE c.environment_id = $1 AND c.hash_id = $2 AND c.deleted_at IS NULL${forUpdate ? ' FOR UPDATE' : ''}`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('commandType', hashId);
  return { id: rows[0].id as number, commandType: toCommandType(rows[0]) };
}

export async function getCommandType(db: Queryable, environmentId: number, hashId: string): Promise<{ commandType: CommandType }> {
  return { commandType: (await loadCommandType(db, environmentId, hashId)).commandType };
}

/**
 * The live command types of the environment among `hashIds`, in the order asked, each once; others are left out.
 * `lock` takes a share lock (inside a transaction) so a concurrent delete waits for the referring device type.
 */
export async function liveCommandTypes(db: Queryable, environmentId: number, hashIds: string[], lock = false): Promise<CommandType[]> {
  if (hashIds.length === 0) return [];
  const { rows } = await db.query(
    `SELECT ${SELECT} FROM command_type c WHERE c.environment_id = $1 AND c.hash_id = ANY($2) AND c.deleted_at IS NULL${lock ? ' FOR SHARE' : ''}`,
    [environmentId, hashIds],
  );
  const byHashId = new Map(rows.map((r) => [r.hash_id as string, toCommandType(r)]));
  return [...new Set(hashIds)].flatMap((id) => byHashId.get(id) ?? []);
}

/**
 * The command types a monitoring environment may see: those its claimed devices' types name, unless their
 * environmentAccess is none (the ones it can add commands of, and those it reads commands of).
 */
export const CLAIMED_SCOPE = `c.deleted_at IS NULL AND c.environment_access <> 'none' AND EXISTS (
  SELECT 1 FROM device d JOIN device_type t ON t.id = d.device_type_id
   WHERE d.claimed_environment_id = $1 AND t.environment_id = c.environment_id AND t.command_type_hash_ids ? c.hash_id)`;

/** command-type get in a monitoring environment: a command type of its claimed devices (see CLAIMED_SCOPE), else not found. */
export async function getClaimedCommandType(db: Queryable, environmentId: number, hashId: string): Promise<{ commandType: CommandType }> {
  const { rows } = await db.query(`SELECT ${SELECT} FROM command_type c WHERE ${CLAIMED_SCOPE} AND c.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('commandType', hashId);
  return { commandType: toCommandType(rows[0]) };
}

/** command-type find in a monitoring environment (see CLAIMED_SCOPE). */
export const findClaimedCommandTypes = (db: Queryable, environmentId: number, query: FindQuery) => findCommandTypes(db, environmentId, query, CLAIMED_SCOPE);

export async function findCommandTypes(db: Queryable, environmentId: number, query: FindQuery, scope = 'c.environment_id = $1 AND c.deleted_at IS NULL') {
  const page = await findPage(
    db,
    {
      from: 'command_type c',
      select: SELECT,
      idColumn: 'c.id',
      where: [scope],
      params: [environmentId],
      sortable: { hashId: 'c.hash_id', name: 'c.name_text' },
      search: ['c.name_text', 'c.hash_id'],
      updatedColumn: 'c.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ commandType: toCommandType(r) })) };
}

export async function updateCommandType(db: Db, environmentId: number, hashId: string, patch: CommandTypePatch): Promise<void> {
  await db.tx(async (client) => {
    const current = await loadCommandType(client, environmentId, hashId, true);
    const old = current.commandType;
    const t: CommandType = {
      hashId,
      name: patch.name ?? old.name,
      start: patch.start ?? old.start,
      end: patch.end ?? old.end,
      fieldConfigurations: patch.fieldConfigurations ? unwrapConfigurations(patch.fieldConfigurations) : old.fieldConfigurations,
      channelSelect: patch.channelSelect ?? old.channelSelect,
      environmentAccess: patch.environmentAccess ?? old.environmentAccess,
    };
    uniqueKeys('fieldConfigurations', t.fieldConfigurations);
    await client.query(
      `UPDATE command_type SET name = $2, name_text = $3, start = $4, "end" = $5, channel_select = $6, environment_access = $7,
         field_configurations = $8, updated_at = now()
       WHERE id = $1`,
      [current.id, JSON.stringify(t.name), nameText(t.name), t.start, t.end, t.channelSelect, t.environmentAccess, JSON.stringify(t.fieldConfigurations)],
    );
  });
}

/** Soft delete, refused while a live device type of the environment lists the command type. */
export async function deleteCommandType(db: Db, environmentId: number, hashId: string): Promise<void> {
  await db.tx(async (client) => {
    const current = await loadCommandType(client, environmentId, hashId, true);
    const { rows } = await client.query<{ hash_id: string }>(
      `SELECT hash_id FROM device_type WHERE environment_id = $1 AND deleted_at IS NULL AND command_type_hash_ids ? $2 ORDER BY hash_id`,
      [environmentId, hashId],
    );
    if (rows.length > 0) {
      throw new ConflictError(
        `commandType ${hashId} is in commandTypeHashIds of device type${rows.length > 1 ? 's' : ''} ${rows.map((r) => r.hash_id).join(', ')}: remove it there first`,
      );
    }
    await client.query('UPDATE command_type SET deleted_at = now(), updated_at = now() WHERE id = $1', [current.id]);
  });
}
