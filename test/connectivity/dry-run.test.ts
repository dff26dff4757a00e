import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMachineAccount } from '../../src/accounts/store.ts';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
import { opensslCsr, tempDir } from '../pki/support.ts';
import { settledJobCount } from '../support/jobs.ts';
import { until } from '../support/until.ts';

// Dry runs of supplier code against the whole service (API, gateway and worker in one process): real isolates,
// real PostgreSQL and Redis, a real device over HTTPS TLS-PSK for the runs that are not dry.

interface LogLine {
  type: string;
  message: string;
}
interface RunError {
  kind: string;
  message: string;
  line: number | null;
  column: number | null;
}
interface Call {
  name: string;
  failed: boolean;
  log: LogLine[];
  triggerData: Record<string, unknown>;
}
interface DeviceTypeDryRun {
  answer: { statusCode: number; headers: Record<string, string>; body: unknown } | null;
  error: RunError | null;
  failed: boolean;
  log: LogLine[];
  calls: Call[];
}
interface Measurement {
  channelIndex: number;
  quantityHashId: string;
  orderOfMagnitude: number;
  significand: number;
}
interface ReportTypeDryRun {
  report: { measurements: Measurement[] } | null;
  error: RunError | null;
  failed: boolean;
  log: LogLine[];
}
interface Supplier {
  api: RestClient;
  quantityHashId: string;
  reportTypeHashId: string;
}
interface Device {
  identity: string;
  key: string;
  hashId: string;
}

let ctx: AppContext;
let service: RunningService;
let base: string;

const BURST = 8;

beforeAll(async () => {
  // a minute's refill is one dry run: past the burst an environment is refused for the rest of the file
  ctx = await testContext({
    CERTS_DIR: tempDir(),
    SANDBOX_TIMEOUT_MS: '1500',
    SANDBOX_MAX_SOURCE_CHARS: '20000',
    DRY_RUN_BURST: String(BURST),
    DRY_RUNS_PER_MINUTE: '1',
    OUTBOUND_ALLOWED_HOSTS: 'api.example.com',
  });
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
    name: 'volts',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: PARSER(quantity.body.hashId),
  });
  expect(reportType.status).toBe(200);
  return { api, quantityHashId: quantity.body.hashId, reportTypeHashId: reportType.body.hashId };
}

async function deviceType(s: Supplier, eventHandler: string, commandTypeHashIds: string[] = []): Promise<string> {
  const type = await s.api.request<{ hashId: string }>('POST', '/device-type/', {
    name: `type ${randomBytes(3).toString('hex')}`,
    eventHandler: eventHandler.replaceAll('__REPORT_TYPE__', s.reportTypeHashId),
    fieldConfigurations: [{ key: 'mode', name: 'mode', type: 'string' }],
    pinGroupFieldConfigurations: [],
    channels: [
      { name: 'A', pinFieldConfigurations: [] },
      { name: 'B', pinFieldConfigurations: [] },
    ],
    commandTypeHashIds,
  });
  expect(type.status).toBe(200);
  return type.body.hashId;
}

async function device(s: Supplier, deviceTypeHashId: string): Promise<Device> {
  const d = { identity: `dev-${randomBytes(6).toString('hex')}`, key: randomBytes(16).toString('hex'), hashId: '' };
  const added = await s.api.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: d.identity,
    deviceTypeHashId,
    psk: d.key,
    pskIdentity: d.identity,
  });
  expect(added.status).toBe(200);
  d.hashId = added.body.hashId;
  return d;
}

/** A real device request over HTTPS TLS-PSK. */
async function report(d: Device, body: unknown) {
  const out = await opensslPsk({
    port: service.https!.port(),
    identity: d.identity,
    keyHex: d.key,
    input: httpRequestText('POST', '/report', JSON.stringify(body)),
  });
  return parseHttpResponse(out.stdout);
}

const webRequest = (data: unknown) => ({
  url: { protocol: 'https', host: 'gateway.example', path: '/report', query: {} },
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: { type: 'json', data },
  ip: '192.0.2.1',
  certificate: null,
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

// every effect but the report and the field waits for a device that reported before: the stored run's replay has them all
const EFFECTS = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  exec.parseReport({ reportTypeHashId: '__REPORT_TYPE__', payload: JSON.stringify((args.event.webRequest.body as { data: unknown }).data) });
  const again = args.device.fields.mode === 'reported';
  if (again) {
    args.scheduledCommands.forEach((c) => exec.markCommandAsSent(c.command.hashId));
    exec.sendRequest({ url: 'https://api.example.com/readings', method: 'POST', body: { type: 'json', data: { n: 1 } } });
  }
  exec.setDeviceFields({ mode: 'reported' });
  if (again) {
    exec.scheduleCommand({ commandTypeHashId: '__COMMAND_TYPE__', fields: {} });
    exec.expectNextReportBefore(new Date('2030-01-01T00:00:00Z'));
  }
  return { statusCode: 200, body: { commands: args.scheduledCommands.length } };
}`;

describe('dry run of a device type', () => {
  it('a handler that throws on line 3 answers line 3, as the activity log of a real run of it does', async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const dry = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, {
      event: { type: 'incomingRequest', webRequest: webRequest({ volts: [1] }) },
      eventHandler: THROWS_ON_LINE_3,
    });
    expect(dry.status).toBe(200);
    expect(dry.body.error).toEqual({ kind: 'error', message: 'RangeError: limit 2 is over 1', line: 3, column: 24 });
    expect(dry.body.failed).toBe(true);
    expect(dry.body.answer?.statusCode).toBe(500);

    const realType = await deviceType(s, THROWS_ON_LINE_3);
    const d = await device(s, realType);
    expect((await report(d, { volts: [1] })).status).toBe(500);
    const rows = await until(
      () => s.api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}`),
      (r) => r.body.rows.length === 1,
      "the real run's activity",
    );
    const activity = await s.api.request<{ activity: { log: LogLine[] } }>('GET', `/supplier-activity/${rows.body.rows[0].activity.hashId}`);
    expect(activity.body.activity.log).toContainEqual({ type: 'error', message: 'error: RangeError: limit 2 is over 1 (line 3, column 24)' });
  });

  it('a handler that parses a report answers the measurements the parser made', async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const dry = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, {
      event: { type: 'incomingRequest', webRequest: webRequest({ volts: [3.3, 1.25] }) },
    });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      answer: { statusCode: 200, body: { type: 'json', data: { ok: true } } },
      error: null,
      failed: false,
      log: [{ type: 'log', message: 'report received' }],
    });
    expect(dry.body.calls).toHaveLength(1);
    const parse = dry.body.calls[0];
    expect(parse).toMatchObject({ name: 'parseReport', failed: false, log: [{ type: 'log', message: 'parsing 2' }] });
    const observations = parse.triggerData.observations as { measurement: Measurement; quantity: { hashId: string } }[];
    expect(observations.map((o) => [o.measurement.channelIndex, o.measurement.orderOfMagnitude, o.measurement.significand, o.quantity.hashId])).toEqual([
      [0, -3, 3300, s.quantityHashId],
      [1, -3, 1250, s.quantityHashId],
    ]);
  });

  it('replays a stored run and changes nothing: activity log, device, commands, reports and measurements stay exactly as they were', async () => {
    const s = await supplier();
    const commandType = await s.api.request<{ hashId: string }>('POST', '/command-type/', { name: 'cycle', fieldConfigurations: [] });
    const typeHashId = await deviceType(s, EFFECTS.replaceAll('__COMMAND_TYPE__', commandType.body.hashId), [commandType.body.hashId]);
    const d = await device(s, typeHashId);
    expect((await report(d, { volts: [1.5] })).status).toBe(200);
    const real = await until(
      () => s.api.request<{ rows: { activity: { hashId: string; triggerType: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}`),
      (r) => r.body.rows.length === 1,
      'the real run',
    );
    const added = await s.api.request('POST', '/command/', {
      objectType: 'device',
      objectHashIds: [d.hashId],
      commandTypeHashId: commandType.body.hashId,
      fields: {},
      email: [],
    });
    expect(added.status).toBe(204);
    // the command's newCommand and commandDue events run the handler too: everything settles before the snapshot
    await until(
      () => s.api.request<{ rows: { activity: { triggerType: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}`),
      (r) => ['handleNewCommand', 'handleCommandDue'].every((t) => r.body.rows.some((row) => row.activity.triggerType === t)),
      "the command events' runs",
    );
    const jobsBefore = await settledJobCount(ctx, d.hashId);
    const before = await snapshot(s.api.environmentHashId);
    expect(before.device[0].last_online_at).not.toBeNull();
    expect(before.measurement).toHaveLength(1);

    const dry = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, { activityHashId: real.body.rows[0].activity.hashId });
    expect(dry.status).toBe(200);
    expect(dry.body.error).toBeNull();
    expect(dry.body.answer).toMatchObject({ statusCode: 200, body: { type: 'json', data: { commands: 1 } } });
    expect(dry.body.calls.map((c) => [c.name, c.failed])).toEqual([
      ['parseReport', false],
      ['markCommandAsSent', false],
      ['sendRequest', false],
      ['setDeviceFields', false],
      ['scheduleCommand', false],
      ['expectNextReportBefore', false],
    ]);
    const observations = dry.body.calls[0].triggerData.observations as { measurement: Measurement }[];
    expect(observations.map((o) => o.measurement.significand)).toEqual([1500]);
    expect(dry.body.calls[2].log).toEqual([{ type: 'log', message: 'POST https://api.example.com/readings: not sent (dry run)' }]);

    expect(dry.body.calls[4].triggerData).toMatchObject({ command: { deviceHashId: d.hashId, commandTypeHashId: commandType.body.hashId, fields: {} } });
    expect(await snapshot(s.api.environmentHashId)).toEqual(before);
    expect(await settledJobCount(ctx, d.hashId)).toBe(jobsBefore);
  });

  it('a device call the real run would refuse fails in the dry run too, with the same reason', async () => {
    const s = await supplier();
    const commandType = await s.api.request<{ hashId: string }>('POST', '/command-type/', {
      name: 'cycle',
      fieldConfigurations: [{ key: 'interval', name: 'interval', type: 'integer' }],
    });
    const typeHashId = await deviceType(s, PARSES, [commandType.body.hashId]);
    const d = await device(s, typeHashId);
    const handler = `function handle(args: Arguments, exec: Exec) {
  exec.scheduleCommand({ commandTypeHashId: '${commandType.body.hashId}', fields: { interval: 60 } });
  exec.scheduleCommand({ commandTypeHashId: '${commandType.body.hashId}', fields: { speed: 3 } });
  exec.markCommandAsSent('nosuchcommand');
  exec.setDeviceFields({ mode: 42 });
  exec.setDeviceFields({ mode: 'fast' });
  exec.increaseReportingCounter(new Date('2001-01-01T00:00:00Z'));
}`;
    const dry = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, {
      event: { type: 'reportLate' },
      eventHandler: handler,
      deviceHashId: d.hashId,
    });
    expect(dry.status).toBe(200);
    expect(dry.body.calls.map((c) => [c.name, c.failed])).toEqual([
      ['scheduleCommand', false],
      ['scheduleCommand', true],
      ['markCommandAsSent', true],
      ['setDeviceFields', true],
      ['setDeviceFields', false],
      ['increaseReportingCounter', true],
    ]);
    expect(dry.body.calls[3].log[0].message).toContain('mode');
    expect(dry.body.calls[4].triggerData).toEqual({ diff: { old: { mode: null }, new: { mode: 'fast' } } });
    expect(dry.body.calls[5].log[0].message).toContain('48 hours in the past');
    expect(dry.body.calls[1].log[0].message).toContain('fields.speed is not a field of the command type');
    expect(dry.body.calls[2].log[0].message).toContain('nosuchcommand');
    const { rows } = await ctx.db.query('SELECT 1 FROM command c JOIN device d ON d.id = c.device_id WHERE d.hash_id = $1', [d.hashId]);
    expect(rows).toHaveLength(0);
  });
});

describe('dry run of a report type', () => {
  it("answers the parser's measurements, and the saved or a given parser's error with its line", async () => {
    const s = await supplier();
    const ok = await s.api.request<ReportTypeDryRun>('POST', `/supplier-report-type/${s.reportTypeHashId}/dry-run`, {
      payload: JSON.stringify({ volts: [0.5, 2] }),
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ error: null, failed: false, log: [{ type: 'log', message: 'parsing 2' }] });
    expect(ok.body.report?.measurements.map((m) => [m.channelIndex, m.quantityHashId, m.orderOfMagnitude, m.significand])).toEqual([
      [0, s.quantityHashId, -3, 500],
      [1, s.quantityHashId, -3, 2000],
    ]);
    const broken = await s.api.request<ReportTypeDryRun>('POST', `/supplier-report-type/${s.reportTypeHashId}/dry-run`, { payload: 'not json' });
    expect(broken.body).toMatchObject({ report: null, failed: true, error: { kind: 'error', line: 2 } });
    const given = await s.api.request<ReportTypeDryRun>('POST', `/supplier-report-type/${s.reportTypeHashId}/dry-run`, {
      payload: '{}',
      parser:
        'function handle(args: { payload: string }) {\n  const n: number = 1;\n  return null as unknown as never;\n}\nfunction never(): void { throw new Error("x"); }',
    });
    expect(given.body).toMatchObject({ report: null, failed: true, error: { kind: 'invalid-result', line: null } });
    const unparsable = await s.api.request<ReportTypeDryRun>('POST', `/supplier-report-type/${s.reportTypeHashId}/dry-run`, {
      payload: '{}',
      parser: 'function handle(args: { payload: string }) {\n  return {;\n}',
    });
    expect(unparsable.body.error).toMatchObject({ kind: 'compile', line: 2, message: expect.not.stringContaining('line 2') });
  });
});

describe('dry run of an identifier', () => {
  it('a webhook identifier answers the device it names, existing or to be created, and creates none', async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const d = await device(s, typeHashId);
    const webhook = await s.api.request<{ hashId: string }>('POST', '/supplier-webhook/', {
      name: 'hook',
      identifier:
        'function handle(args: { request: { body?: { data: { id: string } } } }) {\n  return { deviceTypeHashId: "__TYPE__", deviceIdentifier: args.request.body!.data.id };\n}'.replace(
          '__TYPE__',
          typeHashId,
        ),
    });
    expect(webhook.status).toBe(200);
    const known = await s.api.request<{ device: unknown; error: unknown }>('POST', `/supplier-webhook/${webhook.body.hashId}/dry-run`, {
      request: webRequest({ id: d.identity }),
    });
    expect(known.body).toMatchObject({ error: null, device: { hashId: d.hashId, created: false } });
    const unknown = await s.api.request<{ device: unknown }>('POST', `/supplier-webhook/${webhook.body.hashId}/dry-run`, {
      request: webRequest({ id: 'never-seen' }),
    });
    expect(unknown.body).toMatchObject({ device: { hashId: null, deviceTypeHashId: typeHashId, created: true } });
    const { rows } = await ctx.db.query("SELECT 1 FROM device WHERE supplier_device_identifier = 'never-seen'");
    expect(rows).toHaveLength(0);
  });

  it("a supplier certificate's identifier answers the device a certificate names, and a given identifier's error its line", async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const { csrPem } = await opensslCsr(tempDir(), 'acme', '/O=Acme/CN=Acme device CA');
    const certificate = await s.api.request<{ hashId: string }>('POST', '/supplier-certificate/', {
      name: 'acme',
      csr: csrPem,
      identifier: `function handle(args: { certificate: { subjects: Subject[][] } }) {
  const cn = args.certificate.subjects[0].find((a) => a.key.value === 'CN')!;
  return { deviceTypeHashId: '${typeHashId}', deviceIdentifier: cn.value.value };
}`,
    });
    expect(certificate.status).toBe(200);
    const subjects = [[{ key: { encoding: 'utf8', value: 'CN' }, value: { encoding: 'utf8', value: 'thermo-9' } }]];
    const named = await s.api.request<{ result: unknown; device: unknown; error: unknown }>(
      'POST',
      `/supplier-certificate/${certificate.body.hashId}/dry-run`,
      { certificate: { subjects } },
    );
    expect(named.body).toMatchObject({
      error: null,
      result: { deviceTypeHashId: typeHashId, deviceIdentifier: 'thermo-9' },
      device: { hashId: null, created: true },
    });
    const throwing = await s.api.request<{ error: RunError }>('POST', `/supplier-certificate/${certificate.body.hashId}/dry-run`, {
      certificate: { subjects },
      identifier: 'function handle(args: { certificate: { subjects: Subject[][] } }) {\n  return args.certificate.subjects[1][0];\n}',
    });
    expect(throwing.body.error).toMatchObject({ kind: 'error', message: expect.stringContaining('TypeError'), line: 2 });
  });
});

describe('limits', () => {
  it("an environment cannot dry-run another environment's device type or device", async () => {
    const a = await supplier();
    const b = await supplier();
    const typeOfA = await deviceType(a, PARSES);
    const deviceOfA = await device(a, typeOfA);
    const typeOfB = await deviceType(b, PARSES);
    const event = { type: 'incomingRequest', webRequest: webRequest({ volts: [1] }) };
    const foreignType = await b.api.request<{ key: string }>('POST', `/device-type/${typeOfA}/dry-run`, { event });
    expect(foreignType.status).toBe(404);
    expect(foreignType.body.key).toBe('not_found_error');
    const foreignDevice = await b.api.request<{ key: string; message: string }>('POST', `/device-type/${typeOfB}/dry-run`, {
      event,
      deviceHashId: deviceOfA.hashId,
    });
    expect(foreignDevice.status).toBe(400);
    expect(foreignDevice.body).toMatchObject({ key: 'parameter_error', message: expect.stringContaining('deviceHashId') });
    expect((await b.api.request('POST', `/supplier-report-type/${a.reportTypeHashId}/dry-run`, { payload: '{}' })).status).toBe(404);
    // a stored run of A's is not B's to replay
    expect((await report(deviceOfA, { volts: [1] })).status).toBe(200);
    const runOfA = await until(
      () => a.api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${deviceOfA.hashId}`),
      (r) => r.body.rows.length === 1,
      "A's run",
    );
    const replay = await b.api.request<{ key: string }>('POST', `/device-type/${typeOfB}/dry-run`, { activityHashId: runOfA.body.rows[0].activity.hashId });
    expect(replay.status).toBe(404);
    expect(replay.body.key).toBe('not_found_error');
  });

  it('refuses bad input with a parameter_error naming the field', async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const dryRun = (body: unknown) => s.api.request<{ key: string; message: string }>('POST', `/device-type/${typeHashId}/dry-run`, body);
    const neither = await dryRun({ deviceHashId: 'abc' });
    expect(neither.status).toBe(400);
    expect(neither.body).toMatchObject({ key: 'parameter_error', message: expect.stringContaining('event or activityHashId') });
    const both = await dryRun({ event: { type: 'reportLate' }, activityHashId: 'abc' });
    expect(both.status).toBe(400);
    const noRequest = await dryRun({ event: { type: 'incomingRequest' } });
    expect(noRequest.status).toBe(400);
    expect(noRequest.body).toMatchObject({ key: 'parameter_error', message: expect.stringContaining('event.webRequest') });
    const badType = await dryRun({ event: { type: 'somethingElse' } });
    expect(badType.status).toBe(400);
    expect(badType.body).toMatchObject({ key: 'parameter_error', message: expect.stringContaining('event.type') });
    const long = await dryRun({ event: { type: 'reportLate' }, eventHandler: `function handle() {}\n//${'x'.repeat(20_000)}` });
    expect(long.status).toBe(400);
    expect(long.body).toMatchObject({ key: 'parameter_error', message: expect.stringMatching(/^eventHandler .*SANDBOX_MAX_SOURCE_CHARS/) });
  });

  it('an endless loop fails its dry run with a timeout error, and the service serves the next request', async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const event = { type: 'incomingRequest', webRequest: webRequest({ volts: [4] }) };
    const looping = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, {
      event,
      eventHandler: 'function handle() {\n  for (;;) {}\n}',
    });
    expect(looping.status).toBe(200);
    expect(looping.body).toMatchObject({
      failed: true,
      error: { kind: 'timeout', message: expect.stringContaining('time limit'), line: null, column: null },
      answer: { statusCode: 504 },
    });
    const next = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, { event });
    expect(next.body).toMatchObject({ failed: false, error: null, answer: { statusCode: 200 } });
  });

  it("answers 429 rate_limit_error with Retry-After past the environment's bucket, and another environment still runs", async () => {
    const s = await supplier();
    const other = await supplier();
    const body = { payload: JSON.stringify({ volts: [1] }) };
    const statuses: number[] = [];
    for (let i = 0; i < BURST + 1; i++) statuses.push((await s.api.request('POST', `/supplier-report-type/${s.reportTypeHashId}/dry-run`, body)).status);
    expect(statuses).toEqual([...Array(BURST).fill(200), 429]);
    // a second account of the same environment, over raw HTTP to see the headers: the bucket is the environment's
    const account = await createMachineAccount(ctx.db, s.api.environmentHashId, ['ENVIRONMENT_ADMIN']);
    const login = await fetch(`${base}/authentication/machine-login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'api-version': '5' },
      body: JSON.stringify({ assertion: account.assertion }),
    });
    const { jwt } = (await login.json()) as { jwt: string };
    const refused = await fetch(`${base}/supplier-report-type/${s.reportTypeHashId}/dry-run`, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', 'api-version': '5', 'environment-hash-id': s.api.environmentHashId, authorization: `Bearer ${jwt}` },
    });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ key: 'rate_limit_error', message: expect.stringContaining('DRY_RUN_BURST') });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await other.api.request('POST', `/supplier-report-type/${other.reportTypeHashId}/dry-run`, body)).status).toBe(200);
  });
});

describe('metrics', () => {
  it("a dry run is not counted among the runs of devices' code on /metrics", async () => {
    const s = await supplier();
    const typeHashId = await deviceType(s, PARSES);
    const runs = async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      return text
        .split('\n')
        .filter((l) => l.startsWith('gridgate_sandbox_runs_total{'))
        .join('\n');
    };
    const before = await runs();
    const dry = await s.api.request<DeviceTypeDryRun>('POST', `/device-type/${typeHashId}/dry-run`, {
      event: { type: 'incomingRequest', webRequest: webRequest({ volts: [2] }) },
    });
    expect(dry.body).toMatchObject({ failed: false, calls: [{ name: 'parseReport', failed: false }] });
    expect(await runs()).toBe(before);
  });
});

describe('OpenAPI', () => {
  it('describes each dry run with its body and answer', async () => {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as {
      paths: Record<
        string,
        {
          post?: {
            requestBody?: unknown;
            responses?: Record<string, { content?: { 'application/json'?: { schema?: { properties?: Record<string, unknown> } } } }>;
          };
        }
      >;
    };
    for (const path of [
      '/device-type/{hashId}/dry-run',
      '/supplier-report-type/{hashId}/dry-run',
      '/supplier-webhook/{hashId}/dry-run',
      '/supplier-certificate/{hashId}/dry-run',
    ]) {
      const post = doc.paths[path]?.post;
      expect(post?.requestBody, path).toBeDefined();
      expect(Object.keys(post?.responses?.['200']?.content?.['application/json']?.schema?.properties ?? {}), path).toEqual(
        expect.arrayContaining(['error', 'failed', 'log']),
      );
    }
  });
});

/** Every row the runs of an environment could write, in full. */
async function snapshot(environmentHashId: string) {
  const rows = async (sql: string) => (await ctx.db.query(`${sql} ORDER BY id`, [environmentHashId])).rows;
  const env = 'SELECT id FROM environment WHERE hash_id = $1';
  return {
    activity: await rows(`SELECT * FROM supplier_activity WHERE environment_id = (${env})`),
    device: await rows(`SELECT * FROM device WHERE environment_id = (${env})`),
    command: await rows(`SELECT * FROM command WHERE environment_id = (${env})`),
    report: await rows(`SELECT * FROM condition_report WHERE environment_id = (${env})`),
    measurement: await rows(`SELECT * FROM measurement WHERE environment_id = (${env})`),
  };
}
