import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable, Sql } from '../../src/app/db.ts';
import { ScheduledCommandsLoader } from '../../src/pipeline/commands.ts';
import { commandsAddedChannel, PendingCommandsHint } from '../../src/connectivity/commands/pending-hint.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addCommandType, addDeviceType } from './fixtures.ts';
import { waitFor as waitForCondition } from '../support/until.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** The test database, counting the pending-commands lookups (the query the hint saves). */
function countingDb() {
  const db = {
    lookups: 0,
    async query(sql: Sql, params?: unknown[]) {
      if ((typeof sql === 'string' ? sql : sql.text).includes('FROM command WHERE device_id = ANY')) db.lookups++;
      return api.ctx.db.query(sql, params);
    },
  };
  return db as typeof db & Queryable;
}

async function setup(devices: number) {
  const c = await api.login('connectivity');
  const commandTypeHashId = await addCommandType(c, { name: 'Reboot', fieldConfigurations: [] });
  const deviceTypeHashId = await addDeviceType(c, { commandTypeHashIds: [commandTypeHashId] });
  const hashIds: string[] = [];
  for (let i = 0; i < devices; i++) {
    const identity = `hint-${randomBytes(6).toString('hex')}`;
    const r = await c.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: identity,
      deviceTypeHashId,
      psk: randomBytes(16).toString('hex'),
      pskIdentity: identity,
    });
    expect(r.status).toBe(200);
    hashIds.push(r.body.hashId);
  }
  const { rows } = await api.ctx.db.query<{ id: number; hash_id: string }>('SELECT id, hash_id FROM device WHERE hash_id = ANY($1)', [hashIds]);
  const ids = hashIds.map((h) => rows.find((r) => r.hash_id === h)!.id);
  return { c, commandTypeHashId, hashIds, ids };
}

const addCommand = (c: ApiClient, commandTypeHashId: string, deviceHashId: string) =>
  c.request('POST', '/command/', { objectType: 'device', objectHashIds: [deviceHashId], commandTypeHashId, fields: {}, email: [] });

const waitFor = (cond: () => boolean, ms = 3000) => waitForCondition(cond, ms, 10);

describe('pending commands hint: a device contact without commands costs no query', () => {
  it('skips the lookup for devices known to have none; an add in this process is seen before the add is answered', async () => {
    const { c, commandTypeHashId, hashIds, ids } = await setup(2);
    const db = countingDb();
    const hint = new PendingCommandsHint(db);
    await hint.start();
    try {
      const loader = new ScheduledCommandsLoader(db, hint);
      expect(await loader.load(ids[0])).toEqual([]);
      expect(db.lookups).toBe(0);

      expect((await addCommand(c, commandTypeHashId, hashIds[0])).status).toBe(204);
      // no wait: the add announced it to this process's hints before it answered
      expect(hint.mayHave(ids[0])).toBe(true);
      expect(hint.mayHave(ids[1])).toBe(false);
      const [scheduled] = await loader.load(ids[0]);
      expect(scheduled.command.deviceHashId).toBe(hashIds[0]);
      expect(db.lookups).toBe(1);
      expect(await loader.load(ids[1])).toEqual([]);
      expect(db.lookups).toBe(1);

      // the command is sent: the next lookup finds none and clears the mark, the one after costs nothing
      await api.ctx.db.query('UPDATE command SET sent_at = now() WHERE device_id = $1', [ids[0]]);
      expect(await loader.load(ids[0])).toEqual([]);
      expect(db.lookups).toBe(2);
      expect(await loader.load(ids[0])).toEqual([]);
      expect(db.lookups).toBe(2);
    } finally {
      await hint.stop();
    }
  });

  it('a hint learns of adds made in another process through Redis', async () => {
    const { ids } = await setup(1);
    const hint = new PendingCommandsHint(api.ctx.db);
    await hint.start(api.ctx);
    try {
      expect(hint.mayHave(ids[0])).toBe(false);
      // what announceCommandsAdded in another process sends
      await api.ctx.redis.publish(commandsAddedChannel(api.ctx), JSON.stringify([ids[0]]));
      await waitFor(() => hint.mayHave(ids[0]));
    } finally {
      await hint.stop();
    }
  });

  it('a lookup that raced an add keeps the mark; a reload reads the truth', async () => {
    const { c, commandTypeHashId, hashIds, ids } = await setup(1);
    const hint = new PendingCommandsHint(api.ctx.db);
    await hint.start();
    try {
      expect(hint.mayHave(ids[0])).toBe(false);
      hint.added([ids[0]]);
      const epoch = hint.epochOf(ids[0]);
      hint.added([ids[0]]); // announced while the lookup ran
      hint.checked(ids[0], epoch, 0);
      expect(hint.mayHave(ids[0])).toBe(true);
      hint.checked(ids[0], hint.epochOf(ids[0]), 0);
      expect(hint.mayHave(ids[0])).toBe(false);

      // an add whose announcement never arrived (written behind the hint's back) shows after a reload
      await hint.stop();
      expect((await addCommand(c, commandTypeHashId, hashIds[0])).status).toBe(204);
      expect(hint.mayHave(ids[0])).toBe(false);
      await hint.reload();
      expect(hint.mayHave(ids[0])).toBe(true);
    } finally {
      await hint.stop();
    }
  });

  it('before its first load, every device may have commands', () => {
    const hint = new PendingCommandsHint(api.ctx.db);
    expect(hint.mayHave(123456789)).toBe(true);
  });
});
