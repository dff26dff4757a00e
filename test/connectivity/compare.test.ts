import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, environmentClient, type RestClient } from '../support/provision.ts';
import { tempDir } from '../pki/support.ts';
import { until } from '../support/until.ts';

// Before-save comparison (POST /device-type/:hashId/compare) against the whole service: real device requests over
// HTTPS TLS-PSK stored by the worker, then replayed as dry runs with the saved and a proposed handler.

let ctx: AppContext;
let service: RunningService;
let base: string;

beforeAll(async () => {
  ctx = await testContext({ CERTS_DIR: tempDir(), DRY_RUN_BURST: '50' });
  service = await startService(ctx, ['all']);
  base = `http://127.0.0.1:${service.apiPort()}`;
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

interface RunError {
  kind: string;
  message: string;
  line: number | null;
  column: number | null;
}
interface DryRun {
  answer: { statusCode: number; body: unknown } | null;
  error: RunError | null;
  failed: boolean;
  calls: { name: string }[];
}
interface Compare {
  runs: {
    activityHashId: string;
    deviceHashId: string | null;
    createdAt: string;
    current: DryRun;
    proposed: DryRun;
    differs: { answer: boolean; reports: boolean; measurements: boolean; failed: boolean };
  }[];
  summary: { total: number; differing: number; newlyFailing: number; fixed: number };
}

const PARSER = (quantityHashId: string) => `function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as number[];
  return { generatedAt: new Date(), measurements: data.map((v, i) => ({ channelIndex: i, quantityHashId: '${quantityHashId}', orderOfMagnitude: 0, significand: v })) };
}`;

const body = 'const data = (args.event.webRequest.body as { data: { volts: number[]; fail?: boolean; same?: boolean } }).data;';
// saved: fails on a request marked fail
const CURRENT = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  ${body}
  if (data.fail) throw new Error('cannot handle this one');
  exec.parseReport({ reportTypeHashId: '__REPORT_TYPE__', payload: JSON.stringify(data.volts) });
  return { statusCode: 200, body: { ok: true } };
}`;
// proposed: handles the marked one, fails on volts 2, answers differently unless marked same
const PROPOSED = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  ${body}
  if (data.volts[0] === 2) throw new Error('two is not allowed');
  exec.parseReport({ reportTypeHashId: '__REPORT_TYPE__', payload: JSON.stringify(data.volts) });
  return { statusCode: 200, body: { ok: data.same ? true : 'yes' } };
}`;

async function supplier(): Promise<{
  api: RestClient;
  typeHashId: string;
  reportTypeHashId: string;
  quantityHashId: string;
  device: { hashId: string; identity: string; key: string };
}> {
  const api = await connectivityClient(ctx.db, base);
  const quantity = await api.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0 });
  const reportType = await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
    name: 'volts',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: PARSER(quantity.body.hashId),
  });
  const type = await api.request<{ hashId: string }>('POST', '/device-type/', {
    name: `type ${randomBytes(3).toString('hex')}`,
    eventHandler: CURRENT.replace('__REPORT_TYPE__', reportType.body.hashId),
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'A', pinFieldConfigurations: [] }],
    commandTypeHashIds: [],
  });
  expect(type.status).toBe(200);
  const identity = `dev-${randomBytes(6).toString('hex')}`;
  const key = randomBytes(16).toString('hex');
  const device = await api.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId: type.body.hashId,
    psk: key,
    pskIdentity: identity,
  });
  expect(device.status).toBe(200);
  return {
    api,
    typeHashId: type.body.hashId,
    reportTypeHashId: reportType.body.hashId,
    quantityHashId: quantity.body.hashId,
    device: { hashId: device.body.hashId, identity, key },
  };
}

async function report(d: { identity: string; key: string }, data: unknown): Promise<number> {
  const out = await opensslPsk({
    port: service.https!.port(),
    identity: d.identity,
    keyHex: d.key,
    input: httpRequestText('POST', '/report', JSON.stringify(data)),
  });
  return parseHttpResponse(out.stdout).status;
}

const activityCount = async (envHashId: string) =>
  Number(
    (
      await ctx.db.query<{ n: string }>('SELECT count(*) AS n FROM supplier_activity a JOIN environment e ON e.id = a.environment_id WHERE e.hash_id = $1', [
        envHashId,
      ])
    ).rows[0].n,
  );

describe('device type compare', () => {
  it('replays the last stored requests with the saved and the proposed handler and says what differs, storing nothing', async () => {
    const s = await supplier();
    // oldest first: volts 1 (answer differs), 2 (proposed fails), 3 marked fail (current fails), 4 marked same (nothing differs)
    expect(await report(s.device, { volts: [1] })).toBe(200);
    expect(await report(s.device, { volts: [2] })).toBe(200);
    expect(await report(s.device, { volts: [3], fail: true })).toBe(500);
    expect(await report(s.device, { volts: [4], same: true })).toBe(200);
    await until(
      () => activityCount(s.api.environmentHashId),
      (n) => n === 4,
      'the four runs stored',
    );
    const before = await activityCount(s.api.environmentHashId);

    const compared = await s.api.request<Compare>('POST', `/device-type/${s.typeHashId}/compare`, {
      eventHandler: PROPOSED.replace('__REPORT_TYPE__', s.reportTypeHashId),
    });
    expect(compared.status).toBe(200);
    const { runs, summary } = compared.body;
    expect(summary).toEqual({ total: 4, differing: 3, newlyFailing: 1, fixed: 1 });
    // newest first
    expect(runs.map((r) => [r.deviceHashId, r.differs])).toEqual([
      [s.device.hashId, { answer: false, reports: false, measurements: false, failed: false }],
      [s.device.hashId, { answer: true, reports: true, measurements: true, failed: true }],
      [s.device.hashId, { answer: true, reports: true, measurements: true, failed: true }],
      [s.device.hashId, { answer: true, reports: false, measurements: false, failed: false }],
    ]);
    expect(runs[1].current).toMatchObject({ failed: true, answer: { statusCode: 500 }, error: { kind: 'error', message: 'Error: cannot handle this one' } });
    expect(runs[1].proposed).toMatchObject({
      failed: false,
      answer: { statusCode: 200, body: { type: 'json', data: { ok: 'yes' } } },
      calls: [{ name: 'parseReport' }],
    });
    expect(runs[2].proposed).toMatchObject({ failed: true, error: { message: 'Error: two is not allowed', line: 4 } });
    expect(runs[3].current.answer?.body).toEqual({ type: 'json', data: { ok: true } });
    const stored = await s.api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${s.device.hashId}`);
    expect(runs.map((r) => r.activityHashId)).toEqual(stored.body.rows.map((r) => r.activity.hashId));
    expect(runs.every((r) => !Number.isNaN(Date.parse(r.createdAt)))).toBe(true);

    // limit: the newest only
    const two = await s.api.request<Compare>('POST', `/device-type/${s.typeHashId}/compare`, {
      eventHandler: PROPOSED.replace('__REPORT_TYPE__', s.reportTypeHashId),
      limit: 2,
    });
    expect(two.body.runs.map((r) => r.activityHashId)).toEqual(runs.slice(0, 2).map((r) => r.activityHashId));
    expect(two.body.summary).toEqual({ total: 2, differing: 1, newlyFailing: 0, fixed: 1 });
    expect((await s.api.request('POST', `/device-type/${s.typeHashId}/compare`, { eventHandler: CURRENT, limit: 51 })).status).toBe(400);

    // dry runs only: no activity, and the device type keeps its handler
    expect(await activityCount(s.api.environmentHashId)).toBe(before);
    const type = await s.api.request<{ eventHandler: string }>('GET', `/device-type/${s.typeHashId}`);
    expect(type.body.eventHandler).toBe(CURRENT.replace('__REPORT_TYPE__', s.reportTypeHashId));
  });

  it('a proposed handler that does not compile is the 400 a save answers, naming eventHandler, line and column', async () => {
    const s = await supplier();
    const broken = 'function handle(args: Arguments, exec: Exec) {\n  const x: number = ;\n}';
    const compared = await s.api.request<{ key: string; message: string }>('POST', `/device-type/${s.typeHashId}/compare`, { eventHandler: broken });
    expect(compared.status).toBe(400);
    expect(compared.body.key).toBe('parameter_error');
    expect(compared.body.message).toMatch(/^eventHandler: line 2, column \d+: /);
    const saved = await s.api.request<{ key: string; message: string }>('POST', `/device-type/${s.typeHashId}`, { eventHandler: broken });
    expect(saved.body).toEqual(compared.body);
  });

  it("another environment's device type is one that does not exist; a monitoring environment has no compare", async () => {
    const s = await supplier();
    expect((await s.api.request('POST', `/device-type/${s.typeHashId}/compare`, { eventHandler: CURRENT })).status).toBe(200);
    const other = await connectivityClient(ctx.db, base);
    expect((await other.request('POST', `/device-type/${s.typeHashId}/compare`, { eventHandler: CURRENT })).status).toBe(404);
    const monitoring = await environmentClient(ctx.db, base, 'monitoring', 'customer', ['READ', 'STATIC', 'SENSORS', 'ENVIRONMENT_ADMIN']);
    expect((await monitoring.request('POST', `/device-type/${s.typeHashId}/compare`, { eventHandler: CURRENT })).status).toBe(403);
  });
});

interface ReportRun {
  report: { fields: unknown; measurements: { significand: number }[] } | null;
  error: RunError | null;
  failed: boolean;
}
interface ReportCompare {
  runs: {
    activityHashId: string;
    subActivityHashId: string;
    deviceHashId: string | null;
    current: ReportRun;
    proposed: ReportRun;
    differs: { reports: boolean; measurements: boolean; failed: boolean };
  }[];
  summary: { total: number; differing: number; newlyFailing: number; fixed: number };
}

describe('report type compare', () => {
  it('replays the last parsed payloads with the saved and the proposed parser', async () => {
    const s = await supplier();
    expect(await report(s.device, { volts: [1] })).toBe(200);
    expect(await report(s.device, { volts: [3], fail: true })).toBe(500);
    expect(await report(s.device, { volts: [4], same: true })).toBe(200);
    await until(
      () => activityCount(s.api.environmentHashId),
      (n) => n === 3,
      'the three runs stored',
    );
    const quantity = s.quantityHashId;
    // ten times the value, and no report at all for a 4
    const proposed = `function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as number[];
  if (data[0] === 4) throw new Error('no fours');
  return { generatedAt: new Date(), measurements: data.map((v, i) => ({ channelIndex: i, quantityHashId: '${quantity}', orderOfMagnitude: 0, significand: v * 10 })) };
}`;
    const compared = await s.api.request<ReportCompare>('POST', `/supplier-report-type/${s.reportTypeHashId}/compare`, { parser: proposed });
    expect(compared.status).toBe(200);
    // the failed run parsed nothing: two payloads, newest first
    expect(compared.body.summary).toEqual({ total: 2, differing: 2, newlyFailing: 1, fixed: 0 });
    expect(compared.body.runs.map((r) => [r.deviceHashId, r.differs])).toEqual([
      [s.device.hashId, { reports: true, measurements: true, failed: true }],
      [s.device.hashId, { reports: false, measurements: true, failed: false }],
    ]);
    expect(compared.body.runs[1].current.report?.measurements.map((m) => m.significand)).toEqual([1]);
    expect(compared.body.runs[1].proposed.report?.measurements.map((m) => m.significand)).toEqual([10]);
    expect(compared.body.runs[0].proposed).toMatchObject({ failed: true, report: null, error: { message: 'Error: no fours', line: 3 } });

    const broken = await s.api.request<{ key: string; message: string }>('POST', `/supplier-report-type/${s.reportTypeHashId}/compare`, {
      parser: 'function handle(args: { payload: string }) {\n  return ;;(\n}',
    });
    expect(broken.status).toBe(400);
    expect(broken.body.message).toMatch(/^parser: line \d+, column \d+: /);
    const other = await connectivityClient(ctx.db, base);
    expect((await other.request('POST', `/supplier-report-type/${s.reportTypeHashId}/compare`, { parser: proposed })).status).toBe(404);
  });
});
