/**
 * Fair share between suppliers: one supplier whose report parser is slow (within its time limit) and whose
 * devices send many requests at once fills only its own worker slots; another supplier's devices are answered
 * by their handler (200) meanwhile, not put off with a 202.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/app/bootstrap.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
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

async function slowDevices(api: RestClient, n: number): Promise<ReportingDevice[]> {
  const reportType = await api.request('POST', '/supplier-report-type/', { name: 'Slow', fieldConfigurations: { pinGroup: [], pin: [], measurement: [] }, parser: SLOW_PARSER });
  const type = await api.request('POST', '/device-type/', {
    name: 'Noisy', eventHandler: `const REPORT_TYPE = "${reportType.body.hashId}";\n${FIVE_PARSES}`,
    fieldConfigurations: [], pinGroupFieldConfigurations: [], channels: [], commandTypeHashIds: [],
  });
  return Promise.all(Array.from({ length: n }, async () => {
    const identity = `noisy-${randomBytes(6).toString('hex')}`;
    const key = randomBytes(16);
    const device = await api.request('POST', '/device/psk', { supplierDeviceIdentifier: identity, deviceTypeHashId: type.body.hashId, psk: key.toString('hex'), pskIdentity: identity });
    return { identity, key, hashId: device.body.hashId };
  }));
}

beforeAll(async () => {
  // one slot per supplier: before fair share, one slot for everyone
  ctx = await testContext({ WORKER_CONCURRENCY: '1', GATEWAY_WAIT_MS: '4000', SANDBOX_TIMEOUT_MS: '1000' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  const base = `http://127.0.0.1:${service.apiPort()}`;
  noisy = await slowDevices(await connectivityClient(ctx.db, base), 8);
  [quiet] = await reportingDevices(await connectivityClient(ctx.db, base), 1);
});
afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

describe('fair share of the worker between suppliers', () => {
  it("a supplier flooding with slow parsers does not put off another supplier's devices", async () => {
    let noisyDone = 0;
    // 8 requests x 5 parses x 150 ms: ~6 s of one supplier's code, queued at once
    const flood = Promise.all(noisy.map((d) => pskHttpRequest({ port, identity: d.identity, key: d.key, path: '/report', body: '{}' }).then((a) => { noisyDone++; return a?.status; })));
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
