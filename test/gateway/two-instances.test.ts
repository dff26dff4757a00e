import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { recreateDatabase } from '../../src/app/db.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient } from '../support/provision.ts';
import { freePort } from '../support/service-process.ts';
import { killPrivateRedis, startRedis } from '../support/private-redis.ts';
import { pskHttpRequest } from '../support/psk-client.ts';

// Two deployments on one Redis (each its own database and QUEUE_NAME, as two `npm start` on one machine with the
// README's default Redis): everything either keeps in Redis is its own, so a device identity both use stays two devices.
// The Redis is the test's own, so every key and channel in it is one of the two instances'.

const HANDLER = (instance: string) => `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  return { statusCode: 200, body: { instance: '${instance}', device: args.device.supplierDeviceIdentifier } };
}`;

interface Instance {
  ctx: AppContext;
  service: RunningService;
  key: Buffer;
}
const identity = `twin-${randomBytes(4).toString('hex')}`;
const instances: Record<'a' | 'b', Instance> = {} as never;

async function start(name: 'a' | 'b', overrides: Record<string, string>): Promise<void> {
  const ctx = await testContext(overrides);
  const service = await startService(ctx, ['all']);
  instances[name] = { ctx, service, key: randomBytes(16) };
}

async function addDevice(name: 'a' | 'b'): Promise<void> {
  const { ctx, service, key } = instances[name];
  const api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
  const type = await api.request('POST', '/device-type/', {
    name: 'twin',
    eventHandler: HANDLER(name),
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [],
    commandTypeHashIds: [],
  });
  expect(type.status, JSON.stringify(type.body)).toBe(200);
  const device = await api.request('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId: type.body.hashId,
    psk: key.toString('hex'),
    pskIdentity: identity,
  });
  expect(device.status, JSON.stringify(device.body)).toBe(200);
}

async function report(name: 'a' | 'b'): Promise<unknown> {
  const { service, key } = instances[name];
  const answer = await pskHttpRequest({ port: service.https!.port(), identity, key, path: '/report', body: '{"t":1}' });
  return answer ? { status: answer.status, body: JSON.parse(answer.body) } : 'no answer (handshake refused)';
}

let redisUrl: string;
beforeAll(async () => {
  const port = await freePort();
  await startRedis(port, mkdtempSync(path.join(os.tmpdir(), 'gridgate-two-')));
  redisUrl = `redis://127.0.0.1:${port}`;
  const second = await recreateDatabase(process.env.TEST_ADMIN_DATABASE_URL!, `${process.env.TEST_DATABASE_NAME}_second`);
  await start('a', { REDIS_URL: redisUrl });
  await start('b', { REDIS_URL: redisUrl, DATABASE_URL: second });
}, 120_000);
afterAll(async () => {
  for (const { ctx, service } of Object.values(instances)) {
    await service.stop();
    await closeContext(ctx);
  }
  killPrivateRedis();
});

describe('two deployments on one Redis', () => {
  it('each answers its own device of one PSK identity, whichever reported or was added last', async () => {
    expect(instances.a.ctx.config.redisUrl).toBe(instances.b.ctx.config.redisUrl);
    await addDevice('a');
    expect(await report('a')).toEqual({ status: 200, body: { instance: 'a', device: identity } });
    // b's device of the same identity: added, then reporting, while a's key is cached
    await addDevice('b');
    expect(await report('b')).toEqual({ status: 200, body: { instance: 'b', device: identity } });
    expect(await report('a')).toEqual({ status: 200, body: { instance: 'a', device: identity } });
    expect(await report('b')).toEqual({ status: 200, body: { instance: 'b', device: identity } });
  });

  it('keeps every key and pub/sub channel under its QUEUE_NAME', async () => {
    const names = Object.values(instances).map((i) => i.ctx.config.queueName);
    const redis = new Redis(redisUrl);
    try {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
        keys.push(...batch);
        cursor = next;
      } while (cursor !== '0');
      const channels = (await redis.call('PUBSUB', 'CHANNELS')) as string[];
      expect(keys.length).toBeGreaterThan(0);
      expect(channels.length).toBeGreaterThan(0);
      expect([...keys, ...channels].filter((k) => !names.some((n) => k.includes(n)))).toEqual([]);
    } finally {
      redis.disconnect();
    }
  });
});
