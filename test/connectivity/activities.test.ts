import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newHashId } from '../../src/app/hash-id.ts';
import { insertActivities, type ActivityRow } from '../../src/connectivity/activities/store.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, findAll } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Summary {
  activity: { hashId: string; createdAt: string; triggerType: string; failed: boolean };
  device: { hashId: string } | null;
  deviceType: { hashId: string } | null;
}

async function ids(client: ApiClient, deviceTypeHashId: string, deviceHashId: string) {
  const { rows } = await api.ctx.db.query<{ env: number; type: number; device: number }>(
    `SELECT e.id AS env, t.id AS type, d.id AS device FROM environment e JOIN device_type t ON t.environment_id = e.id
       JOIN device d ON d.device_type_id = t.id WHERE e.hash_id = $1 AND t.hash_id = $2 AND d.hash_id = $3`,
    [client.environmentHashId, deviceTypeHashId, deviceHashId],
  );
  return rows[0];
}

async function setUp(client: ApiClient) {
  const deviceTypeHashId = await addDeviceType(client);
  const add = await client.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: `dev-${newHashId()}`,
    deviceTypeHashId,
    psk: '0011',
    pskIdentity: `act-${newHashId(16)}`,
  });
  return { deviceTypeHashId, deviceHashId: add.body.hashId, ...(await ids(client, deviceTypeHashId, add.body.hashId)) };
}

function row(environmentId: number, deviceId: number | null, deviceTypeId: number | null, more: Partial<ActivityRow> = {}): ActivityRow {
  return {
    hashId: newHashId(),
    environmentId,
    deviceId,
    deviceTypeId,
    triggerType: 'handleIncomingRequest',
    triggerData: { webRequest: { method: 'POST', url: { path: '/' } } },
    failed: false,
    log: [{ type: 'log', message: 'hello' }],
    activities: [{ triggerType: 'parseReport', failed: false }],
    startedAt: new Date('2024-05-01T10:00:00.000Z'),
    finishedAt: new Date('2024-05-01T10:00:00.050Z'),
    ...more,
  };
}

describe('supplier activities', () => {
  it('stores a batch in one insert, idempotently, and serves find and get', async () => {
    const c = await api.login('connectivity');
    const s = await setUp(c);
    const first = row(s.env, s.device, s.type, { failed: true, log: [{ type: 'error', message: 'boom at line 3' }] });
    const batch = [first, ...Array.from({ length: 6 }, () => row(s.env, s.device, s.type))];
    await insertActivities(api.ctx.db, batch, api.ctx.config.supplierCode.maxActivityBytes);
    // a retried job writes the same hashIds again: nothing doubles
    await insertActivities(api.ctx.db, [first], api.ctx.config.supplierCode.maxActivityBytes);
    await insertActivities(api.ctx.db, [], api.ctx.config.supplierCode.maxActivityBytes);

    const get = await c.request<Record<string, unknown>>('GET', `/supplier-activity/${first.hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({
      device: expect.objectContaining({ hashId: s.deviceHashId, supplierHashId: c.environmentHashId, deviceTypeHashId: s.deviceTypeHashId }),
      deviceType: expect.objectContaining({ hashId: s.deviceTypeHashId }),
      // the SDK's shape of the stored activity: test/connectivity/sdk-shapes.test.ts
      activity: expect.objectContaining({
        hashId: first.hashId,
        rootActivityHashId: first.hashId,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        triggerType: 'handleIncomingRequest',
        failed: true,
        log: [{ type: 'error', message: 'boom at line 3' }],
        activities: [expect.objectContaining({ triggerType: 'parseReport', failed: false, rootActivityHashId: first.hashId })],
      }),
    });

    // one batch shares its created_at: keyset paging must still return every row once
    const all = await findAll<Summary>(c, '/supplier-activity/');
    expect(all.map((r) => r.activity.hashId).sort()).toEqual(batch.map((r) => r.hashId).sort());
    expect(all[0]).toEqual({
      activity: { hashId: expect.any(String), createdAt: expect.any(String), triggerType: 'handleIncomingRequest', failed: expect.any(Boolean) },
      device: expect.objectContaining({ hashId: s.deviceHashId }),
      deviceType: expect.objectContaining({ hashId: s.deviceTypeHashId }),
    });
    const failed = await c.request<{ rows: Summary[] }>('GET', '/supplier-activity/?failed=true');
    expect(failed.body.rows.map((r) => r.activity.hashId)).toEqual([first.hashId]);
  });

  it('pages newest first and filters by device and device type', async () => {
    const c = await api.login('connectivity');
    const s = await setUp(c);
    const other = await setUp(c);
    const older = row(s.env, s.device, s.type);
    await insertActivities(api.ctx.db, [older], api.ctx.config.supplierCode.maxActivityBytes);
    await new Promise((r) => setTimeout(r, 5));
    const newer = row(s.env, s.device, s.type, { triggerType: 'handleCommandDue' });
    await insertActivities(
      api.ctx.db,
      [newer, row(other.env, other.device, other.type), row(s.env, null, null, { triggerType: 'handleWebhook' })],
      api.ctx.config.supplierCode.maxActivityBytes,
    );

    const all = await findAll<Summary>(c, '/supplier-activity/', 1);
    expect(all).toHaveLength(4);
    expect(all.map((r) => r.activity.hashId).indexOf(newer.hashId)).toBeLessThan(all.map((r) => r.activity.hashId).indexOf(older.hashId));
    expect(all.at(-1)!.activity.hashId).toBe(older.hashId);
    const times = all.map((r) => r.activity.createdAt);
    expect([...times].sort().reverse()).toEqual(times);
    expect(all.find((r) => r.activity.triggerType === 'handleWebhook')).toMatchObject({ device: null, deviceType: null });

    const byDevice = await findAll<Summary>(c, `/supplier-activity/?deviceHashId=${s.deviceHashId}`, 1);
    expect(byDevice.map((r) => r.activity.hashId)).toEqual([newer.hashId, older.hashId]);
    const byType = await findAll<Summary>(c, `/supplier-activity/?deviceTypeHashId=${other.deviceTypeHashId}`);
    expect(byType.map((r) => r.device?.hashId)).toEqual([other.deviceHashId]);
    const byTrigger = await c.request<{ rows: Summary[] }>('GET', '/supplier-activity/?triggerType=handleCommandDue');
    expect(byTrigger.body.rows.map((r) => r.activity.hashId)).toEqual([newer.hashId]);
    const oldestFirst = await findAll<Summary>(c, '/supplier-activity/?descending=false');
    expect(oldestFirst[0].activity.hashId).toBe(older.hashId);
  });

  it('keeps an activity when its device is deleted', async () => {
    const c = await api.login('connectivity');
    const s = await setUp(c);
    const r = row(s.env, s.device, s.type);
    await insertActivities(api.ctx.db, [r], api.ctx.config.supplierCode.maxActivityBytes);
    expect((await c.request('POST', '/device/delete', { hashIds: [s.deviceHashId] })).status).toBe(204);
    const get = await c.request<{ device: unknown; deviceType: { hashId: string } }>('GET', `/supplier-activity/${r.hashId}`);
    expect(get.status).toBe(200);
    expect(get.body.device).toBeNull();
    expect(get.body.deviceType.hashId).toBe(s.deviceTypeHashId);
  });

  it("keeps environments apart: B cannot see A's activities", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const s = await setUp(a);
    const r = row(s.env, s.device, s.type);
    await insertActivities(api.ctx.db, [r], api.ctx.config.supplierCode.maxActivityBytes);
    expect((await b.request<{ key: string }>('GET', `/supplier-activity/${r.hashId}`)).body).toMatchObject({ key: 'not_found_error' });
    expect((await b.request<{ rows: unknown[] }>('GET', '/supplier-activity/')).body.rows).toEqual([]);
    expect((await b.request<{ rows: unknown[] }>('GET', `/supplier-activity/?deviceHashId=${s.deviceHashId}`)).body.rows).toEqual([]);
    expect((await a.request('GET', `/supplier-activity/${r.hashId}`)).status).toBe(200);
  });
});

/** An activity's triggerData as stored (activity get shows it in the SDK's shapes, src/connectivity/activities/view.ts). */
const storedTriggerData = async (hashId: string) =>
  (await api.ctx.db.query<{ trigger_data: unknown }>('SELECT trigger_data FROM supplier_activity WHERE hash_id = $1', [hashId])).rows[0].trigger_data;

describe('activities as stored', () => {
  it('a batch with a NUL, a lone surrogate and JSON too deep to serialise stores every row, each saying what was changed', async () => {
    const c = await api.login('connectivity');
    const s = await setUp(c);
    let deep: unknown = 'bottom';
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const nul = row(s.env, s.device, s.type, { log: [{ type: 'log', message: 'a\u0000b' }] });
    const surrogate = row(s.env, s.device, s.type, { triggerData: { text: 'x\ud800y', 'k\udfffey': 1 } });
    const tooDeep = row(s.env, s.device, s.type, { triggerData: { body: deep } });
    const plain = row(s.env, s.device, s.type);
    await insertActivities(api.ctx.db, [nul, surrogate, tooDeep, plain], api.ctx.config.supplierCode.maxActivityBytes);

    const get = async (hashId: string) =>
      (await c.request<{ activity: { log: { type: string; message: string }[]; triggerData: unknown } }>('GET', `/supplier-activity/${hashId}`)).body.activity;
    expect((await get(nul.hashId)).log).toEqual([
      { type: 'log', message: 'a\ufffdb' },
      { type: 'error', message: '1 character that cannot be stored (NUL, unpaired surrogate) in this activity replaced by U+FFFD' },
    ]);
    const stored = await get(surrogate.hashId);
    expect(await storedTriggerData(surrogate.hashId)).toEqual({ text: 'x\ufffdy', 'k\ufffdey': 1 });
    expect(stored.log.at(-1)?.message).toMatch(/^2 characters that cannot be stored/);
    const deepStored = await get(tooDeep.hashId);
    expect(await storedTriggerData(tooDeep.hashId)).toMatchObject({ truncated: true, bytes: null, reason: 'not serialisable as JSON (nested too deep)' });
    expect(deepStored.log.at(-1)?.message).toMatch(/^this activity is not serialisable as JSON, over the limit of \d+ \(ACTIVITY_MAX_BYTES\)/);
    expect((await get(plain.hashId)).log).toEqual(plain.log);
  });

  it('bounds an activity to maxBytes: parts that do not fit become marked previews, logs keep the lines that fit', async () => {
    const c = await api.login('connectivity');
    const s = await setUp(c);
    const big = row(s.env, s.device, s.type, {
      triggerData: { request: 'r'.repeat(3000) },
      log: Array.from({ length: 100 }, (_, i) => ({ type: 'log' as const, message: `line ${i} ${'l'.repeat(50)}` })),
      activities: [{ triggerType: 'parseReport', failed: false, log: [], triggerData: { payload: 'p'.repeat(5000) } }],
    });
    await insertActivities(api.ctx.db, [big], 8000);
    const { activity } = (
      await c.request<{ activity: { log: { type: string; message: string }[]; triggerData: unknown; activities: { triggerData: unknown }[] } }>(
        'GET',
        `/supplier-activity/${big.hashId}`,
      )
    ).body;
    expect(await storedTriggerData(big.hashId)).toEqual({ request: 'r'.repeat(3000) });
    expect(activity.activities[0].triggerData).toMatchObject({ truncated: true, limit: 8000, reason: 'ACTIVITY_MAX_BYTES' });
    const logs = activity.log.filter((l) => l.type === 'log');
    expect(logs.length).toBeGreaterThan(10);
    expect(logs.length).toBeLessThan(100);
    expect(activity.log.filter((l) => l.type === 'error').map((l) => l.message)).toEqual([
      `${100 - logs.length} more log lines not stored (ACTIVITY_MAX_BYTES: 8000 bytes per activity)`,
      expect.stringMatching(/^this activity is \d+ bytes of JSON, over the limit of 8000 \(ACTIVITY_MAX_BYTES\): 2 parts stored cut short/),
    ]);
    const { rows } = await api.ctx.db.query<{ bytes: number }>(
      'SELECT octet_length(trigger_data::text) + octet_length(log::text) + octet_length(activities::text) AS bytes FROM supplier_activity WHERE hash_id = $1',
      [big.hashId],
    );
    expect(rows[0].bytes).toBeLessThan(9000);
  });
});
