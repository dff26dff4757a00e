import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { addCommandType, addDeviceType, expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPinGroup } from './fixtures.ts';

// Commands in a monitoring environment: objectType pinGroup reaches the device linked there (M-SENSORS);
// the command type's environmentAccess (full / read / none) governs what the customer sees and does.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface CommandRow {
  command: { hashId: string; deviceHashId: string; commandTypeHashId: string; pinGroupHashId: string | null };
  pinGroup: { hashId: string } | null;
}

async function world() {
  const supplier = await api.login('connectivity');
  const [full, read, none] = [
    await addCommandType(supplier, { environmentAccess: 'full' }),
    await addCommandType(supplier, { environmentAccess: 'read' }),
    await addCommandType(supplier, { environmentAccess: 'none' }),
  ];
  const type = await addDeviceType(supplier, { commandTypeHashIds: [full, read, none] });
  const id = `cmd-${randomBytes(5).toString('hex')}`;
  const device = (
    await supplier.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: id,
      deviceTypeHashId: type,
      psk: 'ab'.repeat(16),
      pskIdentity: id,
    })
  ).body.hashId;
  const token = (await supplier.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [device] })).body
    .claimTokens[0].claimToken;
  const customer = await api.login('monitoring', ['READ', 'STATIC', 'SENSORS']);
  expect((await customer.request('POST', '/device/claim', { claimTokens: [token] })).status).toBe(200);
  const pg = await addPinGroup(customer);
  expect((await customer.request('POST', `/device/${device}/link`, { pinGroupHashId: pg.hashId, channelMapping: [] })).status).toBe(200);
  return { supplier, customer, device, pinGroup: pg.hashId, types: { full, read, none } };
}

const command = (commandTypeHashId: string, objectType: string, objectHashIds: string[]) => ({
  objectType,
  objectHashIds,
  commandTypeHashId,
  fields: { interval: 60 },
  email: [],
});

describe('commands of a monitoring environment', () => {
  it('objectType pinGroup reaches the linked device; the supplier sees it; environmentAccess governs the rest', async () => {
    const w = await world();
    const add = await w.customer.request<ErrorBody>('POST', '/command/', command(w.types.full, 'pinGroup', [w.pinGroup]));
    expect(add.status, JSON.stringify(add.body)).toBe(204);
    const mine = await findAll<CommandRow>(w.customer, '/command/');
    expect(mine).toHaveLength(1);
    expect(mine[0].command).toMatchObject({ deviceHashId: w.device, commandTypeHashId: w.types.full, pinGroupHashId: w.pinGroup });
    expect(mine[0].pinGroup?.hashId).toBe(w.pinGroup);
    expect((await w.customer.request('GET', `/command/${mine[0].command.hashId}`)).status).toBe(200);
    // the device's handler gets it: it is the device's pending command, in the supplier's environment
    const supplierRows = await findAll<CommandRow>(w.supplier, `/command/?deviceHashId=${w.device}`);
    expect(supplierRows.map((r) => r.command.hashId)).toEqual([mine[0].command.hashId]);
    expect(supplierRows[0].pinGroup).toBeNull();

    // read: the customer sees the supplier's command but may neither add nor delete one
    expect((await w.customer.request<ErrorBody>('POST', '/command/', command(w.types.read, 'device', [w.device]))).body.key).toBe('right_error');
    expect((await w.supplier.request('POST', '/command/', command(w.types.read, 'device', [w.device]))).status).toBe(204);
    const readOne = (await findAll<CommandRow>(w.supplier, '/command/')).find((r) => r.command.commandTypeHashId === w.types.read)!.command.hashId;
    expect((await w.customer.request('GET', `/command/${readOne}`)).status).toBe(200);
    expect((await w.customer.request<ErrorBody>('DELETE', `/command/${readOne}`)).body.key).toBe('right_error');
    // none: invisible
    expect((await w.customer.request<ErrorBody>('POST', '/command/', command(w.types.none, 'pinGroup', [w.pinGroup]))).body.key).toBe('right_error');
    expect((await w.supplier.request('POST', '/command/', command(w.types.none, 'device', [w.device]))).status).toBe(204);
    const noneOne = (await findAll<CommandRow>(w.supplier, '/command/')).find((r) => r.command.commandTypeHashId === w.types.none)!.command.hashId;
    expect((await w.customer.request('GET', `/command/${noneOne}`)).status).toBe(404);
    expect((await findAll<CommandRow>(w.customer, '/command/')).map((r) => r.command.commandTypeHashId).sort()).toEqual([w.types.full, w.types.read].sort());
    // full: the customer deletes its own
    expect((await w.customer.request('DELETE', `/command/${mine[0].command.hashId}`)).status).toBe(204);
  });

  it('refuses a pin group without a device, foreign objects, and the limits, naming the field; another customer sees nothing', async () => {
    const w = await world();
    const empty = await addPinGroup(w.customer);
    expectParameterError(await w.customer.request('POST', '/command/', command(w.types.full, 'pinGroup', [empty.hashId])), 'objectHashIds[0]', 'no device');
    expectParameterError(
      await w.customer.request(
        'POST',
        '/command/',
        command(
          w.types.full,
          'pinGroup',
          Array.from({ length: 41 }, (_, i) => `p${i}`),
        ),
      ),
      'objectHashIds',
      '40',
    );
    const other = await api.login('monitoring', ['READ', 'SENSORS']);
    expectParameterError(await other.request('POST', '/command/', command(w.types.full, 'pinGroup', [w.pinGroup])), 'objectHashIds[0]');
    expectParameterError(await other.request('POST', '/command/', command(w.types.full, 'device', [w.device])), 'objectHashIds[0]');
    expect((await w.customer.request('POST', '/command/', command(w.types.full, 'device', [w.device]))).status).toBe(204);
    const row = (await findAll<CommandRow>(w.customer, '/command/'))[0];
    expect(row.command.pinGroupHashId).toBe(w.pinGroup);
    expect(await findAll(other, '/command/')).toEqual([]);
    expect((await other.request('GET', `/command/${row.command.hashId}`)).status).toBe(404);
    expect((await other.request('DELETE', `/command/${row.command.hashId}`)).status).toBe(404);
    // without SENSORS: no add
    const reader = await api.login('monitoring', ['READ']);
    expect((await reader.request<ErrorBody>('POST', '/command/', command(w.types.full, 'pinGroup', [w.pinGroup]))).body.key).toBe('right_error');
  });
});
