import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { clearCompileCache } from '../../src/sandbox/compile.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient } from '../support/provision.ts';

// Supplier code that misbehaves, seen from the outside: over the REST API and the HTTPS-PSK device port.

interface Api {
  request<T = Record<string, unknown>>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }>;
}
interface Supplier {
  api: Api;
  reportTypeHashId: string;
  quantityHashId: string;
}
interface Device {
  identity: string;
  key: string;
  hashId: string;
}
interface LogLine {
  type: string;
  message: string;
}
interface SubActivity {
  triggerType: string;
  failed: boolean;
  log: LogLine[];
  triggerData: Record<string, unknown>;
}
/** triggerData.request is the SDK's WebRequest: the device's request inside it */
interface Activity {
  hashId: string;
  failed: boolean;
  log: LogLine[];
  triggerData: { request: { request: { url: { path: string } }; response: unknown } };
  activities: SubActivity[];
}

let ctx: AppContext;
let service: RunningService;
let port: number;
let base: string;

async function supplier(): Promise<Supplier> {
  const api: Api = await connectivityClient(ctx.db, base);
  const quantity = await api.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0 });
  const reportType = await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
    name: 'report',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: `const Q = "${quantity.body.hashId}";
function handle(args: { payload: string }, exec: Exec) {
  exec.addLog('payload ' + args.payload);
  if (args.payload.startsWith('surrogate')) return { generatedAt: new Date(), measurements: [], fields: { note: 'bad \\ud800 half', nul: 'a\\u0000b' } };
  return { generatedAt: new Date(), measurements: [{ channelIndex: 0, quantityHashId: Q, orderOfMagnitude: 0, significand: 1 }] };
}`,
  });
  expect(reportType.status).toBe(200);
  return { api, reportTypeHashId: reportType.body.hashId, quantityHashId: quantity.body.hashId };
}

async function deviceTypeOf(s: Supplier, eventHandler: string) {
  return s.api.request<{ hashId: string; key?: string; message?: string }>('POST', '/device-type/', {
    name: `type ${randomBytes(3).toString('hex')}`,
    eventHandler: eventHandler.replaceAll('__REPORT_TYPE__', s.reportTypeHashId),
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'V', pinFieldConfigurations: [], defaultPinName: 'V', charts: [] }],
    commandTypeHashIds: [],
  });
}

async function deviceOf(s: Supplier, deviceTypeHashId: string): Promise<Device> {
  const device = { identity: `dev-${randomBytes(6).toString('hex')}`, key: randomBytes(16).toString('hex'), hashId: '' };
  const added = await s.api.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: device.identity,
    deviceTypeHashId,
    psk: device.key,
    pskIdentity: device.identity,
  });
  expect(added.status).toBe(200);
  device.hashId = added.body.hashId;
  return device;
}

async function deviceRequest(device: Device, path: string, body: string | null) {
  const out = await opensslPsk({ port, identity: device.identity, keyHex: device.key, input: httpRequestText(body === null ? 'GET' : 'POST', path, body) });
  return parseHttpResponse(out.stdout);
}

/** The device's activities, in full. */
async function activitiesOf(s: Supplier, device: Device): Promise<Activity[]> {
  const rows = (await s.api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?rowsPerPage=100&deviceHashId=${device.hashId}`))
    .body.rows;
  return Promise.all(rows.map(async (r) => (await s.api.request<{ activity: Activity }>('GET', `/supplier-activity/${r.activity.hashId}`)).body.activity));
}

/** The one activity of the device's request to `path`. */
async function activityAt(s: Supplier, device: Device, path: string): Promise<Activity> {
  const found = (await activitiesOf(s, device)).filter((a) => a.triggerData.request?.request?.url.path === path);
  expect(found).toHaveLength(1);
  return found[0];
}

const errorsOf = (log: LogLine[]) => log.filter((l) => l.type === 'error').map((l) => l.message);

const ECHO = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  return { statusCode: 200, body: { ok: 'echo', path: args.event.webRequest.url.path } };
}`;

// about 1,100 nested parentheses overflow the type stripper's WebAssembly stack: in the process's own stripper
// this broke every later compile of every supplier ("memory access out of bounds") until a restart
const POISON = `const a = ${'('.repeat(3000)}1${')'.repeat(3000)};\nfunction handle() { return { statusCode: 200, body: a }; }\n`;

// what a careless or hostile supplier's handler does, one path each
const NOISY = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const request = args.event.webRequest;
  const RT = '__REPORT_TYPE__';
  switch (request.url.path) {
    case '/big': return { statusCode: 200, body: { type: 'string', data: 'b'.repeat(20000) } };
    case '/huge': return { statusCode: 200, body: { type: 'string', data: 'h'.repeat(30 * 1024 * 1024) } };
    case '/logs':
      for (let i = 0; i < 500; i++) exec.addLog('line ' + i + ' ' + 'l'.repeat(i === 0 ? 3000 : 10));
      return { statusCode: 200, body: { ok: 'logged' } };
    case '/bigcall':
      exec.parseReport({ reportTypeHashId: RT, payload: 'z'.repeat(30000) });
      return { statusCode: 200, body: { ok: 'never' } };
    case '/manyparses':
      for (let i = 0; i < 40; i++) exec.parseReport({ reportTypeHashId: RT, payload: String(i) + 'p'.repeat(15000) });
      return { statusCode: 200, body: { ok: 'parsed' } };
    case '/nul-payload':
      exec.parseReport({ reportTypeHashId: RT, payload: 'nul\\u0000inside' });
      return { statusCode: 200, body: { ok: 'nul' } };
    case '/surrogate':
      exec.parseReport({ reportTypeHashId: RT, payload: 'surrogate' });
      exec.addLog('half \\ud800 here');
      return { statusCode: 200, body: { echo: 'lone \\udc00' } };
    case '/fields-nul':
      exec.setDeviceFields({ note: 'a\\u0000b' });
      return { statusCode: 200, body: { ok: 'fields' } };
    case '/header':
      return { statusCode: 200, headers: { 'x-good': 'yes', 'x-bad': 'a\\r\\nInjected: yes' }, body: { ok: 'headers' } };
    default:
      return { statusCode: 200, body: { got: request.body ?? null } };
  }
}`;

let noisy: Supplier;
let noisyDevice: Device;

beforeAll(async () => {
  ctx = await testContext({
    SANDBOX_TIMEOUT_MS: '5000',
    SANDBOX_MEMORY_MB: '160',
    SANDBOX_COMPILES_PER_MINUTE: '5',
    SANDBOX_MAX_SOURCE_CHARS: '20000',
    SANDBOX_MAX_ANSWER_BYTES: '10000',
    SANDBOX_MAX_CALL_BYTES: '20000',
    ACTIVITY_MAX_BYTES: '100000',
  });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  base = `http://127.0.0.1:${service.apiPort()}`;
  noisy = await supplier();
  const type = await deviceTypeOf(noisy, NOISY);
  expect(type.status).toBe(200);
  noisyDevice = await deviceOf(noisy, type.body.hashId);
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

describe('compiling supplier code cannot fail for anyone but its author', () => {
  it('after one supplier saves code that faults the compiler, another supplier saves code and its devices are answered', async () => {
    const victim = await supplier();
    const attacker = await supplier();
    const victimType = await deviceTypeOf(victim, ECHO);
    expect(victimType.status).toBe(200);
    const victimDevice = await deviceOf(victim, victimType.body.hashId);

    const poisoned = await deviceTypeOf(attacker, POISON);
    expect(poisoned.status).toBe(400);
    expect(poisoned.body).toMatchObject({ key: 'parameter_error' });

    // a new save of the other supplier compiles
    const saved = await deviceTypeOf(victim, `${ECHO}\nconst VERSION: number = 2;\n`);
    expect(saved.status).toBe(200);
    // and its device's handler compiles again when its cached result is gone (evicted, or another process)
    clearCompileCache();
    const res = await deviceRequest(victimDevice, '/after-poison', '{}');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: 'echo', path: '/after-poison' });
    expect(poisoned.body.message).toMatch(/^eventHandler: .*TypeScript compiler failed on this code/);
  });
});

describe('saves are limited per supplier', () => {
  it('new sources beyond SANDBOX_COMPILES_PER_MINUTE are 429 for that supplier only; a source over SANDBOX_MAX_SOURCE_CHARS is 400', async () => {
    const flooder = await supplier(); // its report type's parser is its first new source
    const other = await supplier();
    const saves = [];
    for (let i = 0; i < 5; i++) saves.push(await deviceTypeOf(flooder, `${ECHO}\nconst N: number = ${i};\n`));
    expect(saves.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
    expect(saves[4].body).toMatchObject({ key: 'rate_limit_error' });
    expect(saves[4].body.message).toMatch(/^eventHandler: more than 5 new sources compiled in a minute for this environment \(SANDBOX_COMPILES_PER_MINUTE\)/);
    // a source already compiled costs nothing
    expect((await deviceTypeOf(flooder, `${ECHO}\nconst N: number = 0;\n`)).status).toBe(200);
    expect((await deviceTypeOf(other, `${ECHO}\nconst N: number = 99;\n`)).status).toBe(200);

    const big = await deviceTypeOf(other, `${ECHO}\n// ${'x'.repeat(20000)}\n`);
    expect(big.status).toBe(400);
    expect(big.body).toMatchObject({ key: 'parameter_error' });
    expect(big.body.message).toMatch(/^eventHandler: .*over the limit of 20000 \(SANDBOX_MAX_SOURCE_CHARS\)/);
  });
});

describe('everything supplier code produces is bounded, and each bound is named where the supplier looks', () => {
  it('an answer body over SANDBOX_MAX_ANSWER_BYTES fails the run: the device gets 500 handler_error, the activity names the limit', async () => {
    const res = await deviceRequest(noisyDevice, '/big', '{}');
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body)).toMatchObject({ key: 'handler_error' });
    const activity = await activityAt(noisy, noisyDevice, '/big');
    expect(activity.failed).toBe(true);
    expect(errorsOf(activity.log)).toEqual(["invalid-result: the answer's body is 20000 bytes, over the limit of 10000 (SANDBOX_MAX_ANSWER_BYTES)"]);
  });

  it('a 30 MB answer is neither sent nor stored: SANDBOX_MAX_RESULT_BYTES fails the run', async () => {
    const res = await deviceRequest(noisyDevice, '/huge', '{}');
    expect(res.status).toBe(500);
    expect(res.body.length).toBeLessThan(1000);
    const activity = await activityAt(noisy, noisyDevice, '/huge');
    expect(errorsOf(activity.log)[0]).toMatch(/over the limit of 1048576 \(SANDBOX_MAX_RESULT_BYTES\)/);
    const { rows } = await ctx.db.query<{ bytes: number }>(
      'SELECT octet_length(trigger_data::text) + octet_length(log::text) AS bytes FROM supplier_activity WHERE hash_id = $1',
      [activity.hashId],
    );
    expect(rows[0].bytes).toBeLessThan(10_000);
  });

  it('log lines over SANDBOX_MAX_LOG_LINES and SANDBOX_MAX_LOG_LINE_CHARS are dropped or cut, with error lines saying so', async () => {
    const res = await deviceRequest(noisyDevice, '/logs', '{}');
    expect(res.status).toBe(200);
    const activity = await activityAt(noisy, noisyDevice, '/logs');
    const lines = activity.log.filter((l) => l.type === 'log');
    expect(lines).toHaveLength(200);
    expect(lines[0].message).toMatch(/\[truncated\]$/);
    expect(errorsOf(activity.log)).toEqual([
      '300 more log lines dropped: at most 200 per run (SANDBOX_MAX_LOG_LINES)',
      '1 log line cut at 2000 characters, marked [truncated] (SANDBOX_MAX_LOG_LINE_CHARS)',
    ]);
  });

  it('an exec call with arguments over SANDBOX_MAX_CALL_BYTES throws in the handler; the run fails naming the limit', async () => {
    const res = await deviceRequest(noisyDevice, '/bigcall', '{}');
    expect(res.status).toBe(500);
    const activity = await activityAt(noisy, noisyDevice, '/bigcall');
    expect(activity.activities).toEqual([]);
    const errors = errorsOf(activity.log);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^refused parseReport: the arguments are 300\d\d bytes of JSON, over the limit of 20000 \(SANDBOX_MAX_CALL_BYTES\)$/);
    // the refusal is thrown at the call site: the error names that line of the supplier's source
    expect(errors[1]).toBe(`error: RangeError: ${errors[0].slice('refused '.length)} (line 13, column ${/column (\d+)\)$/.exec(errors[1])?.[1]})`);
  });

  it('an activity over ACTIVITY_MAX_BYTES is stored with its later parts cut short and marked, and an error line saying so', async () => {
    const res = await deviceRequest(noisyDevice, '/manyparses', '{}');
    expect(res.status).toBe(200);
    const activity = await activityAt(noisy, noisyDevice, '/manyparses');
    expect(activity.activities).toHaveLength(40);
    expect(activity.activities.every((a) => a.triggerType === 'parseReport' && !a.failed)).toBe(true);
    expect(activity.activities[0].triggerData.payload).toBe(`0${'p'.repeat(15000)}`);
    expect(activity.activities[39].triggerData).toMatchObject({ truncated: true, limit: 100000, reason: 'ACTIVITY_MAX_BYTES' });
    expect(errorsOf(activity.log).at(-1)).toMatch(
      /^this activity is \d+ bytes of JSON, over the limit of 100000 \(ACTIVITY_MAX_BYTES\): \d+ parts stored cut short/,
    );
    const { rows } = await ctx.db.query<{ bytes: number }>(
      'SELECT octet_length(trigger_data::text) + octet_length(log::text) + octet_length(activities::text) AS bytes FROM supplier_activity WHERE hash_id = $1',
      [activity.hashId],
    );
    expect(rows[0].bytes).toBeLessThan(120_000);
    // the reports themselves are whole
    const reports = await ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM condition_report r JOIN device d ON d.id = r.device_id WHERE d.hash_id = $1 AND length(r.payload) > 15000',
      [noisyDevice.hashId],
    );
    expect(reports.rows[0].n).toBe(40);
  });
});

describe('data PostgreSQL cannot store (NUL, unpaired surrogates) fails alone and visibly', () => {
  it('a device JSON body with a lone surrogate: the device is answered, the activity is stored with U+FFFD and an error line', async () => {
    const res = await deviceRequest(noisyDevice, '/echo', '{"s":"bad \\ud800 half","n":"nul \\u0000 here"}');
    expect(res.status).toBe(200);
    const activity = await activityAt(noisy, noisyDevice, '/echo');
    expect(activity.failed).toBe(false);
    expect(JSON.stringify(activity.triggerData.request)).toContain('bad \ufffd half');
    expect(errorsOf(activity.log)).toEqual(['4 characters that cannot be stored (NUL, unpaired surrogate) in this activity replaced by U+FFFD']);
  });

  it('a parseReport payload with a NUL: the report is stored with U+FFFD, its sub-activity says so', async () => {
    const res = await deviceRequest(noisyDevice, '/nul-payload', '{}');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: 'nul' });
    const activity = await activityAt(noisy, noisyDevice, '/nul-payload');
    expect(activity.activities[0]).toMatchObject({ triggerType: 'parseReport', failed: false });
    expect(errorsOf(activity.activities[0].log)).toContain(
      '1 character that cannot be stored (NUL, unpaired surrogate) in the payload as stored with the report replaced by U+FFFD',
    );
    const reportHashId = activity.activities[0].triggerData.reportHashId as string;
    const { rows } = await ctx.db.query<{ payload: string }>('SELECT payload FROM condition_report WHERE hash_id = $1', [reportHashId]);
    expect(rows[0].payload).toBe('nul\ufffdinside');
  });

  it('a parser and a handler emitting a lone surrogate and a NUL: answered, report and activity stored, each replacement said', async () => {
    const res = await deviceRequest(noisyDevice, '/surrogate', '{}');
    expect(res.status).toBe(200);
    // JSON.stringify escapes the lone surrogate: the device gets it back as sent (`\udc00`, plain ASCII)
    expect(res.body).toBe('{"echo":"lone \\udc00"}');
    const activity = await activityAt(noisy, noisyDevice, '/surrogate');
    const parse = activity.activities[0];
    expect(parse).toMatchObject({ triggerType: 'parseReport', failed: false, triggerData: { fields: { note: 'bad \ufffd half', nul: 'a\ufffdb' } } });
    expect(errorsOf(parse.log)).toEqual(["2 characters that cannot be stored (NUL, unpaired surrogate) in the report's fields replaced by U+FFFD"]);
    expect(activity.log.find((l) => l.type === 'log' && l.message.startsWith('half'))?.message).toBe('half \ufffd here');
    const { rows } = await ctx.db.query<{ fields: unknown }>('SELECT fields FROM condition_report WHERE hash_id = $1', [parse.triggerData.reportHashId]);
    expect(rows[0].fields).toEqual({ note: 'bad \ufffd half', nul: 'a\ufffdb' });
  });

  it('setDeviceFields with a NUL is refused in a failed sub-activity naming why; the run and the answer stand', async () => {
    const res = await deviceRequest(noisyDevice, '/fields-nul', '{}');
    expect(res.status).toBe(200);
    const activity = await activityAt(noisy, noisyDevice, '/fields-nul');
    expect(activity.failed).toBe(false);
    expect(activity.activities[0]).toMatchObject({ triggerType: 'setDeviceFields', failed: true });
    expect(errorsOf(activity.activities[0].log)).toEqual([
      'not applied: setDeviceFields argument fields.note holds a NUL character or an unpaired surrogate, which cannot be stored',
    ]);
  });
});

describe('answer headers', () => {
  it('a header with CR/LF is refused with an error line; the device gets the rest of the answer', async () => {
    const res = await deviceRequest(noisyDevice, '/header', '{}');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: 'headers' });
    expect(res.headers['x-good']).toBe('yes');
    expect(res.headers['x-bad']).toBeUndefined();
    expect(res.headers.injected).toBeUndefined();
    const activity = await activityAt(noisy, noisyDevice, '/header');
    expect(activity.failed).toBe(false);
    expect(errorsOf(activity.log)).toEqual([
      'header "x-bad" refused: its value "a\\r\\nInjected: yes" holds CR, LF or another character a header cannot carry',
    ]);
  });
});
