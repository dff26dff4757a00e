// The change bus (src/app/changes.ts) against a real Redis: two buses on one channel stand for two processes.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { ChangeBus, type ChangeKind, type Changes } from '../../src/app/changes.ts';
import { createLogger } from '../../src/app/logger.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const open: { close(): Promise<void> }[] = [];

function bus(channel: string, lines: string[] = []) {
  const redis = new Redis(REDIS_URL);
  const b = new ChangeBus({
    redis,
    subscriber: () => new Redis(REDIS_URL, { connectionName: `sub-${channel.replaceAll(':', '-')}` }),
    channel,
    log: createLogger('warn', {
      write: (l: string) => {
        lines.push(l);
      },
    }),
  });
  open.push({
    close: async () => {
      await b.close();
      redis.disconnect();
    },
  });
  return b;
}

function record<K extends ChangeKind>(b: ChangeBus, kind: K) {
  const heard: { change: Changes[K] | null; origin: string }[] = [];
  b.on(kind, (change, origin) => {
    heard.push({ change, origin });
  });
  return heard;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

describe('the change bus', () => {
  it("runs this process's listeners before publish resolves, and every other process's once, through Redis", async () => {
    const channel = `test:changes:${randomBytes(4).toString('hex')}`;
    const here = bus(channel);
    const there = bus(channel);
    let forgotten = false;
    here.on('devices', async () => {
      await new Promise((r) => setTimeout(r, 50));
      forgotten = true;
    });
    const heardHere = record(here, 'devices');
    const heardThere = record(there, 'devices');
    const trustThere = record(there, 'trust');
    await Promise.all([here.listen(), there.listen()]);

    await here.publish('devices', { hashIds: ['d1', 'd2'] });
    expect(forgotten).toBe(true);
    expect(heardHere).toEqual([{ change: { hashIds: ['d1', 'd2'] }, origin: 'local' }]);
    await expect.poll(() => heardThere, { timeout: 10_000 }).toEqual([{ change: { hashIds: ['d1', 'd2'] }, origin: 'remote' }]);

    // a later change of another kind arrives after the first: by then the first has not come back to its publisher
    await here.publish('trust', { environmentIds: [7] });
    await expect.poll(() => trustThere.length, { timeout: 10_000 }).toBe(1);
    expect(heardHere).toHaveLength(1);
    expect(heardThere).toHaveLength(1);
  });

  it('fails the publish when a local listener fails (its store away), and tells no other process', async () => {
    const channel = `test:changes:${randomBytes(4).toString('hex')}`;
    const here = bus(channel);
    const there = bus(channel);
    here.on('credentials', () => {
      throw new Error('redis away');
    });
    const heardThere = record(there, 'credentials');
    const trustThere = record(there, 'trust');
    await there.listen();
    await expect(here.publish('credentials', { identities: ['psk-1'] })).rejects.toThrow('redis away');
    await here.publish('trust', { environmentIds: [1] });
    await expect.poll(() => trustThere.length, { timeout: 10_000 }).toBe(1);
    expect(heardThere).toEqual([]);
  });

  it('tells every listener that anything may have changed (null) after its subscriber reconnects', async () => {
    const channel = `test:changes:${randomBytes(4).toString('hex')}`;
    const there = bus(channel);
    const heard = record(there, 'devices');
    await there.listen();
    const admin = new Redis(REDIS_URL);
    try {
      // drop this bus's subscriber connection (by its name): ioredis reconnects and subscribes again
      const clients = (await admin.client('LIST')) as string;
      const ids = clients
        .split('\n')
        .filter((l) => l.includes(`name=sub-${channel.replaceAll(':', '-')} `))
        .map((l) => /id=(\d+)/.exec(l)?.[1]);
      expect(ids).toHaveLength(1);
      await admin.client('KILL', 'ID', ids[0]!);
    } finally {
      admin.disconnect();
    }
    await expect.poll(() => heard, { timeout: 15_000 }).toEqual([{ change: null, origin: 'remote' }]);
    // and it hears changes again
    const here = bus(channel);
    await here.publish('devices', { hashIds: ['after'] });
    await expect.poll(() => heard.length, { timeout: 10_000 }).toBe(2);
    expect(heard[1]).toEqual({ change: { hashIds: ['after'] }, origin: 'remote' });
  });
});
