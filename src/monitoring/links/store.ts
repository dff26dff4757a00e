import type { Db, Queryable } from '../../app/db.ts';
import { ConflictError, NotFoundError, ParameterError } from '../../app/errors.ts';
import { applyFieldsUpdate, defaultFields, type FieldsUpdate } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { DEVICE_TYPE_SELECT, toDeviceType, type DeviceType } from '../../connectivity/device-types/store.ts';
import { claimDevices, createClaimTokens, unclaimDevices, type ClaimToken } from '../../connectivity/devices/claim.ts';
import { deviceSelect, toDevice, type Device } from '../../connectivity/devices/store.ts';
import { nameText } from '../../app/names.ts';
import type { EnvironmentRecord } from '../../accounts/store.ts';
import { fieldConfigurationsOf } from '../../accounts/environments/view.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup } from '../pin-groups/view.ts';

/**
 * links/ is the one place that joins a supplier's device to a customer's pins: claim, link,
 * unlink, unclaim, and the customer's view of the devices it holds.
 */

export interface ChannelMappingItem {
  channel: number;
  pinHashId?: string | null;
  deviceFields?: FieldsUpdate;
}

export interface LinkView {
  linkHashId: string;
  device: Device;
  deviceType: DeviceType;
  channelMapping: { channel: number; pinHashId: string | null }[];
}

const CHANNEL_MAPPING = `(SELECT coalesce(json_agg(json_build_object('channel', c.channel, 'pinHashId', p.hash_id) ORDER BY c.channel), '[]')
    FROM device_link_channel c JOIN pin p ON p.id = c.pin_id WHERE c.link_id = l.id) AS channel_mapping`;
const DEVICE_JOINS = 'JOIN device d ON d.id = l.device_id JOIN environment de ON de.id = d.environment_id JOIN device_type t ON t.id = d.device_type_id';

/** The device linked to each of `pinGroupIds`, with its type and channel mapping. */
export async function linksOfPinGroups(db: Queryable, pinGroupIds: number[]): Promise<Map<number, LinkView>> {
  if (pinGroupIds.length === 0) return new Map();
  const { rows } = await db.query(
    `SELECT l.pin_group_id, l.hash_id AS link_hash_id, ${deviceSelect('t')}, ${DEVICE_TYPE_SELECT}, ${CHANNEL_MAPPING}
       FROM device_link l ${DEVICE_JOINS} WHERE l.pin_group_id = ANY($1)`,
    [pinGroupIds],
  );
  return new Map(
    rows.map((r) => [
      r.pin_group_id as number,
      {
        linkHashId: r.link_hash_id as string,
        device: toDevice(r),
        deviceType: toDeviceType(r),
        channelMapping: r.channel_mapping as LinkView['channelMapping'],
      },
    ]),
  );
}

// the customer's view of its devices: claimed by this environment, with the pin group each is linked to
const CLAIMED_FROM = `device d JOIN environment de ON de.id = d.environment_id JOIN device_type t ON t.id = d.device_type_id
  JOIN environment ce ON ce.id = d.claimed_environment_id
  LEFT JOIN device_link l ON l.device_id = d.id LEFT JOIN pin_group pg ON pg.id = l.pin_group_id ${PIN_GROUP_LINK_JOIN}`;
const CLAIMED_SELECT = `${deviceSelect('t')}, ${DEVICE_TYPE_SELECT}, ce.hash_id AS claimed_env_hash_id, ce.name AS claimed_env_name, ${PIN_GROUP_SELECT}`;

function claimedRow(r: Record<string, unknown>) {
  return {
    device: toDevice(r),
    deviceType: toDeviceType(r),
    environmentName: r.claimed_env_name as string,
    environmentHashId: r.claimed_env_hash_id as string,
    pinGroup: r.pg_id === null ? null : toPinGroup(r),
  };
}

export async function getClaimedDevice(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT ${CLAIMED_SELECT} FROM ${CLAIMED_FROM} WHERE d.claimed_environment_id = $1 AND d.hash_id = $2`, [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError('device', hashId);
  return claimedRow(rows[0]);
}

export async function findClaimedDevices(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: CLAIMED_FROM,
      select: CLAIMED_SELECT,
      idColumn: 'd.id',
      where: ['d.claimed_environment_id = $1'],
      params: [environmentId],
      sortable: { hashId: 'd.hash_id', supplierDeviceIdentifier: 'd.supplier_device_identifier' },
      search: ['d.hash_id', 'd.supplier_device_identifier', "COALESCE(d.user_facing_identifier, '')", "COALESCE(pg.name, '')"],
      updatedColumn: 'd.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(claimedRow) };
}

/** claim: every token valid or nothing claimed; answers the claimed devices in token order. */
export async function claim(db: Db, environmentId: number, claimTokens: string[]): Promise<{ devices: Device[] }> {
  const hashIds = await claimDevices(db, environmentId, claimTokens);
  const devices = await Promise.all(hashIds.map(async (h) => (await getClaimedDevice(db, environmentId, h)).device));
  return { devices };
}

/** unclaim: the devices go back to their supplier, unlinked first. All must be held by this environment, or nothing changes. */
export async function unclaim(db: Db, environmentId: number, hashIds: string[]): Promise<void> {
  await unclaimDevices(db, environmentId, hashIds, async (client, deviceIds) => {
    await clearDeviceFieldsOfLinks(client, 'l.device_id = ANY($1)', [deviceIds]);
    await client.query('DELETE FROM device_link WHERE device_id = ANY($1)', [deviceIds]);
  });
}

/** The device type's fields on a pin group and its pins belong to the link: they go with it. */
async function clearDeviceFieldsOfLinks(client: Queryable, where: string, params: unknown[]): Promise<void> {
  await client.query(`UPDATE pin_group pg SET device_fields = '{}', updated_at = now() FROM device_link l WHERE l.pin_group_id = pg.id AND ${where}`, params);
  await client.query(
    `UPDATE pin p SET device_fields = '{}', updated_at = now() FROM device_link l JOIN device_link_channel c ON c.link_id = l.id
     WHERE p.id = c.pin_id AND ${where}`,
    params,
  );
}

/** unlink: later reports of the device no longer land on the pin group. */
export async function unlink(db: Db, environmentId: number, deviceHashId: string): Promise<void> {
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number; link_id: number | null }>(
      `SELECT d.id, l.id AS link_id FROM device d LEFT JOIN device_link l ON l.device_id = d.id
        WHERE d.claimed_environment_id = $1 AND d.hash_id = $2 FOR UPDATE OF d`,
      [environmentId, deviceHashId],
    );
    if (rows.length === 0) throw new NotFoundError('device', deviceHashId);
    if (rows[0].link_id === null) throw new ConflictError(`device ${deviceHashId} is not linked to a pin group`);
    await clearDeviceFieldsOfLinks(client, 'l.id = $1', [rows[0].link_id]);
    await client.query('DELETE FROM device_link WHERE id = $1', [rows[0].link_id]);
  });
}

interface LinkInput {
  pinGroupHashId: string;
  channelMapping: ChannelMappingItem[];
}

/**
 * link: connects the device's channels to pins of the pin group. A channel the mapping leaves out
 * (or maps to no pin) gets a new pin named by the channel's defaultPinName. The device's claim
 * token dies. Refused while the device or the pin group is linked elsewhere.
 */
export async function link(db: Db, env: EnvironmentRecord, deviceHashId: string, input: LinkInput) {
  return db.tx(async (client) => {
    const { rows: devices } = await client.query(
      `SELECT ${deviceSelect('t')}, ${DEVICE_TYPE_SELECT}, l.id AS link_id FROM device d JOIN environment de ON de.id = d.environment_id
         JOIN device_type t ON t.id = d.device_type_id LEFT JOIN device_link l ON l.device_id = d.id
        WHERE d.claimed_environment_id = $1 AND d.hash_id = $2 FOR UPDATE OF d`,
      [env.id, deviceHashId],
    );
    if (devices.length === 0) throw new NotFoundError('device', deviceHashId);
    if (devices[0].link_id !== null) throw new ConflictError(`device ${deviceHashId} is already linked to a pin group; unlink it first`);
    const device = toDevice(devices[0]);
    const deviceType = toDeviceType(devices[0]);
    const { rows: groups } = await client.query<{ id: number; linked: boolean }>(
      `SELECT pg.id, EXISTS (SELECT 1 FROM device_link x WHERE x.pin_group_id = pg.id) AS linked FROM pin_group pg
        WHERE pg.environment_id = $1 AND pg.hash_id = $2 FOR UPDATE`,
      [env.id, input.pinGroupHashId],
    );
    if (groups.length === 0) throw new NotFoundError('pin group', input.pinGroupHashId);
    if (groups[0].linked) throw new ConflictError(`pin group ${input.pinGroupHashId} already has a device linked; unlink it first`);
    const pinGroupId = groups[0].id;

    const named = input.channelMapping.filter((m) => m.pinHashId).map((m) => m.pinHashId as string);
    const { rows: pins } = await client.query<{ id: number; hash_id: string }>(
      'SELECT id, hash_id FROM pin WHERE pin_group_id = $1 AND hash_id = ANY($2) FOR UPDATE',
      [pinGroupId, named],
    );
    const pinIds = new Map(pins.map((p) => [p.hash_id, p.id]));
    const byChannel = new Map<number, ChannelMappingItem>();
    const usedPins = new Set<string>();
    input.channelMapping.forEach((m, i) => {
      if (m.channel >= deviceType.channels.length) {
        throw new ParameterError(`channelMapping[${i}].channel ${m.channel} is not a channel of the device type (it has ${deviceType.channels.length})`);
      }
      if (byChannel.has(m.channel)) throw new ParameterError(`channelMapping[${i}].channel ${m.channel} is mapped twice`);
      if (m.pinHashId) {
        if (!pinIds.has(m.pinHashId))
          throw new ParameterError(`channelMapping[${i}].pinHashId ${m.pinHashId} is not a pin of pin group ${input.pinGroupHashId}`);
        if (usedPins.has(m.pinHashId)) throw new ParameterError(`channelMapping[${i}].pinHashId ${m.pinHashId} is mapped to two channels`);
        usedPins.add(m.pinHashId);
      }
      byChannel.set(m.channel, m);
    });

    const linkId = (
      await client.query<{ id: number }>('INSERT INTO device_link (hash_id, environment_id, device_id, pin_group_id) VALUES ($1, $2, $3, $4) RETURNING id', [
        newHashId(),
        env.id,
        devices[0].device_id,
        pinGroupId,
      ])
    ).rows[0].id;
    const pinConfigs = fieldConfigurationsOf(env).pins;
    for (const [channel, spec] of deviceType.channels.entries()) {
      const item = byChannel.get(channel);
      const at = item ? `channelMapping[${input.channelMapping.indexOf(item)}].deviceFields` : `channels[${channel}]`;
      const deviceFields = applyFieldsUpdate(
        spec.pinFieldConfigurations,
        defaultFields(spec.pinFieldConfigurations),
        item?.deviceFields ?? [],
        `channel ${channel} of the device type`,
        at,
      );
      let pinId = item?.pinHashId ? pinIds.get(item.pinHashId)! : null;
      if (pinId === null) {
        // the customer named no pin for this channel: one is made, named as the device type suggests
        const name = nameText(spec.defaultPinName ?? spec.name);
        const fields = { ...defaultFields(pinConfigs), [pinConfigs[0].key]: name };
        pinId = (
          await client.query<{ id: number }>(
            `INSERT INTO pin (hash_id, environment_id, pin_group_id, name, fields, device_fields) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
            [newHashId(), env.id, pinGroupId, name, JSON.stringify(fields), JSON.stringify(deviceFields)],
          )
        ).rows[0].id;
      } else {
        await client.query('UPDATE pin SET device_fields = $2, updated_at = now() WHERE id = $1', [pinId, JSON.stringify(deviceFields)]);
      }
      await client.query('INSERT INTO device_link_channel (link_id, channel, pin_id) VALUES ($1, $2, $3)', [linkId, channel, pinId]);
    }
    await client.query('UPDATE pin_group SET device_fields = $2, updated_at = now() WHERE id = $1', [
      pinGroupId,
      JSON.stringify(defaultFields(deviceType.pinGroupFieldConfigurations)),
    ]);
    await client.query('DELETE FROM device_claim_token WHERE device_id = $1', [devices[0].device_id]);
    return { device, deviceType, measurementCycle: null, nextReportBefore: device.nextReportBefore };
  });
}

/** getClaimToken by a customer: for devices it claimed and has not linked (the interface's Errors table). */
export async function customerClaimTokens(db: Db, environmentId: number, deviceHashIds: string[]): Promise<ClaimToken[]> {
  return createClaimTokens(db, environmentId, deviceHashIds, 'customer', async (client, deviceIds) => {
    const { rows } = await client.query<{ hash_id: string }>(
      'SELECT d.hash_id FROM device_link l JOIN device d ON d.id = l.device_id WHERE l.device_id = ANY($1)',
      [deviceIds],
    );
    if (rows.length > 0)
      throw new ConflictError(`device ${rows.map((r) => r.hash_id).join(', ')} is linked to a pin group; unlink it before asking for a claim token`);
  });
}
