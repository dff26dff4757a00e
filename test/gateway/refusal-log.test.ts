import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext, createContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import type { Logger } from '../../src/app/logger.ts';
import { RefusalLog } from '../../src/gateway/refusal-log.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testConfig } from '../helpers.ts';
import { connectivityClient, pskDevice } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { until } from '../support/until.ts';

// A device that is refused leaves one info line an operator can act on: the identity it offered and why, never a key.

interface Line {
  level: number;
  msg: string;
  pskIdentity?: string;
  reason?: string;
  remoteAddress?: string;
  refusalsNotLogged?: number;
}

/** A pino logger at info whose JSON lines are kept. */
function capturing(): { text: () => string; log: Logger } {
  const raw: string[] = [];
  return {
    text: () => raw.join(''),
    log: pino(
      { level: 'info' },
      {
        write: (s: string) => {
          raw.push(s);
        },
      },
    ) as unknown as Logger,
  };
}

describe('RefusalLog', () => {
  it('writes one line per identity per minute and at most its share a second, counting what it left out', () => {
    const written: Line[] = [];
    const log = {
      info: (o: object, msg: string) => {
        written.push({ level: 30, msg, ...o });
      },
    } as unknown as Logger;
    let now = 1_000_000;
    const refusals = new RefusalLog(log, { perKeyMs: 60_000, perSecond: 3, now: () => now });
    for (let i = 0; i < 5; i++) refusals.refused('https', { pskIdentity: 'thermo-1', remoteAddress: '10.0.0.1' }, 'client Finished mismatch');
    expect(written).toEqual([
      {
        level: 30,
        msg: 'device refused',
        protocol: 'https',
        remoteAddress: '10.0.0.1',
        pskIdentity: 'thermo-1',
        reason: 'the key the device used is not the key stored for this PSK identity',
      },
    ]);
    // a scan of many identities within one second: three lines, the rest counted in the next line written
    for (let i = 0; i < 10; i++) refusals.refused('coaps', { pskIdentity: `scan-${i}` }, 'unknown PSK identity "x"');
    expect(written).toHaveLength(3);
    now += 1000;
    refusals.refused('coaps', { pskIdentity: 'later' }, 'unknown PSK identity "later"');
    expect(written.at(-1)).toMatchObject({ pskIdentity: 'later', reason: 'no device has this PSK identity', refusalsNotLogged: 8 });
    // DTLS names a wrong key by the client's Finished record
    refusals.refused('coaps', { pskIdentity: 'dtls-1' }, 'client Finished record failed authentication (wrong key?)');
    expect(written.at(-1)).toMatchObject({ pskIdentity: 'dtls-1', reason: 'the key the device used is not the key stored for this PSK identity' });
    now += 60_000;
    refusals.refused('https', { pskIdentity: 'thermo-1' }, 'client Finished mismatch');
    expect(written.at(-1)).toMatchObject({ pskIdentity: 'thermo-1' });
  });
});

describe('a refused device over HTTPS TLS-PSK', () => {
  let ctx: AppContext;
  let service: RunningService;
  const out = capturing();
  beforeAll(async () => {
    ctx = await createContext(testConfig(), out.log);
    service = await startService(ctx, ['all']);
  }, 60_000);
  afterAll(async () => {
    await service.stop();
    await closeContext(ctx);
  });

  it('logs the identity and the reason at info: a wrong key, an unknown identity; never the key', async () => {
    const api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
    const device = await pskDevice(api, 'function handle() { return { statusCode: 200, body: {} }; }');
    const wrongKey = randomBytes(16);
    const port = service.https!.port();
    expect(await pskHttpRequest({ port, identity: device.identity, key: wrongKey, path: '/report', body: '{}' })).toBeNull();
    const stranger = `nobody-${randomBytes(4).toString('hex')}`;
    expect(await pskHttpRequest({ port, identity: stranger, key: wrongKey, path: '/report', body: '{}' })).toBeNull();
    const refused = () =>
      out
        .text()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Line)
        .filter((l) => l.msg === 'device refused');
    await until(
      async () => refused(),
      (l) => l.length >= 2,
      'two refusal lines',
    );
    expect(refused()).toEqual([
      expect.objectContaining({
        level: 30,
        pskIdentity: device.identity,
        reason: 'the key the device used is not the key stored for this PSK identity',
        remoteAddress: expect.any(String),
      }),
      expect.objectContaining({ level: 30, pskIdentity: stranger, reason: 'no device has this PSK identity' }),
    ]);
    for (const key of [wrongKey, device.key]) expect(out.text()).not.toContain(key.toString('hex'));
  });
});
