import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { environmentClient } from '../support/provision.ts';
import { linkedDevice, ok, type LinkedDevice } from './linked-device.ts';

// What a monitoring environment reads of its claimed devices' supplier: their device types, the command types it
// may use (M-READ in the interface's tables), and the quantities its pins' measurements carry.

let ctx: AppContext;
let service: RunningService;
let world: LinkedDevice;
let commandTypes: { shown: string; hidden: string; unused: string };

beforeAll(async () => {
  ctx = await testContext();
  service = await startService(ctx, ['all']);
  world = await linkedDevice(ctx, service, ['READ', 'STATIC', 'SENSORS']);
  const commandType = async (name: string, environmentAccess: string) =>
    ok(
      await world.supplier.request<{ hashId: string }>('POST', '/command-type/', {
        name,
        start: 'required',
        end: 'disabled',
        channelSelect: 'off',
        environmentAccess,
        fieldConfigurations: [],
      }),
    ).hashId;
  commandTypes = {
    shown: await commandType('Open valve', 'full'),
    hidden: await commandType('Calibrate', 'none'),
    unused: await commandType('Reboot', 'full'),
  };
  expect(
    (await world.supplier.request('POST', `/device-type/${world.deviceTypeHashId}`, { commandTypeHashIds: [commandTypes.shown, commandTypes.hidden] })).status,
  ).toBe(204);
  await world.reportUntilOnPin(230);
});
afterAll(async () => {
  await service.stop();
  await closeContext(ctx);
});

describe('a monitoring environment reads what its claimed devices use', () => {
  it('device-type find answers the types of its claimed devices, and only those', async () => {
    ok(
      await world.supplier.request('POST', '/device-type/', {
        name: 'not claimed',
        eventHandler: 'function handle() {}',
        fieldConfigurations: [],
        pinGroupFieldConfigurations: [],
        channels: [],
        commandTypeHashIds: [],
      }),
    );
    const found = ok(await world.customer.request<{ rows: { deviceType: { hashId: string; name: string } }[] }>('GET', '/device-type/'));
    expect(found.rows.map((r) => r.deviceType.hashId)).toEqual([world.deviceTypeHashId]);
    // get stays the supplier's: it answers the supplier's code
    expect((await world.customer.request<{ key: string }>('GET', `/device-type/${world.deviceTypeHashId}`)).body.key).toBe('right_error');
  });

  it('command-type find and get answer the command types of those device types, not those whose environmentAccess is none', async () => {
    const found = ok(await world.customer.request<{ rows: { commandType: { hashId: string } }[] }>('GET', '/command-type/'));
    expect(found.rows.map((r) => r.commandType.hashId)).toEqual([commandTypes.shown]);
    expect(
      ok(await world.customer.request<{ commandType: { hashId: string; name: string } }>('GET', `/command-type/${commandTypes.shown}`)).commandType.name,
    ).toBe('Open valve');
    for (const hashId of [commandTypes.hidden, commandTypes.unused]) {
      expect((await world.customer.request('GET', `/command-type/${hashId}`)).status).toBe(404);
    }
    // adding or changing them stays the supplier's
    expect((await world.customer.request('DELETE', `/command-type/${commandTypes.shown}`)).status).toBe(403);
  });

  it('quantity get answers a supplier quantity that measurements on its pins carry; another environment gets 404', async () => {
    const got = ok(await world.customer.request<{ quantity: { hashId: string; name: string; unit: string } }>('GET', `/quantity/${world.quantityHashId}`));
    expect(got.quantity).toMatchObject({ hashId: world.quantityHashId, name: 'Voltage', unit: 'V' });
    const stranger = await environmentClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`, 'monitoring', 'stranger', ['READ', 'ENVIRONMENT_ADMIN']);
    expect((await stranger.request('GET', `/quantity/${world.quantityHashId}`)).status).toBe(404);
    // reading is not owning: the supplier's quantity is not changed from a monitoring environment
    expect((await stranger.request('POST', `/quantity/${world.quantityHashId}`, { unit: 'mV' })).status).toBe(404);
    expect(ok(await stranger.request<{ rows: unknown[] }>('GET', '/device-type/')).rows).toEqual([]);
    expect(ok(await stranger.request<{ rows: unknown[] }>('GET', '/command-type/')).rows).toEqual([]);
    expect((await stranger.request('GET', `/command-type/${commandTypes.shown}`)).status).toBe(404);
  });
});
