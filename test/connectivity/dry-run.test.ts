import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/app/bootstrap.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
import { until } from '../support/until.ts';

// Dry runs of supplier code against the whole service (API, gateway and worker in one process): real isolates,
// real PostgreSQL and Redis, a real device over HTTPS TLS-PSK for the runs that are not dry.

interface LogLine { type: string; message: string }
interface RunError { kind: string; message: string; line: number | null; column: number | null }
interface Call { name: string; failed: boolean; log: LogLine[]; triggerData: Record<string, unknown> }
interface DeviceTypeDryRun { answer: { statusCode: number; headers: Record<string, string>; body: unknown } | null; error: RunError | null; failed: boolean; log: LogLine[]; calls: Call[] }
interface Measurement { channelIndex: number; quantityHashId: string; orderOfMagnitude: number; significand: number }
interface ReportTypeDryRun { report: { measurements: Measurement[] } | null; error: RunError | null; failed: boolean; log: LogLine[] }
interface Supplier { api: RestClient; quantityHashId: string; reportTypeHashId: string }
interface Device { identity: string; key: string; hashId: string }

let ctx: AppContext;
let service: RunningService;
let base: string;

const BURST = 8;

beforeAll(async () => {
  // a minute's refill is one dry run: past the burst an environment is refused for the rest of the file
  ctx = await testContext({ SANDBOX_TIMEOUT_MS: '1500', DRY_RUN_BURST: String(BURST), DRY_RUNS_PER_MINUTE: '1' });
  service = await startService(ctx, ['all']);
  base = `http://127.0.0.1:${service.apiPort()}`;
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

const PARSER = (quantityHashId: string) => `function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as { volts: number[] };
  exec.addLog('parsing ' + data.volts.length);
  return { generatedAt: new Date(), measurements: data.volts.map((v, i) => ({ channelIndex: i, quantityHashId: '${quantityHashId}', orderOfMagnitude: -3, significand: Math.round(v * 1000) })) };
}`;

async function supplier(): Promise<Supplier> {
  const api = await connectivityClient(ctx.db, base);
  const quantity = await api.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0 });
  expect(quantity.status).toBe(200);
  const reportType = await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
    name: 'volts', fieldConfigurations: { pinGroup: [], pin: [], measurement: [] }, parser: PARSER(quantity.body.hashId),
  });
  expect(reportType.status).toBe(200);
  return { api, quantityHashId: quantity.body.hashId, reportTypeHashId: reportType.body.hashId };
}

async function deviceType(s: Supplier, eventHandler: string, commandTypeHashIds: string[] = []): Promise<string> {
  const type = await s.api.request<{ hashId: string }>('POST', '/device-type/', {
    name: `type ${randomBytes(3).toString('hex')}`, eventHandler: eventHandler.replaceAll('__REPORT_TYPE__', s.reportTypeHashId),
    fieldConfigurations: [{ key: 'mode', name: 'mode', type: 'string' }], pinGroupFieldConfigurations: [],
    channels: [{ name: 'A', pinFieldConfigurations: [] }, { name: 'B', pinFieldConfigurations: [] }], commandTypeHashIds,
  });
  expect(type.status).toBe(200);
  return type.body.hashId;
}

async function device(s: Supplier, deviceTypeHashId: string): Promise<Device> {
  const d = { identity: `dev-${randomBytes(6).toString('hex')}`, key: randomBytes(16).toString('hex'), hashId: '' };
  const added = await s.api.request<{ hashId: string }>('POST', '/device/psk', { supplierDeviceIdentifier: d.identity, deviceTypeHashId, psk: d.key, pskIdentity: d.identity });
  expect(added.status).toBe(200);
  d.hashId = added.body.hashId;
  return d;
}

/** A real device request over HTTPS TLS-PSK. */
async function report(d: Device, body: unknown) {
  const out = await opensslPsk({ port: service.https!.port(), identity: d.identity, keyHex: d.key, input: httpRequestText('POST', '/report', JSON.stringify(body)) });
  return parseHttpResponse(out.stdout);
}

const webRequest = (data: unknown) => ({
  url: { protocol: 'https', host: 'gateway.example', path: '/report', query: {} }, method: 'POST', headers: { 'content-type': 'application/json' },
  body: { type: 'json', data }, ip: '192.0.2.1', certificate: null,
});

const THROWS_ON_LINE_3 = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  const limit: number = 2;
  if (limit > 1) throw new RangeError('limit ' + limit + ' is over 1');
}`;

const PARSES = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  exec.addLog('report received');
  exec.parseReport({ reportTypeHashId: '__REPORT_TYPE__', payload: JSON.stringify((args.event.webRequest.body as { data: unknown }).data) });
  return { statusCode: 200, body: { ok: true } };
}`;

describe('dry run of a device type', () => {
  it("a handler that throws on line 3 answers line 3, as the activity log of a real run of it does", async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const dry = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, { event: { type: 'incomingRequest', webRequest: webRequest({ volts: [1] }) }, eventHandler: THROWS_ON_LINE_3 });
    expect(dry.status).toBe(200);
    expect(dry.body.error).toEqual({ kind: 'error', message: 'RangeError: limit 2 is over 1', line: 3, column: 24 });
    expect(dry.body.failed).toBe(true);
    expect(dry.body.answer?.statusCode).toBe(500);

    const realType = await deviceType(s, THROWS_ON_LINE_3);
    const d = await device(s, realType);
    expect((await report(d, { volts: [1] })).status).toBe(500);
    const rows = await until(() => s.api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}`),
      (r) => r.body.rows.length === 1, 'the real run\'s activity');
    const activity = await s.api.request<{ activity: { log: LogLine[] } }>('GET', `/supplier-activity/${rows.body.rows[0].activity.hashId}`);
    expect(activity.body.activity.log).toContainEqual({ type: 'error', message: 'error: RangeError: limit 2 is over 1 (line 3, column 24)' });
  });

  it('a handler that parses a report answers the measurements the parser made', async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const dry = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, { event: { type: 'incomingRequest', webRequest: webRequest({ volts: [3.3, 1.25] }) } });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ answer: { statusCode: 200, body: { type: 'json', data: { ok: true } } }, error: null, failed: false, log: [{ type: 'log', message: 'report received' }] });
    expect(dry.body.calls).toHaveLength(1);
    const parse = dry.body.calls[0];
    expect(parse).toMatchObject({ name: 'parseReport', failed: false, log: [{ type: 'log', message: 'parsing 2' }] });
    const observations = parse.triggerData.observations as { measurement: Measurement; quantity: { hashId: string } }[];
    expect(observations.map((o) => [o.measurement.channelIndex, o.measurement.orderOfMagnitude, o.measurement.significand, o.quantity.hashId]))
      .toEqual([[0, -3, 3300, s.quantityHashId], [1, -3, 1250, s.quantityHashId]]);
  });
});
