import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable, Sql } from '../../src/app/db.ts';
import { LastOnlineWriter } from '../../src/connectivity/devices/last-online.ts';
import { addDeviceType } from '../connectivity/fixtures.ts';
import { startTestApi, type TestApi } from '../helpers.ts';
import { until, waitFor } from '../support/until.ts';

let api: TestApi;
const devices: { id: number; hashId: string }[] = [];
beforeAll(async () => {
  api = await startTestApi();
  const client = await api.login('connectivity');
  const deviceTypeHashId = await addDeviceType(client);
  for (let i = 0; i < 3; i++) {
    const added = await client.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: `online-${i}`,
      deviceTypeHashId,
      psk: randomBytes(16).toString('hex'),
      pskIdentity: `online-${randomBytes(6).toString('hex')}`,
    });
    expect(added.status).toBe(200);
    const { rows } = await api.ctx.db.query<{ id: number }>('SELECT id FROM device WHERE hash_id = $1', [added.body.hashId]);
    devices.push({ id: Number(rows[0].id), hashId: added.body.hashId });
  }
});
afterAll(async () => {
  await api.close();
});

/** The test database, counting the lastOnlineAt writes and the devices each one names; `down` makes them fail. */
function countingDb() {
  const db = {
    writes: [] as number[][],
    down: false,
    async query(sql: Sql, params?: unknown[]) {
      if ((typeof sql === 'string' ? sql : sql.text).includes('SET last_online_at')) {
        if (db.down) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        db.writes.push((params![0] as number[]).map(Number));
      }
      return api.ctx.db.query(sql, params);
    },
  };
  return db as typeof db & Queryable;
}

/** A logger keeping the warn and info lines it is given. */
function capturingLog() {
  const lines: { level: string; msg: string }[] = [];
  const log = {
    warn: (_o: unknown, msg: string) => {
      lines.push({ level: 'warn', msg });
    },
    info: (_o: unknown, msg: string) => {
      lines.push({ level: 'info', msg });
    },
  } as unknown as typeof api.ctx.log;
  return { lines, log };
}

const lastOnlineAt = async (id: number) =>
  (await api.ctx.db.query<{ at: Date | null }>('SELECT last_online_at AS at FROM device WHERE id = $1', [id])).rows[0].at?.toISOString() ?? null;

describe('LastOnlineWriter', () => {
  it('writes the contacts of several devices in one statement, each at its latest time, and never moves one back', async () => {
    const db = countingDb();
    const writer = new LastOnlineWriter(db, api.ctx.log);
    const [a, b] = devices;
    await Promise.all([writer.touch(a.id, new Date('2026-01-01T10:00:00Z')), writer.touch(b.id, new Date('2026-01-01T10:00:05Z'))]);
    expect(db.writes).toEqual([[a.id, b.id]]);
    expect(await lastOnlineAt(a.id)).toBe('2026-01-01T10:00:00.000Z');
    expect(await lastOnlineAt(b.id)).toBe('2026-01-01T10:00:05.000Z');
    // an older contact (a job run late) leaves the newer time
    const other = new LastOnlineWriter(db, api.ctx.log);
    await other.touch(b.id, new Date('2026-01-01T09:00:00Z'));
    expect(await lastOnlineAt(b.id)).toBe('2026-01-01T10:00:05.000Z');
    await Promise.all([writer.close(), other.close()]);
  });

  it('a contact within the resolution is written once the resolution has passed, the latest of them', async () => {
    const db = countingDb();
    const writer = new LastOnlineWriter(db, api.ctx.log, { resolutionMs: 300 });
    const d = devices[2];
    const t0 = Date.parse('2026-02-01T00:00:00Z');
    await writer.touch(d.id, new Date(t0));
    // three more contacts inside 300 ms: answered at once, nothing written yet
    for (const ms of [50, 150, 100]) await writer.touch(d.id, new Date(t0 + ms));
    expect(db.writes).toHaveLength(1);
    expect(await lastOnlineAt(d.id)).toBe('2026-02-01T00:00:00.000Z');
    // the trailing edge: one write, of the latest contact
    await until(
      () => lastOnlineAt(d.id),
      (at) => at === '2026-02-01T00:00:00.150Z',
      'the trailing write',
    );
    expect(db.writes).toHaveLength(2);
    await writer.close();
    expect(db.writes).toHaveLength(2);
  });

  it('close writes the contacts still inside their resolution', async () => {
    const db = countingDb();
    const writer = new LastOnlineWriter(db, api.ctx.log, { resolutionMs: 60_000 });
    const d = devices[0];
    const t0 = Date.parse('2026-03-01T00:00:00Z');
    await writer.touch(d.id, new Date(t0));
    await writer.touch(d.id, new Date(t0 + 10));
    await writer.close();
    expect(await lastOnlineAt(d.id)).toBe('2026-03-01T00:00:00.010Z');
  });

  it('a store outage during trailing writes is one warn line when it starts and one info line when it ends', async () => {
    const { lines, log } = capturingLog();
    const db = countingDb();
    const writer = new LastOnlineWriter(db, log, { resolutionMs: 100 });
    const t0 = Date.parse('2026-04-01T00:00:00Z');
    for (const d of devices) await writer.touch(d.id, new Date(t0));
    db.down = true;
    for (const d of devices) await writer.touch(d.id, new Date(t0 + 10));
    await waitFor(() => lines.length === 1);
    expect(lines).toEqual([{ level: 'warn', msg: 'lastOnlineAt could not be written: PostgreSQL is unavailable' }]);
    db.down = false;
    for (const d of devices) await writer.touch(d.id, new Date(t0 + 20));
    await waitFor(() => lines.length === 2);
    expect(lines[1]).toEqual({ level: 'info', msg: 'lastOnlineAt is written again' });
    await writer.close();
  });

  it('heard (a caller that does not wait) writes as touch does, and a store outage is one warn line, however many contacts', async () => {
    const { lines, log } = capturingLog();
    const db = countingDb();
    const writer = new LastOnlineWriter(db, log, { resolutionMs: 10 });
    const t0 = Date.parse('2026-05-01T00:00:00Z');
    writer.heard(devices[0].id, new Date(t0));
    await until(
      () => lastOnlineAt(devices[0].id),
      (at) => at === '2026-05-01T00:00:00.000Z',
      'the contact written',
    );
    db.down = true;
    // contacts a second apart: each one a write of its own, each failing
    for (let s = 1; s <= 3; s++) for (const d of devices) writer.heard(d.id, new Date(t0 + s * 1000));
    await waitFor(() => lines.length >= 1);
    await new Promise((r) => setTimeout(r, 100));
    expect(lines).toEqual([{ level: 'warn', msg: 'lastOnlineAt could not be written: PostgreSQL is unavailable' }]);
    db.down = false;
    writer.heard(devices[1].id, new Date(t0 + 10_000));
    await waitFor(() => lines.length === 2);
    expect(lines[1]).toEqual({ level: 'info', msg: 'lastOnlineAt is written again' });
    expect(await lastOnlineAt(devices[1].id)).toBe('2026-05-01T00:00:10.000Z');
    await writer.close();
  });
});
