import type { Db, Queryable } from '../../app/db.ts';
import { ParameterError, RightError } from '../../app/errors.ts';
import { addCommands, type CommandEvents, type CommandInput } from '../../connectivity/commands/store.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup } from '../pin-groups/view.ts';

interface Target {
  objectHashId: string;
  deviceHashId: string | null;
  supplierId: number | null;
  pinGroupHashId: string | null;
}

/** The devices a customer's command goes to: those linked at the named pin groups, or the named claimed devices. */
async function targetsOf(db: Queryable, environmentId: number, input: CommandInput): Promise<Target[]> {
  const byPinGroup = input.objectType === 'pinGroup';
  const { rows } = await db.query<{ object: string; device: string | null; supplier: number | null; pin_group: string | null }>(
    byPinGroup
      ? `SELECT pg.hash_id AS object, d.hash_id AS device, d.environment_id AS supplier, pg.hash_id AS pin_group
         FROM pin_group pg LEFT JOIN device_link l ON l.pin_group_id = pg.id LEFT JOIN device d ON d.id = l.device_id
        WHERE pg.environment_id = $1 AND pg.hash_id = ANY($2)`
      : `SELECT d.hash_id AS object, d.hash_id AS device, d.environment_id AS supplier, pg.hash_id AS pin_group
         FROM device d LEFT JOIN device_link l ON l.device_id = d.id LEFT JOIN pin_group pg ON pg.id = l.pin_group_id
        WHERE d.claimed_environment_id = $1 AND d.hash_id = ANY($2)`,
    [environmentId, input.objectHashIds],
  );
  const found = new Map(rows.map((r) => [r.object, r]));
  return input.objectHashIds.map((h, i) => {
    const r = found.get(h);
    if (!r) throw new ParameterError(`objectHashIds[${i}] ${h} is not a ${byPinGroup ? 'pin group' : 'device'} of this environment`);
    if (r.device === null) throw new ParameterError(`objectHashIds[${i}]: pin group ${h} has no device linked`);
    return { objectHashId: h, deviceHashId: r.device, supplierId: r.supplier, pinGroupHashId: r.pin_group };
  });
}

/**
 * command add by a customer (M-SENSORS): to the device linked at each pin group (objectType
 * pinGroup) or to claimed devices, when the supplier's command type gives this environment full
 * access. Each supplier's devices get their commands all or nothing (as the supplier's own add).
 */
export async function addCustomerCommands(db: Db, events: CommandEvents, environmentId: number, accountId: number, input: CommandInput): Promise<void> {
  const twice = input.objectHashIds.find((h, i) => input.objectHashIds.indexOf(h) !== i);
  if (twice !== undefined) throw new ParameterError(`objectHashIds: ${twice} is listed twice`);
  const targets = await targetsOf(db, environmentId, input);
  const bySupplier = new Map<number, Target[]>();
  for (const t of targets) bySupplier.set(t.supplierId!, [...(bySupplier.get(t.supplierId!) ?? []), t]);
  for (const supplierId of bySupplier.keys()) {
    const { rows } = await db.query<{ environment_access: string }>(
      'SELECT environment_access FROM command_type WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL',
      [supplierId, input.commandTypeHashId],
    );
    if (rows.length === 0) throw new ParameterError(`commandTypeHashId: ${input.commandTypeHashId} is not a command type of the devices' supplier`);
    if (rows[0].environment_access !== 'full')
      throw new RightError(
        `command type ${input.commandTypeHashId} does not let this environment add commands (environmentAccess ${rows[0].environment_access})`,
      );
  }
  for (const [supplierId, group] of bySupplier) {
    const hashIds = await addCommands(db, events, supplierId, accountId, { ...input, objectType: 'device', objectHashIds: group.map((t) => t.deviceHashId!) });
    await db.query('UPDATE command SET pin_group_hash_id = x.pg FROM unnest($1::text[], $2::text[]) AS x(h, pg) WHERE command.hash_id = x.h', [
      hashIds,
      group.map((t) => t.pinGroupHashId),
    ]);
  }
}

/** command find rows of a customer: each with the pin group the command was given for (null when none). */
export async function withPinGroups<R extends { command: { pinGroupHashId: string | null } }>(
  db: Queryable,
  environmentId: number,
  rows: R[],
): Promise<(R & { pinGroup: unknown })[]> {
  const wanted = [...new Set(rows.map((r) => r.command.pinGroupHashId).filter((h): h is string => h !== null))];
  const { rows: groups } =
    wanted.length === 0
      ? { rows: [] }
      : await db.query(`SELECT ${PIN_GROUP_SELECT} FROM pin_group pg ${PIN_GROUP_LINK_JOIN} WHERE pg.environment_id = $1 AND pg.hash_id = ANY($2)`, [
          environmentId,
          wanted,
        ]);
  const byHashId = new Map(groups.map((g) => [g.pg_hash_id as string, toPinGroup(g)]));
  return rows.map((r) => ({ ...r, pinGroup: r.command.pinGroupHashId === null ? null : (byHashId.get(r.command.pinGroupHashId) ?? null) }));
}
