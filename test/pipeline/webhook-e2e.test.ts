import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { Agent, request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { DeviceQueue } from '../../src/pipeline/queue.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';

// A LoRaWAN device reports its battery voltage (uint16 big-endian, millivolts) and temperature
// (int16 big-endian, 0.01 °C) through The Things Stack, which posts its JSON uplink message to
// our webhook URL. The sample follows TTS's documented uplink format (v3 `uplink_message`).
function ttsUplink(devEui: string, millivolts: number, centiDegrees: number, receivedAt: string, fCnt = 42) {
  const frm = Buffer.alloc(4);
  frm.writeUInt16BE(millivolts, 0);
  frm.writeInt16BE(centiDegrees, 2);
  return {
    end_device_ids: {
      device_id: `eui-${devEui.toLowerCase()}`,
      application_ids: { application_id: 'cp-monitors' },
      dev_eui: devEui,
      join_eui: '70B3D57ED0000000',
      dev_addr: '260B1234',
    },
    correlation_ids: ['as:up:01JCP8Z4B3N5ZQ9W0M7XJ3X1AB', 'gs:uplink:01JCP8Z4AYV6R4E8F2M3T5Y7ZQ'],
    received_at: receivedAt,
    uplink_message: {
      session_key_id: 'AYxKJq3vY9m0d2Wc1kQhEw==',
      f_port: 2,
      f_cnt: fCnt,
      frm_payload: frm.toString('base64'),
      decoded_payload: { battery_mv: millivolts, temperature_c: centiDegrees / 100 },
      rx_metadata: [
        {
          gateway_ids: { gateway_id: 'eui-b827ebfffe61f3c7', eui: 'B827EBFFFE61F3C7' },
          time: receivedAt,
          timestamp: 3052181436,
          rssi: -87,
          channel_rssi: -87,
          snr: 7.25,
          location: { latitude: 52.0907, longitude: 5.1214, altitude: 12, source: 'SOURCE_REGISTRY' },
          uplink_token: 'CiIKIAoUZXVpLWI4MjdlYmZmZmU2MWYzYzcSCLgn6//+YfPHELy1r6kLGgwI0',
          channel_index: 4,
          received_at: receivedAt,
        },
      ],
      settings: {
        data_rate: { lora: { bandwidth: 125000, spreading_factor: 7, coding_rate: '4/5' } },
        frequency: '867300000',
        timestamp: 3052181436,
        time: receivedAt,
      },
      received_at: receivedAt,
      consumed_airtime: '0.061696s',
      network_ids: { net_id: '000013', ns_id: 'EC656E0000000181', tenant_id: 'ttn', cluster_id: 'eu1', cluster_address: 'eu1.cloud.thethings.network' },
    },
  };
}

const IDENTIFIER = `
const DEVICE_TYPE = "__DEVICE_TYPE__";
interface TtsUplink { end_device_ids: { dev_eui: string }; uplink_message?: unknown }
function handle(args: { request: WebRequest }): { deviceTypeHashId: string; deviceIdentifier: string } {
  const body = args.request.body;
  if (body === undefined || body.type !== 'json') throw new Error('expected a JSON uplink from The Things Stack');
  const up = body.data as TtsUplink;
  if (!up.end_device_ids || typeof up.end_device_ids.dev_eui !== 'string') throw new Error('no end_device_ids.dev_eui');
  return { deviceTypeHashId: DEVICE_TYPE, deviceIdentifier: up.end_device_ids.dev_eui.toLowerCase() };
}`;

const HANDLER = `
const REPORT_TYPE = "__REPORT_TYPE__";
function handle(args: ArgumentsForIncomingRequestEvent, exec: Exec): IncomingRequestResponse;
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const request = args.event.webRequest;
  exec.addLog('webhook ' + request.method + ' ' + request.url.path);
  if (request.body === undefined || request.body.type !== 'json') return { statusCode: 400, body: { key: 'parameter_error', message: 'JSON expected' } };
  const up = request.body.data as { received_at: string; uplink_message: { f_port: number; f_cnt: number; frm_payload: string } };
  if (up.uplink_message.f_port !== 2) return { statusCode: 204 };
  const bytes = exec.base64ToUInt8Array(up.uplink_message.frm_payload);
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: exec.uInt8ArrayToHex(bytes), generatedAt: new Date(up.received_at) });
  return { statusCode: 200, body: { device: args.device.supplierDeviceIdentifier, fCnt: up.uplink_message.f_cnt, path: request.url.path, query: request.url.query } };
}`;

const PARSER = `
const VOLTAGE = "__VOLTAGE__";
const TEMPERATURE = "__TEMPERATURE__";
function handle(args: { payload: string }, exec: Exec) {
  const b = exec.hexToUInt8Array(args.payload);
  const mv = (b[0] << 8) | b[1];
  let cdeg = (b[2] << 8) | b[3];
  if (cdeg >= 0x8000) cdeg -= 0x10000;
  const at = new Date();
  return { generatedAt: at, measurements: [
    { channelIndex: 0, quantityHashId: VOLTAGE, generatedAt: at, orderOfMagnitude: -3, significand: mv },
    { channelIndex: 1, quantityHashId: TEMPERATURE, generatedAt: at, orderOfMagnitude: -2, significand: cdeg },
  ] };
}`;

let ctx: AppContext;
let service: RunningService;
let port: number;
let caFile: string;
/** device requests handed to the queue (by any listener of this process) */
const queued = vi.spyOn(DeviceQueue.prototype, 'addAndWait');
let agent: Agent;
let api: RestClient;
let deviceTypeHashId: string;
let webhookUrl: string;

/** What a TLS client (undici) gets back from a POST to `url`. */
async function post(url: string, body: string | Buffer, contentType = 'application/json') {
  const res = await undiciRequest(url, { method: 'POST', body, headers: { 'content-type': contentType }, dispatcher: agent });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

// the service listens on a port the OS chose, so the URL the API hands out (HTTPS_DEVICE_PORT=0) gets it here
const localUrl = (url: string) => `https://localhost:${port}${new URL(url).pathname}`;

async function countRows(table: 'supplier_activity' | 'device'): Promise<number> {
  const { rows } = await ctx.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${table} x JOIN environment e ON e.id = x.environment_id WHERE e.hash_id = $1`,
    [api.environmentHashId],
  );
  return rows[0].n;
}

beforeAll(async () => {
  ctx = await testContext({ DEVICE_BODY_LIMIT_BYTES: '8192', SANDBOX_TIMEOUT_MS: '300' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  // the device port's server certificate is issued by the development CA (created at start when missing)
  caFile = path.join(ctx.config.certsDir, 'ca.pem');
  agent = new Agent({ connect: { ca: readFileSync(caFile) } });

  api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
  const voltage = await api.request<{ hashId: string }>('POST', '/quantity/', { name: 'Battery voltage', unit: 'V', defaultOrderOfMagnitude: -3 });
  const temperature = await api.request<{ hashId: string }>('POST', '/quantity/', { name: 'Temperature', unit: '°C', defaultOrderOfMagnitude: -2 });
  const reportType = await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
    name: 'TTS uplink',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: PARSER.replace('__VOLTAGE__', voltage.body.hashId).replace('__TEMPERATURE__', temperature.body.hashId),
  });
  expect(reportType.status).toBe(200);
  const deviceType = await api.request<{ hashId: string }>('POST', '/device-type/', {
    name: 'LoRaWAN CP monitor',
    eventHandler: HANDLER.replace('__REPORT_TYPE__', reportType.body.hashId),
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    commandTypeHashIds: [],
    channels: [
      { name: 'Battery', pinFieldConfigurations: [] },
      { name: 'Temperature', pinFieldConfigurations: [] },
    ],
  });
  expect(deviceType.status).toBe(200);
  deviceTypeHashId = deviceType.body.hashId;
  const webhook = await api.request<{ hashId: string; url: string }>('POST', '/supplier-webhook/', {
    name: 'The Things Stack EU1',
    identifier: IDENTIFIER.replace('__DEVICE_TYPE__', deviceTypeHashId),
  });
  expect(webhook.status).toBe(200);
  webhookUrl = localUrl(webhook.body.url);
});

afterAll(async () => {
  await agent?.close();
  await service?.stop();
  await closeContext(ctx);
});

describe('a The Things Stack uplink through a supplier webhook, end to end', () => {
  it('identifies the device by dev_eui, creates it, runs the handler and parser, answers and stores the measurements', async () => {
    const receivedAt = '2026-11-01T10:00:01.123Z';
    const res = await post(webhookUrl, JSON.stringify(ttsUplink('0004A30B001C0530', 3060, -415, receivedAt)));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json).toEqual({ device: '0004a30b001c0530', fCnt: 42, path: '/', query: {} });

    const devices = await api.request<{
      rows: { device: { hashId: string; supplierDeviceIdentifier: string; deviceTypeHashId: string; lastOnlineAt: string | null } }[];
    }>('GET', '/device/');
    expect(devices.body.rows).toHaveLength(1);
    const device = devices.body.rows[0].device;
    expect(device).toMatchObject({ supplierDeviceIdentifier: '0004a30b001c0530', deviceTypeHashId });

    const activities = await api.request<{ rows: { activity: { hashId: string; triggerType: string; failed: boolean }; device: { hashId: string } }[] }>(
      'GET',
      '/supplier-activity/',
    );
    expect(activities.body.rows).toHaveLength(1);
    expect(activities.body.rows[0]).toMatchObject({ activity: { triggerType: 'handleIncomingRequest', failed: false }, device: { hashId: device.hashId } });
    const one = await api.request<{
      activity: {
        log: { message: string }[];
        activities: { triggerType: string; failed: boolean }[];
        triggerData: { request: { request: { url: { path: string }; body: { type: string } } } };
      };
    }>('GET', `/supplier-activity/${activities.body.rows[0].activity.hashId}`);
    expect(one.body.activity.log.map((l) => l.message)).toContain('webhook POST /');
    expect(one.body.activity.activities).toMatchObject([{ triggerType: 'parseReport', failed: false }]);
    expect(one.body.activity.triggerData.request).toMatchObject({ incoming: true, request: { url: { path: '/' }, body: { type: 'json' } } });

    const stored = await ctx.db.query<{ significand: number; order_of_magnitude: number; channel_index: number }>(
      `SELECT m.significand, m.order_of_magnitude, m.channel_index FROM measurement m JOIN device d ON d.id = m.device_id
        WHERE d.hash_id = $1 ORDER BY m.channel_index`,
      [device.hashId],
    );
    expect(stored.rows).toEqual([
      { significand: 3060, order_of_magnitude: -3, channel_index: 0 },
      { significand: -415, order_of_magnitude: -2, channel_index: 1 },
    ]);
    const report = await ctx.db.query<{ generated_at: Date }>(
      'SELECT r.generated_at FROM condition_report r JOIN device d ON d.id = r.device_id WHERE d.hash_id = $1',
      [device.hashId],
    );
    expect(report.rows).toEqual([{ generated_at: new Date(receivedAt) }]);

    // the next uplink of the same device finds it: still one device, two reports
    const again = await post(webhookUrl, JSON.stringify(ttsUplink('0004A30B001C0530', 3050, -400, '2026-11-01T10:10:01.000Z', 43)));
    expect(again.json).toEqual({ device: '0004a30b001c0530', fCnt: 43, path: '/', query: {} });
    expect(await countRows('device')).toBe(1);
    const reports = await ctx.db.query('SELECT 1 FROM condition_report r JOIN device d ON d.id = r.device_id WHERE d.hash_id = $1', [device.hashId]);
    expect(reports.rows).toHaveLength(2);
    // each uplink is a contact of the device
    await vi.waitFor(
      async () => {
        const counters = await api.request<{ key: string; total: number }[]>('GET', `/device/device/${device.hashId}/connectivity-counters`);
        expect(counters.body.find((c) => c.key === 'contacts')?.total).toBe(2);
      },
      { timeout: 2000, interval: 100 },
    );
  });

  it('passes the rest of the path and the query to the handler', async () => {
    const res = await post(`${webhookUrl}/v3/up?tenant=ttn&x=1&x=2`, JSON.stringify(ttsUplink('0004A30B001C0531', 3300, 2000, new Date().toISOString())));
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ device: '0004a30b001c0531', fCnt: 42, path: '/v3/up', query: { tenant: 'ttn', x: ['1', '2'] } });
  });

  it('refuses a wrong secret, an unknown webhook, a failing identifier and an oversized body with a 4xx, queueing nothing', async () => {
    // the spy sees a good uplink (vitest clears its calls between tests)
    const good = await post(webhookUrl, JSON.stringify(ttsUplink('0004A30B001C0530', 3000, 0, new Date().toISOString())));
    expect(good.status).toBe(200);
    expect(queued).toHaveBeenCalledTimes(1);
    const queuedBefore = queued.mock.calls.length;
    const devicesBefore = await countRows('device');
    const activitiesBefore = await countRows('supplier_activity');
    const [, , hashId, secret] = new URL(webhookUrl).pathname.split('/');
    expect(secret.length).toBeGreaterThanOrEqual(43);
    const uplink = JSON.stringify(ttsUplink('0004A30B001C0599', 3000, 0, new Date().toISOString()));
    const flipped = (secret[0] === 'A' ? 'B' : 'A') + secret.slice(1);

    const wrong = await post(webhookUrl.replace(secret, flipped), uplink);
    expect(wrong).toMatchObject({ status: 401, json: { key: 'authentication_error' } });
    const short = await post(webhookUrl.replace(secret, secret.slice(0, 10)), uplink);
    expect(short.status).toBe(401);
    const unknown = await post(webhookUrl.replace(hashId, 'nosuchhook'), uplink);
    expect(unknown).toMatchObject({ status: 404, json: { key: 'not_found_error' } });
    const noSecret = await post(webhookUrl.replace(`/${secret}`, ''), uplink);
    expect(noSecret.status).toBe(404);

    const throwing = await post(webhookUrl, JSON.stringify({ hello: 'not an uplink' }));
    expect(throwing.status).toBe(400);
    expect(throwing.json).toMatchObject({ key: 'identifier_error', message: expect.stringContaining('no end_device_ids.dev_eui') });
    // where in the identifier's own source it threw
    expect((throwing.json as { message: string }).message).toMatch(/\(line 8, column \d+\)$/);
    const notJson = await post(webhookUrl, 'plain text', 'text/plain');
    expect(notJson.json).toMatchObject({ key: 'identifier_error', message: expect.stringContaining('expected a JSON uplink') });

    const big = JSON.stringify({ ...ttsUplink('0004A30B001C0599', 3000, 0, new Date().toISOString()), padding: 'x'.repeat(9000) });
    const tooLarge = await post(webhookUrl, big);
    expect(tooLarge).toMatchObject({ status: 413, json: { key: 'parameter_error', message: expect.stringContaining('8192') } });
    // without a content-length (chunked), the limit is counted while reading
    async function* chunks() {
      for (let i = 0; i < 10; i++) yield Buffer.alloc(1024, 0x20);
    }
    const chunked = await undiciRequest(webhookUrl, {
      method: 'POST',
      body: Readable.from(chunks()),
      headers: { 'content-type': 'application/json' },
      dispatcher: agent,
    });
    expect(chunked.statusCode).toBe(413);
    expect(await chunked.body.json()).toMatchObject({ key: 'parameter_error' });

    // nothing reached the queue or the database
    expect(queued.mock.calls.length).toBe(queuedBefore);
    await new Promise((r) => setTimeout(r, 300));
    expect(await countRows('device')).toBe(devicesBefore);
    expect(await countRows('supplier_activity')).toBe(activitiesBefore);
  });

  it('refuses an identifier that names a device type of another environment, creating nothing', async () => {
    const other = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
    const foreignType = await other.request<{ hashId: string }>('POST', '/device-type/', {
      name: 'other',
      eventHandler: HANDLER,
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [],
      commandTypeHashIds: [],
    });
    const hook = await api.request<{ url: string }>('POST', '/supplier-webhook/', {
      name: 'misconfigured',
      identifier: IDENTIFIER.replace('__DEVICE_TYPE__', foreignType.body.hashId),
    });
    const devicesBefore = await countRows('device');
    const res = await post(localUrl(hook.body.url), JSON.stringify(ttsUplink('0004A30B001C0577', 3000, 0, new Date().toISOString())));
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ key: 'parameter_error', message: expect.stringContaining(foreignType.body.hashId) });
    expect(await countRows('device')).toBe(devicesBefore);
  });

  it('creates one device when the first uplinks of a new device arrive together', async () => {
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => post(webhookUrl, JSON.stringify(ttsUplink('0004A30B001C05BB', 3000 + i, 0, new Date().toISOString(), i)))),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const { rows } = await ctx.db.query('SELECT hash_id FROM device WHERE supplier_device_identifier = $1', ['0004a30b001c05bb']);
    expect(rows).toHaveLength(1);
  });

  it('answers an identifier that runs past the time limit with a 400, and the next request is served', async () => {
    const hook = await api.request<{ url: string }>('POST', '/supplier-webhook/', {
      name: 'loops',
      identifier: 'function handle(args: { request: WebRequest }) { while (true) {} }',
    });
    const res = await post(localUrl(hook.body.url), JSON.stringify(ttsUplink('0004A30B001C05CC', 3000, 0, new Date().toISOString())));
    expect(res).toMatchObject({ status: 400, json: { key: 'identifier_error', message: expect.stringContaining('timeout') } });
    const next = await post(webhookUrl, JSON.stringify(ttsUplink('0004A30B001C0530', 3000, 0, new Date().toISOString())));
    expect(next.status).toBe(200);
  });

  it('stops answering once the webhook is deleted', async () => {
    const hook = await api.request<{ hashId: string; url: string }>('POST', '/supplier-webhook/', {
      name: 'short-lived',
      identifier: IDENTIFIER.replace('__DEVICE_TYPE__', deviceTypeHashId),
    });
    const url = localUrl(hook.body.url);
    expect((await post(url, JSON.stringify(ttsUplink('0004A30B001C0588', 3000, 0, new Date().toISOString())))).status).toBe(200);
    expect((await api.request('DELETE', `/supplier-webhook/${hook.body.hashId}`)).status).toBe(204);
    // gateways keep a webhook for at most 2 s (src/gateway/webhook.ts)
    await vi.waitFor(
      async () => {
        expect((await post(url, JSON.stringify(ttsUplink('0004A30B001C0588', 3000, 0, new Date().toISOString())))).status).toBe(404);
      },
      { timeout: 3000, interval: 200 },
    );
  });

  it("answers curl, verifying the device port's certificate", async () => {
    const body = JSON.stringify(ttsUplink('0004A30B001C05AA', 3100, 1234, new Date().toISOString()));
    const { stdout } = await promisify(execFile)('curl', [
      '-sS',
      '--cacert',
      caFile,
      '-H',
      'content-type: application/json',
      '--data-binary',
      body,
      '-w',
      '\n%{http_code}',
      `${webhookUrl}/uplink`,
    ]);
    const [json, status] = stdout.split('\n');
    expect(status).toBe('200');
    expect(JSON.parse(json)).toEqual({ device: '0004a30b001c05aa', fCnt: 42, path: '/uplink', query: {} });
  });
});
