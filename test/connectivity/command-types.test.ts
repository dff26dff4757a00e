import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { addCommandType, addDeviceType, commandTypeBody, deviceTypeBody, field, findAll, expectParameterError, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface CommandType {
  hashId: string;
  name: string | Record<string, string>;
  start: string;
  end: string;
  fieldConfigurations: unknown[];
  channelSelect: string;
  environmentAccess: string;
}

const many = <T>(n: number, make: (i: number) => T) => Array.from({ length: n }, (_, i) => make(i));

describe('command types', () => {
  it("adds with the seed's defaults, gets, finds, updates and deletes", async () => {
    const c = await api.login('connectivity');
    const r = await c.request<{ hashId: string }>('POST', '/command-type/', commandTypeBody());
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ hashId: expect.stringMatching(/^[a-z0-9]+$/) });
    const hashId = r.body.hashId;
    const commandType: CommandType = {
      hashId,
      name: 'Measurement cycle',
      start: 'optional',
      end: 'disabled',
      fieldConfigurations: [field('interval', 'integer')],
      channelSelect: 'off',
      environmentAccess: 'full',
    };
    const get = await c.request('GET', `/command-type/${hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ commandType });
    const find = await c.request('GET', '/command-type/');
    expect(find.body).toEqual({ nextPageOffset: null, rows: [{ commandType }] });

    const update = await c.request('POST', `/command-type/${hashId}`, {
      name: { en: 'Cycle', nl: 'Cyclus' },
      start: 'required',
      end: 'optional',
      channelSelect: 'multiple',
      environmentAccess: 'read',
      fieldConfigurations: [{ existingKey: 'interval', fieldConfiguration: field('period', 'integer') }, field('note')],
    });
    expect(update.status).toBe(204);
    expect(update.body).toBeNull();
    // translated names are answered from Api-Version 7 (test/http/sdk-compat.test.ts)
    const after = await c.request<{ commandType: CommandType }>('GET', `/command-type/${hashId}`, undefined, { 'api-version': '7' });
    expect(after.body.commandType).toEqual({
      hashId,
      name: { en: 'Cycle', nl: 'Cyclus' },
      start: 'required',
      end: 'optional',
      channelSelect: 'multiple',
      environmentAccess: 'read',
      fieldConfigurations: [field('period', 'integer'), field('note')],
    });
    // a partial update leaves the rest alone
    expect((await c.request('POST', `/command-type/${hashId}`, { channelSelect: 'single' })).status).toBe(204);
    expect((await c.request<{ commandType: CommandType }>('GET', `/command-type/${hashId}`, undefined, { 'api-version': '7' })).body.commandType).toEqual({
      ...after.body.commandType,
      channelSelect: 'single',
    });

    expect((await c.request('DELETE', `/command-type/${hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/command-type/${hashId}`)).status).toBe(404);
    expect((await c.request('POST', `/command-type/${hashId}`, { name: 'x' })).status).toBe(404);
    expect((await c.request('DELETE', `/command-type/${hashId}`)).status).toBe(404);
    expect((await c.request<{ rows: unknown[] }>('GET', '/command-type/')).body.rows).toEqual([]);
    // soft delete: the row stays
    const stored = await api.ctx.db.query('SELECT deleted_at FROM command_type WHERE hash_id = $1', [hashId]);
    expect(stored.rows[0].deleted_at).toBeInstanceOf(Date);
  });

  it('enforces the limits, naming the field', async () => {
    const c = await api.login('connectivity');
    await expectParameterError(
      await c.request('POST', '/command-type/', commandTypeBody({ fieldConfigurations: many(51, (i) => field(`f${i}`)) })),
      'fieldConfigurations',
      '50',
    );
    await expectParameterError(await c.request('POST', '/command-type/', { name: 'x' }), 'fieldConfigurations', 'required');
    await expectParameterError(await c.request('POST', '/command-type/', { fieldConfigurations: [] }), 'name', 'required');
    await expectParameterError(await c.request('POST', '/command-type/', commandTypeBody({ name: '' })), 'name');
    await expectParameterError(await c.request('POST', '/command-type/', commandTypeBody({ name: 'x'.repeat(256) })), 'name');
    await expectParameterError(await c.request('POST', '/command-type/', commandTypeBody({ start: 'sometimes' })), 'start', 'required, optional, disabled');
    await expectParameterError(await c.request('POST', '/command-type/', commandTypeBody({ end: 'never' })), 'end');
    await expectParameterError(await c.request('POST', '/command-type/', commandTypeBody({ channelSelect: 'all' })), 'channelSelect', 'single, multiple, off');
    await expectParameterError(
      await c.request('POST', '/command-type/', commandTypeBody({ environmentAccess: 'write' })),
      'environmentAccess',
      'full, read, none',
    );
    await expectParameterError(
      await c.request('POST', '/command-type/', commandTypeBody({ fieldConfigurations: [field('a'), field('a')] })),
      'fieldConfigurations',
      'twice',
    );
    await expectParameterError(await c.request('POST', '/command-type/', commandTypeBody({ supplierOnly: true })), 'supplierOnly', 'not allowed');
    // the limit itself is allowed
    expect((await c.request('POST', '/command-type/', commandTypeBody({ fieldConfigurations: many(50, (i) => field(`f${i}`)) }))).status).toBe(200);

    const hashId = await addCommandType(c);
    await expectParameterError(
      await c.request('POST', `/command-type/${hashId}`, { fieldConfigurations: many(51, (i) => ({ fieldConfiguration: field(`f${i}`) })) }),
      'fieldConfigurations',
      '50',
    );
    await expectParameterError(await c.request('POST', `/command-type/${hashId}`, { start: 'sometimes', name: 'not applied' }), 'start');
    await expectParameterError(
      await c.request('POST', `/command-type/${hashId}`, { fieldConfigurations: [field('a'), { fieldConfiguration: field('a') }], name: 'not applied' }),
      'fieldConfigurations',
      'twice',
    );
    expect((await c.request<{ commandType: CommandType }>('GET', `/command-type/${hashId}`)).body.commandType).toMatchObject({
      name: 'Measurement cycle',
      start: 'optional',
    });
  });

  it('pages through every command type once (keyset) and searches by name', async () => {
    const c = await api.login('connectivity');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await addCommandType(c, { name: i % 2 ? `Command ${i}` : { en: `Command ${i}`, nl: `Opdracht ${i}` } }));
    const rows = await findAll<{ commandType: CommandType }>(c, '/command-type/');
    expect(rows.map((r) => r.commandType.hashId)).toEqual([...ids].sort().reverse());
    const byName = await findAll<{ commandType: CommandType }>(c, '/command-type/?sortBy=name&descending=false', 3);
    expect(byName.map((r) => r.commandType.hashId)).toEqual(ids);
    const search = await c.request<{ rows: { commandType: CommandType }[] }>('GET', '/command-type/?search=mand%202');
    expect(search.body.rows.map((r) => r.commandType.hashId)).toEqual([ids[2]]);
  });

  it('is what device types refer to: unknown ids refused, get expands them, delete refused while referred to', async () => {
    const c = await api.login('connectivity');
    const cycle = await addCommandType(c, { name: 'Cycle' });
    const reboot = await addCommandType(c, { name: 'Reboot', channelSelect: 'single' });
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ commandTypeHashIds: [cycle, 'nosuchcommandtype'] })),
      'commandTypeHashIds',
      'nosuchcommandtype',
    );
    const typeA = await addDeviceType(c, { commandTypeHashIds: [reboot, cycle], measurementCycleCommandTypeHashId: cycle });
    const typeB = await addDeviceType(c, { commandTypeHashIds: [cycle] });
    await expectParameterError(
      await c.request('POST', `/device-type/${typeB}`, { commandTypeHashIds: ['nosuchcommandtype'] }),
      'commandTypeHashIds',
      'nosuchcommandtype',
    );

    const get = await c.request<{ commandTypes: CommandType[] }>('GET', `/device-type/${typeA}`);
    expect(get.body.commandTypes.map((t) => [t.hashId, t.name, t.channelSelect])).toEqual([
      [reboot, 'Reboot', 'single'],
      [cycle, 'Cycle', 'off'],
    ]);

    const refused = await c.request<ErrorBody>('DELETE', `/command-type/${cycle}`);
    expect(refused.status).toBe(409);
    expect(refused.body.key).toBe('conflict_error');
    expect(refused.body.message).toContain(typeA);
    expect(refused.body.message).toContain(typeB);
    expect((await c.request('GET', `/command-type/${cycle}`)).status).toBe(200);

    // once no live device type lists it, delete goes through; then device types cannot refer to it any more
    expect((await c.request('DELETE', `/device-type/${typeB}`)).status).toBe(204);
    expect((await c.request('POST', `/device-type/${typeA}`, { commandTypeHashIds: [reboot], measurementCycleCommandTypeHashId: null })).status).toBe(204);
    expect((await c.request('DELETE', `/command-type/${cycle}`)).status).toBe(204);
    await expectParameterError(await c.request('POST', `/device-type/${typeA}`, { commandTypeHashIds: [reboot, cycle] }), 'commandTypeHashIds', cycle);
    await expectParameterError(await c.request('POST', '/device-type/', deviceTypeBody({ commandTypeHashIds: [cycle] })), 'commandTypeHashIds');
  });

  it("keeps environments apart: B cannot see, touch or refer to A's command type", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const hashId = await addCommandType(a);
    expect((await b.request<ErrorBody>('GET', `/command-type/${hashId}`)).body).toMatchObject({ key: 'not_found_error' });
    expect((await b.request('POST', `/command-type/${hashId}`, { name: 'stolen' })).status).toBe(404);
    expect((await b.request('DELETE', `/command-type/${hashId}`)).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', '/command-type/')).body.rows).toEqual([]);
    await expectParameterError(await b.request('POST', '/device-type/', deviceTypeBody({ commandTypeHashIds: [hashId] })), 'commandTypeHashIds', hashId);
    const own = await addDeviceType(b);
    await expectParameterError(await b.request('POST', `/device-type/${own}`, { commandTypeHashIds: [hashId] }), 'commandTypeHashIds', hashId);
    // B's device types do not block A's delete either way; A's object is untouched
    expect((await a.request<{ commandType: CommandType }>('GET', `/command-type/${hashId}`)).body.commandType.name).toBe('Measurement cycle');
    expect((await a.request('DELETE', `/command-type/${hashId}`)).status).toBe(204);
  });

  it('is added by connectivity environments only; a monitoring environment reads those of its claimed devices', async () => {
    const m = await api.login('monitoring');
    expect((await m.request('POST', '/command-type/', commandTypeBody())).status).toBe(403);
    expect((await m.request<{ rows: unknown[] }>('GET', '/command-type/')).body.rows).toEqual([]);
  });
});
