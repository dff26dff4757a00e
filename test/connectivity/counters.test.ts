import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  counterHashKey,
  counterRecorder,
  hourOf,
  countDeviceEvent,
  dirtySetOf,
  dirtySetOfDevice,
  BUILTIN_COUNTERS,
  COUNTER_SHARDS,
  COUNTER_TTL_SECONDS,
  CounterRecorder,
} from '../../src/connectivity/counters/recorder.ts';
import { COUNTER_RETENTION_DAYS, flushCounters, pruneCounters, startCounterFlusher } from '../../src/connectivity/counters/store.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, expectParameterError } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Entry {
  key: string;
  name: string;
  total: number;
  values: { hour: string; value: number }[];
}

async function device(c: ApiClient): Promise<string> {
  const type = await addDeviceType(c);
  const id = `cnt-${randomBytes(6).toString('hex')}`;
  const r = await c.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: id,
    deviceTypeHashId: type,
    psk: '00ff'.repeat(8),
    pskIdentity: id,
  });
  expect(r.status).toBe(200);
  return r.body.hashId;
}

const url = (hashId: string, from: string, to: string) =>
  `/device/device/${hashId}/connectivity-counters?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
const byKey = (entries: Entry[]) => Object.fromEntries(entries.map((e) => [e.key, e]));

describe('hourOf', () => {
  it('is the UTC hour of each date, also when dates of different hours alternate', () => {
    const dates = ['2026-11-22T01:59:59.999Z', '2026-11-22T02:00:00.000Z', '2026-11-22T01:00:00.000Z', '1969-12-31T23:30:00.000Z', '2026-11-22T02:30:00.000Z'];
    expect(dates.map((d) => hourOf(new Date(d)))).toEqual(['2026-11-22T01', '2026-11-22T02', '2026-11-22T01', '1969-12-31T23', '2026-11-22T02']);
  });
});

describe('connectivity counters', () => {
  it('counts per key and hour, answers every built-in counter, and survives the Redis hash expiring once flushed', async () => {
    const c = await api.login('connectivity');
    const hashId = await device(c);
    const now = new Date();
    const hour = (h: number) => new Date(Math.floor(now.getTime() / 3600_000) * 3600_000 - h * 3600_000);
    countDeviceEvent(api.ctx, hashId, 'contacts', hour(2));
    countDeviceEvent(api.ctx, hashId, 'contacts', new Date(hour(2).getTime() + 59 * 60_000));
    countDeviceEvent(api.ctx, hashId, 'contacts', hour(0));
    countDeviceEvent(api.ctx, hashId, 'handshakeFailures', hour(1));
    countDeviceEvent(api.ctx, hashId, 'contacts', hour(30)); // outside the range asked below
    await counterRecorder(api.ctx).drain();

    const from = hour(3).toISOString();
    const to = new Date(now.getTime() + 1000).toISOString();
    const r = await c.request<Entry[]>('GET', url(hashId, from, to));
    expect(r.status).toBe(200);
    expect(r.body.map((e) => e.key)).toEqual(Object.keys(BUILTIN_COUNTERS));
    const got = byKey(r.body);
    expect(got.contacts).toEqual({
      key: 'contacts',
      name: BUILTIN_COUNTERS.contacts,
      total: 3,
      values: [
        { hour: hour(2).toISOString(), value: 2 },
        { hour: hour(0).toISOString(), value: 1 },
      ],
    });
    expect(got.handshakeFailures.values).toEqual([{ hour: hour(1).toISOString(), value: 1 }]);
    expect(got.reports).toEqual({ key: 'reports', name: BUILTIN_COUNTERS.reports, total: 0, values: [] });

    // flushed to PostgreSQL, twice (absolute values: nothing doubles), then the hashes vanish from Redis
    expect(await flushCounters(api.ctx)).toBeGreaterThanOrEqual(4);
    countDeviceEvent(api.ctx, hashId, 'contacts', hour(0));
    await counterRecorder(api.ctx).drain();
    await flushCounters(api.ctx);
    const stored = await api.ctx.db.query<{ key: string; value: string }>(
      `SELECT c.key, c.value FROM device_counter_hour c JOIN device d ON d.id = c.device_id WHERE d.hash_id = $1 AND c.hour = $2`,
      [hashId, hour(0)],
    );
    expect(stored.rows.map((r) => ({ key: r.key, value: Number(r.value) }))).toEqual([{ key: 'contacts', value: 2 }]);
    for (const h of [0, 1, 2, 30]) await api.ctx.redis.del(counterHashKey(api.ctx.config, hashId, hour(h).toISOString().slice(0, 13)));
    const after = byKey((await c.request<Entry[]>('GET', url(hashId, from, to))).body);
    expect(after.contacts.total).toBe(4);
    expect(after.handshakeFailures.total).toBe(1);
    // the older hour, asked for on its own
    const old = byKey((await c.request<Entry[]>('GET', url(hashId, hour(31).toISOString(), hour(29).toISOString()))).body);
    expect(old.contacts.values).toEqual([{ hour: hour(30).toISOString(), value: 1 }]);
  });

  it("lists the environment's counter keys by their current names; a deleted key disappears", async () => {
    const c = await api.login('connectivity');
    const hashId = await device(c);
    const key = (await c.request<{ hashId: string }>('POST', '/device-connectivity-counter-key/', { name: 'Uplinks' })).body.hashId;
    countDeviceEvent(api.ctx, hashId, key);
    countDeviceEvent(api.ctx, hashId, key);
    await counterRecorder(api.ctx).drain();
    const range = [new Date(Date.now() - 3600_000).toISOString(), new Date(Date.now() + 1000).toISOString()] as const;
    let entries = (await c.request<Entry[]>('GET', url(hashId, ...range))).body;
    expect(entries.at(-1)).toMatchObject({ key, name: 'Uplinks', total: 2 });
    expect((await c.request('POST', `/device-connectivity-counter-key/${key}`, { name: 'Frames' })).status).toBe(204);
    entries = (await c.request<Entry[]>('GET', url(hashId, ...range))).body;
    expect(entries.at(-1)).toMatchObject({ key, name: 'Frames', total: 2 });
    expect((await c.request('DELETE', `/device-connectivity-counter-key/${key}`)).status).toBe(204);
    entries = (await c.request<Entry[]>('GET', url(hashId, ...range))).body;
    expect(entries.map((e) => e.key)).toEqual(Object.keys(BUILTIN_COUNTERS));
  });

  it('validates from and to, naming the field and the limit', async () => {
    const c = await api.login('connectivity');
    const hashId = await device(c);
    const t = Date.parse('2026-11-01T00:00:00Z');
    expectParameterError(await c.request('GET', url(hashId, new Date(t).toISOString(), new Date(t).toISOString())), 'from', 'before');
    expectParameterError(await c.request('GET', url(hashId, new Date(t).toISOString(), new Date(t + 745 * 3600_000).toISOString())), 'to', '744');
    expect((await c.request('GET', url(hashId, new Date(t).toISOString(), new Date(t + 744 * 3600_000).toISOString()))).status).toBe(200);
    expectParameterError(await c.request('GET', `/device/device/${hashId}/connectivity-counters?from=yesterday`), 'from');
    expectParameterError(await c.request('GET', `/device/device/${hashId}/connectivity-counters?until=x`), 'until');
    // defaults: the last 24 hours
    countDeviceEvent(api.ctx, hashId, 'reports');
    await counterRecorder(api.ctx).drain();
    const r = await c.request<Entry[]>('GET', `/device/device/${hashId}/connectivity-counters`);
    expect(r.status).toBe(200);
    expect(byKey(r.body).reports.total).toBe(1);
  });

  it("never shows another environment's device, and a monitoring account cannot ask", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const hashId = await device(a);
    const r = await b.request<{ key: string }>('GET', `/device/device/${hashId}/connectivity-counters`);
    expect(r.status).toBe(404);
    expect(r.body.key).toBe('not_found_error');
    const m = await api.login('monitoring');
    expect((await m.request('GET', `/device/device/${hashId}/connectivity-counters`)).status).toBe(403);
    expect((await a.request('GET', `/device/device/nosuchdevice/connectivity-counters`)).status).toBe(404);
  });

  it('a stopping flusher copies what is left to PostgreSQL', async () => {
    const c = await api.login('connectivity');
    const hashId = await device(c);
    const flusher = startCounterFlusher(api.ctx, 3_600_000);
    countDeviceEvent(api.ctx, hashId, 'handlerFailures');
    await counterRecorder(api.ctx).drain();
    await flusher.stop();
    const rows = await api.ctx.db.query<{ key: string; value: number }>(
      'SELECT c.key, c.value FROM device_counter_hour c JOIN device d ON d.id = c.device_id WHERE d.hash_id = $1',
      [hashId],
    );
    expect(rows.rows.map((r) => [r.key, Number(r.value)])).toEqual([['handlerFailures', 1]]);
  });

  it('prunes hours older than the retention from PostgreSQL', async () => {
    const c = await api.login('connectivity');
    const hashId = await device(c);
    const now = new Date('2026-11-22T12:00:00Z');
    const day = 24 * 3600_000;
    const old = new Date(now.getTime() - (COUNTER_RETENTION_DAYS + 1) * day);
    const kept = new Date(now.getTime() - (COUNTER_RETENTION_DAYS - 1) * day);
    await api.ctx.db.query(
      `INSERT INTO device_counter_hour (device_id, hour, key, value) SELECT id, unnest($2::timestamptz[]), 'contacts', 5 FROM device WHERE hash_id = $1`,
      [hashId, [old, kept]],
    );
    expect(await pruneCounters(api.ctx, now)).toBeGreaterThanOrEqual(1);
    const rows = await api.ctx.db.query<{ hour: Date }>('SELECT c.hour FROM device_counter_hour c JOIN device d ON d.id = c.device_id WHERE d.hash_id = $1', [
      hashId,
    ]);
    expect(rows.rows.map((r) => r.hour.toISOString())).toEqual([kept.toISOString()]);
  });

  it('writes large batches whole: every hash gets its increments, its TTL and its dirty mark', async () => {
    const ctx = { ...api.ctx, config: { ...api.ctx.config, queueName: `${api.ctx.config.queueName}-bulk` } };
    const recorder = new CounterRecorder(api.ctx.redis, ctx.config, (err) => {
      throw err;
    });
    const at = new Date();
    const ids = Array.from({ length: 1500 }, (_, i) => `bulk${process.pid}x${i}`);
    for (const id of ids) {
      recorder.count(id, 'contacts', at);
      recorder.count(id, 'reports', at, 2);
    }
    recorder.count(ids[0], 'contacts', at);
    await recorder.drain();
    const hour = at.toISOString().slice(0, 13);
    const dirtySets = Array.from({ length: COUNTER_SHARDS }, (_, shard) => dirtySetOf(ctx.config, shard));
    const marked = await Promise.all(dirtySets.map((set) => api.ctx.redis.scard(set)));
    expect(marked.reduce((a, b) => a + b, 0)).toBe(1500);
    // spread over the shards by device
    expect(marked.every((n) => n > 0)).toBe(true);
    expect(await api.ctx.redis.hgetall(counterHashKey(ctx.config, ids[0], hour))).toEqual({ contacts: '2', reports: '2' });
    expect(await api.ctx.redis.hgetall(counterHashKey(ctx.config, ids[1499], hour))).toEqual({ contacts: '1', reports: '2' });
    const ttl = await api.ctx.redis.ttl(counterHashKey(ctx.config, ids[777], hour));
    expect(ttl).toBeGreaterThan(COUNTER_TTL_SECONDS - 60);
    expect(ttl).toBeLessThanOrEqual(COUNTER_TTL_SECONDS);
    await Promise.all([...dirtySets, ...ids.map((id) => counterHashKey(ctx.config, id, hour))].map((key) => api.ctx.redis.del(key)));
  });

  it("a flush copies only its own deployment's counters (the dirty set is per QUEUE_NAME) and drops deleted devices", async () => {
    const c = await api.login('connectivity');
    const hashId = await device(c);
    countDeviceEvent(api.ctx, hashId, 'contacts');
    await counterRecorder(api.ctx).drain();
    expect(await api.ctx.redis.sismember(dirtySetOfDevice(api.ctx.config, hashId), `${hashId}:${new Date().toISOString().slice(0, 13)}`)).toBe(1);
    const other = { ...api.ctx, config: { ...api.ctx.config, queueName: `${api.ctx.config.queueName}-other` } };
    await flushCounters(other);
    expect(await api.ctx.redis.sismember(dirtySetOfDevice(api.ctx.config, hashId), `${hashId}:${new Date().toISOString().slice(0, 13)}`)).toBe(1);

    expect((await c.request('POST', '/device/delete', { hashIds: [hashId] })).status).toBe(204);
    await flushCounters(api.ctx);
    const rows = await api.ctx.db.query('SELECT 1 FROM device_counter_hour c JOIN device d ON d.id = c.device_id WHERE d.hash_id = $1', [hashId]);
    expect(rows.rows).toHaveLength(0);
  });
});
