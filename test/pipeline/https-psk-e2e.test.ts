import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { settledJobCount } from '../support/jobs.ts';

const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as { t: number; v: number };
  exec.addLog('parsing ' + args.payload);
  return {
    generatedAt: new Date(data.t),
    measurements: [
      { channelIndex: 0, quantityHashId: QUANTITY, generatedAt: new Date(data.t), orderOfMagnitude: -3, significand: data.v * 1000 },
    ],
  };
}`;

const HANDLER = `
const REPORT_TYPE = "__REPORT_TYPE__";
function handle(args: ArgumentsForIncomingRequestEvent, exec: Exec): IncomingRequestResponse;
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const request = args.event.webRequest;
  exec.addLog('request ' + request.method + ' ' + request.url.path + ' from ' + (request.pskIdentity ?? '?'));
  if (request.url.path === '/throw') throw new Error('supplier bug');
  if (request.url.path === '/loop') { while (true) {} }
  if (request.url.path === '/eat') { const a: number[][] = []; while (true) a.push(new Array(1e6).fill(1)); }
  if (request.body === undefined || request.body.type !== 'json') return { statusCode: 400, body: ['parameter_error', 'POST JSON'] };
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(request.body.data) });
  return { statusCode: 200, body: { ok: true, device: args.device.supplierDeviceIdentifier, commands: args.scheduledCommands.length } };
}`;

interface Api {
  request<T = Record<string, unknown>>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }>;
}

let ctx: AppContext;
let service: RunningService;
let api: Api;
let port: number;
const device = { identity: `dev-${randomBytes(4).toString('hex')}`, key: randomBytes(16).toString('hex'), hashId: '' };

beforeAll(async () => {
  // a time limit well above what eating 32 MiB takes on a loaded machine: /eat must hit the memory limit, not the clock
  ctx = await testContext({ SANDBOX_TIMEOUT_MS: '1500', SANDBOX_MEMORY_MB: '32', DEVICE_BODY_LIMIT_BYTES: '4096' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  const env = await createEnvironment(ctx.db, 'connectivity', 'e2e supplier');
  const account = await createMachineAccount(ctx.db, env.hashId, ['ENVIRONMENT_ADMIN']);
  const base = `http://127.0.0.1:${service.apiPort()}`;
  const login = await fetch(`${base}/authentication/machine-login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '5' },
    body: JSON.stringify({ assertion: account.assertion }),
  });
  const { jwt } = (await login.json()) as { jwt: string };
  api = {
    async request(method, url, body) {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: {
          'api-version': '5',
          'environment-hash-id': env.hashId,
          authorization: `Bearer ${jwt}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
  };
  const quantity = await api.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: -3 });
  const reportType = await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
    name: 'Voltage report',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: `const QUANTITY = "${quantity.body.hashId}";\n${PARSER}`,
  });
  expect(reportType.status).toBe(200);
  const deviceType = await api.request<{ hashId: string }>('POST', '/device-type/', {
    name: 'Voltage logger',
    eventHandler: HANDLER.replace('__REPORT_TYPE__', reportType.body.hashId),
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'Voltage', pinFieldConfigurations: [], defaultPinName: 'V', charts: [] }],
    commandTypeHashIds: [],
  });
  expect(deviceType.status).toBe(200);
  const added = await api.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: 'logger-1',
    deviceTypeHashId: deviceType.body.hashId,
    psk: device.key,
    pskIdentity: device.identity,
  });
  expect(added.status).toBe(200);
  device.hashId = added.body.hashId;
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

async function deviceRequest(path: string, body: string | null, cipher?: string) {
  const out = await opensslPsk({
    port,
    identity: device.identity,
    keyHex: device.key,
    cipher,
    input: httpRequestText(body === null ? 'GET' : 'POST', path, body),
  });
  return parseHttpResponse(out.stdout);
}

describe('a device report over HTTPS TLS-PSK, end to end (openssl s_client as the device)', () => {
  it('runs the handler and parser, stores the report, answers with the handler result and logs the run', async () => {
    const res = await deviceRequest('/report', JSON.stringify({ t: Date.parse('2026-11-01T10:00:00Z'), v: 3.06 }));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: true, device: 'logger-1', commands: 0 });

    const activities = await api.request<{ rows: { activity: { hashId: string; triggerType: string; failed: boolean } }[] }>('GET', '/supplier-activity/');
    const run = activities.body.rows.map((r) => r.activity).find((r) => r.triggerType === 'handleIncomingRequest' && !r.failed);
    expect(run).toBeDefined();
    const one = await api.request<{ activity: unknown }>('GET', `/supplier-activity/${run!.hashId}`);
    const activity = one.body.activity as {
      log: { message: string }[];
      activities: {
        triggerType: string;
        failed: boolean;
        triggerData: { observations: { measurement: { significand: number; orderOfMagnitude: number } }[] };
      }[];
    };
    expect(activity.log.map((l) => l.message)).toContain(`request POST /report from ${device.identity}`);
    expect(activity.activities[0].triggerType).toBe('parseReport');
    expect(activity.activities[0].failed).toBe(false);
    expect(activity.activities[0].triggerData.observations[0].measurement).toMatchObject({ significand: 3060, orderOfMagnitude: -3 });

    const stored = await ctx.db.query<{ significand: number; generated_at: Date }>(
      `SELECT m.significand, m.generated_at FROM measurement m JOIN device d ON d.id = m.device_id WHERE d.hash_id = $1`,
      [device.hashId],
    );
    expect(stored.rows).toEqual([{ significand: 3060, generated_at: new Date('2026-11-01T10:00:00Z') }]);

    const got = await api.request<{ device: { lastOnlineAt: string | null } }>('GET', `/device/${device.hashId}`);
    expect(got.body.device.lastOnlineAt).not.toBeNull();
  });

  it.each(['PSK-AES128-GCM-SHA256', 'PSK-AES128-CBC-SHA256', 'PSK-AES128-CCM8:@SECLEVEL=0'])('works with %s', async (cipher) => {
    const res = await deviceRequest('/report', JSON.stringify({ t: Date.now(), v: 1 }), cipher);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).device).toBe('logger-1');
  });

  it('serves several requests on one keep-alive connection', async () => {
    const one = (v: number) => httpRequestText('POST', '/report', JSON.stringify({ t: Date.now(), v }), 'application/json', false);
    const out = await opensslPsk({
      port,
      identity: device.identity,
      keyHex: device.key,
      input: one(1) + one(2) + httpRequestText('POST', '/report', JSON.stringify({ t: Date.now(), v: 3 })),
    });
    expect(out.stdout.match(/HTTP\/1\.1 200/g)).toHaveLength(3);
  });

  it.each([
    ['/throw', 500, 'error', 'supplier bug'],
    ['/loop', 504, 'timeout', ''],
    ['/eat', 500, 'memory', ''],
  ])('a handler that fails at %s fails only that run', async (path, status, kind, message) => {
    const res = await deviceRequest(path, '{}');
    expect(res.status).toBe(status);
    expect(JSON.parse(res.body)).toMatchObject({ key: 'handler_error' });
    const rows = (await api.request<{ rows: { activity: { hashId: string; failed: boolean } }[] }>('GET', '/supplier-activity/?rowsPerPage=50&failed=true'))
      .body.rows;
    const details = await Promise.all(
      rows.map(
        async (r) =>
          (
            await api.request<{
              activity: { failed: boolean; log: { type: string; message: string }[]; triggerData: { request: { request: { url: { path: string } } } } };
            }>('GET', `/supplier-activity/${r.activity.hashId}`)
          ).body.activity,
      ),
    );
    const failed = details.find((a) => a.failed && a.triggerData.request.request.url.path === path);
    expect(failed).toBeDefined();
    const log = failed!.log;
    const error = log.find((l) => l.type === 'error');
    expect(error?.message).toContain(kind);
    expect(error?.message).toContain(message);
    // the worker keeps serving
    const after = await deviceRequest('/report', JSON.stringify({ t: Date.now(), v: 2 }));
    expect(after.status).toBe(200);
  });

  it('answers a body over DEVICE_BODY_LIMIT_BYTES with 413 naming the limit, and queues nothing', async () => {
    const before = await settledJobCount(ctx, device.hashId);
    const res = await deviceRequest('/report', JSON.stringify({ t: Date.now(), v: 1, pad: 'x'.repeat(5000) }));
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ key: 'parameter_error', message: 'body exceeds 4096 bytes' });
    expect(await settledJobCount(ctx, device.hashId)).toBe(before);
  });

  it('refuses an unknown identity and a wrong key at the handshake and queues nothing', async () => {
    const before = await settledJobCount(ctx, device.hashId);
    const unknown = await opensslPsk({ port, identity: 'nobody-here', keyHex: device.key, input: httpRequestText('POST', '/report', '{}') });
    expect(unknown.stdout).not.toContain('HTTP/1.1');
    expect(unknown.stderr).toMatch(/alert|error/i);
    const wrongKey = await opensslPsk({ port, identity: device.identity, keyHex: 'ff'.repeat(16), input: httpRequestText('POST', '/report', '{}') });
    expect(wrongKey.stdout).not.toContain('HTTP/1.1');
    expect(wrongKey.stderr).toMatch(/alert|error/i);
    expect(await settledJobCount(ctx, device.hashId)).toBe(before);
  });
});
