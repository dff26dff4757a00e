/**
 * Fair share between suppliers: one supplier whose report parser is slow (within its time limit) and whose
 * devices send many requests at once fills only its own worker slots; another supplier's devices are answered
 * by their handler (200) meanwhile, not put off with a 202. A slot is held while supplier code runs, not while
 * the item's writes wait for PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { until } from '../support/until.ts';
import { connectivityClient, pskDevice, type RestClient } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { reportingDevices, type ReportingDevice } from '../support/report-world.ts';

const SLOW_PARSER = `function handle(args: { payload: string }, exec: Exec) {
  const until = Date.now() + 150; while (Date.now() < until) {}
  return { generatedAt: new Date(), measurements: [] };
}`;
const FIVE_PARSES = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  for (let i = 0; i < 5; i++) exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: String(i) });
  return { statusCode: 200, body: { ok: true } };
}`;

let ctx: AppContext;
let service: RunningService;
let noisy: ReportingDevice[];
let quiet: ReportingDevice;
let port: number;
let api: RestClient;

async function slowDevices(api: RestClient, n: number): Promise<ReportingDevice[]> {
  const reportType = await api.request('POST', '/supplier-report-type/', {
    name: 'Slow',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: SLOW_PARSER,
  });
  const type = await api.request('POST', '/device-type/', {
    name: 'Noisy',
    eventHandler: `const REPORT_TYPE = "${reportType.body.hashId}";\n${FIVE_PARSES}`,
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [],
    commandTypeHashIds: [],
  });
  return Promise.all(
    Array.from({ length: n }, async () => {
      const identity = `noisy-${randomBytes(6).toString('hex')}`;
      const key = randomBytes(16);
      const device = await api.request('POST', '/device/psk', {
        supplierDeviceIdentifier: identity,
        deviceTypeHashId: type.body.hashId,
        psk: key.toString('hex'),
        pskIdentity: identity,
      });
      return { identity, key, hashId: device.body.hashId };
    }),
  );
}

beforeAll(async () => {
  // one slot per supplier: before fair share, one slot for everyone
  ctx = await testContext({ WORKER_CONCURRENCY: '1', GATEWAY_WAIT_MS: '4000', SANDBOX_TIMEOUT_MS: '1000' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  const base = `http://127.0.0.1:${service.apiPort()}`;
  noisy = await slowDevices(await connectivityClient(ctx.db, base), 8);
  [quiet] = await reportingDevices(await connectivityClient(ctx.db, base), 1);
  api = await connectivityClient(ctx.db, base);
});
afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

describe('fair share of the worker between suppliers', () => {
  it("a supplier flooding with slow parsers does not put off another supplier's devices", async () => {
    let noisyDone = 0;
    // 8 requests x 5 parses x 150 ms: ~6 s of one supplier's code, queued at once
    const flood = Promise.all(
      noisy.map((d) =>
        pskHttpRequest({ port, identity: d.identity, key: d.key, path: '/report', body: '{}' }).then((a) => {
          noisyDone++;
          return a?.status;
        }),
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    const quietAnswers: (number | null)[] = [];
    for (let seq = 0; seq < 3; seq++) {
      const answer = await pskHttpRequest({ port, identity: quiet.identity, key: quiet.key, path: '/report', body: JSON.stringify({ d: 0, seq }) });
      quietAnswers.push(answer?.status ?? null);
    }
    // answered by its handler while the other supplier's work was still running
    expect(quietAnswers).toEqual([200, 200, 200]);
    expect(noisyDone).toBeLessThan(noisy.length);
    // the flood itself is processed in full (some answered 202 once past the wait bound)
    for (const status of await flood) expect([200, 202]).toContain(status);
  }, 60_000);
});

describe('a worker slot and the store', () => {
  it("an item waiting for its writes holds no slot: the supplier's next request runs and is answered meanwhile", async () => {
    // one supplier, one slot: device A reports (its report row waits for a lock), device B's handler only answers
    const [a] = await reportingDevices(api, 1);
    const b = await pskDevice(
      api,
      `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type === 'incomingRequest') return { statusCode: 200, body: { answered: true } };
}`,
    );
    const locker = new pg.Client({ connectionString: ctx.config.databaseUrl ?? undefined });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      // A's report insert (its foreign key) and its lastOnlineAt update wait for this row lock
      await locker.query('SELECT 1 FROM device WHERE hash_id = $1 FOR UPDATE', [a.hashId]);
      let aStatus: number | null | undefined;
      const aAnswer = pskHttpRequest({ port, identity: a.identity, key: a.key, path: '/report', body: JSON.stringify({ d: 0, seq: 41 }) }).then((r) => {
        aStatus = r?.status ?? null;
      });
      // A's handler and parser have run once its writes wait behind the lock
      const {
        rows: [{ pid }],
      } = await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await until(
        async () =>
          (await locker.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])).rows[0].n,
        (n) => n > 0,
        "A's writes waiting for the lock",
        10_000,
      );
      const bAnswer = await pskHttpRequest({ port, identity: b.identity, key: b.key, path: '/report', body: '{}' });
      // answered by B's handler, not put off with a 202 while A held the only slot
      expect(bAnswer?.status).toBe(200);
      expect(JSON.parse(bAnswer!.body)).toEqual({ answered: true });
      expect(aStatus).toBeUndefined();
      await locker.query('COMMIT');
      await aAnswer;
      expect([200, 202]).toContain(aStatus);
    } finally {
      await locker.end();
    }
    // A's report is stored, once
    const stored = await until(
      async () =>
        (
          await ctx.db.query<{ payload: string }>('SELECT r.payload FROM condition_report r JOIN device d ON d.id = r.device_id WHERE d.hash_id = $1', [
            a.hashId,
          ])
        ).rows,
      (rows) => rows.length > 0,
      "A's report",
      10_000,
    );
    expect(stored.map((r) => r.payload)).toEqual([JSON.stringify({ d: 0, seq: 41 })]);
  }, 60_000);
});
