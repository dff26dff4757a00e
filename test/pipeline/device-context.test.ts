import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable, Sql } from '../../src/app/db.ts';
import { DeviceContextLoader } from '../../src/pipeline/device-context.ts';
import { addDeviceType } from '../connectivity/fixtures.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';

let api: TestApi;
let client: ApiClient;
const devices: string[] = [];
beforeAll(async () => {
  api = await startTestApi();
  client = await api.login('connectivity');
  const deviceTypeHashId = await addDeviceType(client);
  for (let i = 0; i < 3; i++) {
    const added = await client.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: `ctx-${i}`,
      deviceTypeHashId,
      psk: randomBytes(16).toString('hex'),
      pskIdentity: `ctx-${randomBytes(6).toString('hex')}`,
    });
    expect(added.status).toBe(200);
    devices.push(added.body.hashId);
  }
});
afterAll(async () => {
  await api.close();
});

/** The test database, counting the device reads and able to hold them until released. */
function watchedDb() {
  const held: (() => void)[] = [];
  const db = {
    deviceReads: 0,
    hold: false,
    release() {
      held.splice(0).forEach((go) => go());
    },
    async query(sql: Sql, params?: unknown[]) {
      if ((typeof sql === 'string' ? sql : sql.text).includes('FROM device d')) {
        db.deviceReads++;
        if (db.hold) await new Promise<void>((go) => held.push(go));
      }
      return api.ctx.db.query(sql, params);
    },
  };
  return db as typeof db & Queryable;
}

const rename = (hashId: string, name: string) => api.ctx.db.query('UPDATE device SET supplier_device_identifier = $2 WHERE hash_id = $1', [hashId, name]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the worker's device loader", () => {
  it('reads the devices asked for together with one query, unknown ones as null', async () => {
    const db = watchedDb();
    const loader = new DeviceContextLoader(db, 10_000);
    const got = await Promise.all([...devices, devices[0], 'nosuchdevice'].map((h) => loader.device(h)));
    expect(db.deviceReads).toBe(1);
    expect(got.map((d) => d?.supplierDeviceIdentifier ?? null)).toEqual(['ctx-0', 'ctx-1', 'ctx-2', 'ctx-0', null]);
    expect(got[0]?.environmentHashId).toBe(client.environmentHashId);
    await loader.device(devices[1]);
    expect(db.deviceReads).toBe(1);
  });

  it('serves a copy past half its ttl at once and reads it again behind it; a change shows within the ttl', async () => {
    const db = watchedDb();
    const loader = new DeviceContextLoader(db, 400);
    expect((await loader.device(devices[1]))?.supplierDeviceIdentifier).toBe('ctx-1');
    await rename(devices[1], 'ctx-1b');
    await sleep(250);
    db.hold = true;
    // past half the ttl: the copy in hand comes back without waiting for the (held) read
    expect((await loader.device(devices[1]))?.supplierDeviceIdentifier).toBe('ctx-1');
    await sleep(10);
    expect(db.deviceReads).toBe(2);
    db.hold = false;
    db.release();
    await sleep(20);
    expect((await loader.device(devices[1]))?.supplierDeviceIdentifier).toBe('ctx-1b');
    expect(db.deviceReads).toBe(2);
    await rename(devices[1], 'ctx-1');
  });

  it('never brings back a copy forgotten while it was being read again', async () => {
    const db = watchedDb();
    const loader = new DeviceContextLoader(db, 400);
    expect((await loader.device(devices[2]))?.supplierDeviceIdentifier).toBe('ctx-2');
    await sleep(250);
    db.hold = true;
    await loader.device(devices[2]); // starts the background read, held with the old name
    await sleep(20);
    await rename(devices[2], 'ctx-2b');
    loader.forgetDevice(devices[2]);
    const fresh = loader.device(devices[2]);
    db.hold = false;
    db.release();
    await sleep(20);
    expect((await fresh)?.supplierDeviceIdentifier).toBe('ctx-2b');
    expect((await loader.device(devices[2]))?.supplierDeviceIdentifier).toBe('ctx-2b');
    await rename(devices[2], 'ctx-2');
  });

  it('reads again after the ttl, and forgets a failed read', async () => {
    const db = watchedDb();
    const loader = new DeviceContextLoader(db, 100);
    await loader.device(devices[0]);
    await sleep(150);
    await loader.device(devices[0]);
    expect(db.deviceReads).toBe(2);
    const failing = {
      query: async () => {
        throw new Error('database down');
      },
    } as unknown as Queryable;
    const broken = new DeviceContextLoader(failing, 10_000);
    await expect(broken.device(devices[0])).rejects.toThrow('database down');
    await expect(broken.device(devices[0])).rejects.toThrow('database down');
  });
});
