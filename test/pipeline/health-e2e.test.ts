import { randomBytes } from 'node:crypto';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
import { parseHttpResponse, type RawHttpResponse } from '../support/openssl.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { DtlsCoapPeer } from '../coap/support.ts';

const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as { v: number };
  if (typeof data.v !== 'number') throw new Error('no v');
  return { generatedAt: new Date(), measurements: [{ channelIndex: 0, quantityHashId: QUANTITY, generatedAt: new Date(), orderOfMagnitude: 0, significand: data.v }] };
}`;

const HANDLER = `
const REPORT_TYPE = "__REPORT_TYPE__";
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const request = args.event.webRequest;
  const body = (request.body !== undefined && request.body.type === 'json' ? request.body.data : {}) as Record<string, unknown>;
  if (request.url.path === '/throw') throw new Error('supplier bug');
  if (request.url.path === '/count-at') {
    exec.increaseReportingCounter(new Date(Date.now() + (body.offsetHours as number) * 3600 * 1000));
    return { statusCode: 204 };
  }
  if (request.url.path === '/fields') {
    exec.setDeviceFields(body);
    return { statusCode: 200, body: { fields: args.device.fields } };
  }
  exec.increaseReportingCounter();
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(body) });
  return { statusCode: 200, body: { ok: true } };
}`;

interface Entry {
  key: string;
  name: string;
  total: number;
  values: { hour: string; value: number }[];
}
interface Dev {
  hashId: string;
  identity: string;
  key: Buffer;
  typeHashId: string;
}

let ctx: AppContext;
let service: RunningService;
let api: RestClient;
let port: number;
let reportTypeHashId: string;

beforeAll(async () => {
  ctx = await testContext({ SANDBOX_TIMEOUT_MS: '500', SANDBOX_MEMORY_MB: '32' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
  const quantity = await api.request('POST', '/quantity/', { name: 'Level', unit: 'm', defaultOrderOfMagnitude: 0 });
  const reportType = await api.request('POST', '/supplier-report-type/', {
    name: 'Level report',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: `const QUANTITY = "${quantity.body.hashId}";\n${PARSER}`,
  });
  expect(reportType.status).toBe(200);
  reportTypeHashId = reportType.body.hashId;
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

/** A device type (serial is its identifier field) with one PSK device. */
async function newDevice(): Promise<Dev> {
  const type = await api.request('POST', '/device-type/', {
    name: 'Level logger',
    eventHandler: HANDLER.replace('__REPORT_TYPE__', reportTypeHashId),
    identifierFieldKey: 'serial',
    fieldConfigurations: [
      { key: 'serial', name: 'Serial', type: 'string', regex: '^S-[0-9]+$' },
      { key: 'depth', name: 'Depth', type: 'number', lowerbound: 0 },
      // no type: the SDK derives it from inputType and the valueOptions
      { key: 'active', name: 'Active', inputType: 'checkbox' },
      {
        key: 'rate',
        name: 'Rate',
        inputType: 'select',
        valueOptions: [
          { text: 'slow', value: 60 },
          { text: 'fast', value: 5 },
        ],
      },
    ],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'Level', pinFieldConfigurations: [], defaultPinName: 'L', charts: [] }],
    commandTypeHashIds: [],
  });
  expect(type.status).toBe(200);
  const identity = `health-${randomBytes(6).toString('hex')}`;
  const key = randomBytes(16);
  const device = await api.request('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId: type.body.hashId,
    psk: key.toString('hex'),
    pskIdentity: identity,
  });
  expect(device.status).toBe(200);
  return { hashId: device.body.hashId, identity, key, typeHashId: type.body.hashId };
}

const send = (d: Dev, path: string, body: unknown, key = d.key) => pskHttpRequest({ port, identity: d.identity, key, path, body: JSON.stringify(body) });

async function counters(d: Dev): Promise<Record<string, number>> {
  const r = await api.request<Entry[]>('GET', `/device/device/${d.hashId}/connectivity-counters`);
  expect(r.status).toBe(200);
  return Object.fromEntries(r.body.map((e) => [e.key, e.total]));
}

/** One TLS-PSK connection (node:tls) carrying several keep-alive requests, one at a time. */
async function keepAliveSession(d: Dev): Promise<{ request(path: string, body: unknown): Promise<RawHttpResponse>; close(): void }> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port,
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.2',
    ciphers: 'PSK-AES128-GCM-SHA256',
    checkServerIdentity: () => undefined,
    pskCallback: () => ({ psk: d.key, identity: d.identity }),
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  let raw = '';
  let waiting: (() => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    raw += chunk.toString('latin1');
    waiting?.();
  });
  return {
    async request(path, body) {
      raw = '';
      const text = JSON.stringify(body);
      socket.write(`POST ${path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
      const deadline = Date.now() + 5000;
      for (;;) {
        try {
          const res = parseHttpResponse(raw);
          if (res.body.length >= Number(res.headers['content-length'] ?? 0)) return res;
        } catch {
          // not all of it yet
        }
        if (Date.now() > deadline) throw new Error(`no complete answer: ${raw.slice(0, 200)}`);
        await new Promise<void>((resolve) => {
          waiting = resolve;
          setTimeout(resolve, 50);
        });
      }
    },
    close: () => socket.destroy(),
  };
}

/** Counters reach Redis in batches (tens of ms): poll until they show what is expected. */
async function expectCounters(d: Dev, expected: Record<string, number>): Promise<void> {
  const deadline = Date.now() + 5000;
  let got = await counters(d);
  while (Object.entries(expected).some(([k, v]) => got[k] !== v) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    got = await counters(d);
  }
  expect(got).toMatchObject(expected);
}

describe('connectivity health over the HTTPS TLS-PSK device port', () => {
  it('counts contacts, reports, reporting counter calls, handler and parse failures, and failed handshakes of a known identity', async () => {
    const d = await newDevice();
    expect((await send(d, '/report', { v: 1 }))?.status).toBe(200);
    expect((await send(d, '/report', { v: 2 }))?.status).toBe(200);
    expect((await send(d, '/report', { nope: true }))?.status).toBe(200);
    expect((await send(d, '/throw', {}))?.status).toBe(500);
    // answered by the gateway itself (never queued): still a contact
    expect((await send(d, '/report', { pad: 'x'.repeat(65_600) }))?.status).toBe(413);
    // wrong key for this identity: the handshake fails, no HTTP answer
    expect(await send(d, '/report', { v: 3 }, randomBytes(16))).toBeNull();
    // an unknown identity counts on no device
    expect(await pskHttpRequest({ port, identity: `nobody-${randomBytes(4).toString('hex')}`, key: d.key, path: '/report', body: '{}' })).toBeNull();
    await expectCounters(d, { contacts: 5, reports: 2, reportFailures: 1, reportingCounter: 3, handlerFailures: 1, handshakeFailures: 1, refusedContacts: 0 });

    // the counts are per hour, and a flush to PostgreSQL keeps them
    const r = await api.request<Entry[]>('GET', `/device/device/${d.hashId}/connectivity-counters`);
    const contacts = r.body.find((e) => e.key === 'contacts')!;
    expect(contacts.values).toEqual([{ hour: `${new Date().toISOString().slice(0, 13)}:00:00.000Z`, value: 5 }]);
  });

  it('counts a CoAP request over DTLS like an HTTPS one (the worker counts every queued contact)', async () => {
    const d = await newDevice();
    const peer = await DtlsCoapPeer.connect(service.coap!.coapsPort(), d.identity, d.key);
    try {
      peer.request({
        confirmable: true,
        code: 'POST',
        messageId: 7,
        token: Buffer.from('hc'),
        options: [
          { name: 'Uri-Path', value: Buffer.from('report') },
          { name: 'Content-Format', value: Buffer.from([50]) },
        ],
        payload: Buffer.from(JSON.stringify({ v: 7 })),
      });
      const [res] = await peer.waitFor(1);
      expect(res.code).toBe('2.05');
    } finally {
      peer.close();
    }
    await expectCounters(d, { contacts: 1, reports: 1, reportingCounter: 1 });
  });

  it('increaseReportingCounter(at) counts in the hour of at, within 48 hours back and 24 ahead; outside, that call fails visibly', async () => {
    const d = await newDevice();
    expect((await send(d, '/count-at', { offsetHours: -20 }))?.status).toBe(204);
    expect((await send(d, '/count-at', { offsetHours: -49 }))?.status).toBe(204);
    expect((await send(d, '/count-at', { offsetHours: 25 }))?.status).toBe(204);
    const from = new Date(Date.now() - 60 * 3600_000).toISOString();
    const to = new Date(Date.now() + 30 * 3600_000).toISOString();
    const deadline = Date.now() + 5000;
    let entry: Entry | undefined;
    for (;;) {
      const r = await api.request<Entry[]>('GET', `/device/device/${d.hashId}/connectivity-counters?from=${from}&to=${to}`);
      entry = r.body.find((e) => e.key === 'reportingCounter');
      if (entry?.total === 1 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const hour = new Date(Math.floor((Date.now() - 20 * 3600_000) / 3600_000) * 3600_000).toISOString();
    expect(entry?.values).toEqual([{ hour, value: 1 }]);
    const rows = (await api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}&rowsPerPage=2`)).body
      .rows;
    for (const row of rows) {
      const run = (
        await api.request<{ activity: { activities: { triggerType: string; failed: boolean; log: { message: string }[] }[] } }>(
          'GET',
          `/supplier-activity/${row.activity.hashId}`,
        )
      ).body.activity;
      expect(run.activities[0]).toMatchObject({ triggerType: 'increaseReportingCounter', failed: true });
      expect(run.activities[0].log[0].message).toContain('at most 48 hours in the past and 24 hours in the future');
    }
  });

  it('setDeviceFields is validated against the field configurations: a bad value fails that call in the activity log, not the run', async () => {
    const d = await newDevice();
    const ok = await send(d, '/fields', { serial: 'S-42', depth: 3.5, active: true, rate: 5 });
    expect(ok?.status).toBe(200);
    // the activity shows what changed, as the SDK's setDeviceFields activity does
    const latest = (await api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}&rowsPerPage=1`)).body
      .rows[0];
    const setRun = (
      await api.request<{ activity: { activities: { triggerType: string; failed: boolean; triggerData: unknown }[] } }>(
        'GET',
        `/supplier-activity/${latest.activity.hashId}`,
      )
    ).body.activity;
    expect(setRun.activities[0]).toMatchObject({
      triggerType: 'setDeviceFields',
      failed: false,
      triggerData: { diff: { old: { serial: null, depth: null, active: null, rate: null }, new: { serial: 'S-42', depth: 3.5, active: true, rate: 5 } } },
    });
    let got = await api.request<{ device: { fields: Record<string, unknown>; userFacingIdentifier: string } }>('GET', `/device/${d.hashId}`);
    expect(got.body.device.fields).toEqual({ serial: 'S-42', depth: 3.5, active: true, rate: 5 });
    // userFacingIdentifier follows the type's identifierFieldKey
    expect(got.body.device.userFacingIdentifier).toBe('S-42');

    for (const [bad, reason] of [
      [{ depth: 'deep' }, 'fields.depth must be of type number'],
      [{ depth: -1 }, 'fields.depth must be at least 0'],
      [{ serial: 'X' }, 'fields.serial does not match'],
      [{ colour: 'red' }, 'fields.colour is not a field of the device type'],
      [{ active: 'yes' }, 'fields.active must be of type boolean'],
      [{ rate: '5' }, 'fields.rate must be of type number'],
      [{ rate: 7 }, 'fields.rate must be one of the valueOptions'],
    ] as const) {
      const res = await send(d, '/fields', bad);
      expect(res?.status).toBe(200);
      const rows = (await api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}&rowsPerPage=1`)).body
        .rows;
      const run = (
        await api.request<{ activity: { failed: boolean; activities: { triggerType: string; failed: boolean; log: { type: string; message: string }[] }[] } }>(
          'GET',
          `/supplier-activity/${rows[0].activity.hashId}`,
        )
      ).body.activity;
      expect(run.failed).toBe(false);
      expect(run.activities).toHaveLength(1);
      expect(run.activities[0]).toMatchObject({ triggerType: 'setDeviceFields', failed: true });
      expect(run.activities[0].log[0].message).toContain(reason);
    }
    got = await api.request('GET', `/device/${d.hashId}`);
    expect(got.body.device.fields).toEqual({ serial: 'S-42', depth: 3.5, active: true, rate: 5 });
    // only the keys given change; null clears one
    expect((await send(d, '/fields', { depth: null }))?.status).toBe(200);
    got = await api.request('GET', `/device/${d.hashId}`);
    expect(got.body.device.fields).toEqual({ serial: 'S-42', depth: null, active: true, rate: 5 });
    // the identifier follows the field
    expect((await send(d, '/fields', { serial: 'S-43' }))?.status).toBe(200);
    got = await api.request('GET', `/device/${d.hashId}`);
    expect(got.body.device.userFacingIdentifier).toBe('S-43');
    // device update (REST) applies the same rules
    const update = await api.request<{ key: string; message: string }>('POST', `/device/${d.hashId}`, { fields: [{ key: 'active', value: 'yes' }] });
    expect(update.status).toBe(400);
    expect(update.body).toMatchObject({ key: 'parameter_error', message: expect.stringContaining('fields.active must be of type boolean') });
  });

  it('a device whose type was deleted completes the handshake and gets a clear 403 at the gateway, counted; nothing is queued', async () => {
    const d = await newDevice();
    expect((await send(d, '/report', { v: 1 }))?.status).toBe(200);
    expect((await api.request('DELETE', `/device-type/${d.typeHashId}`)).status).toBe(204);
    const activitiesBefore = (await api.request<{ rows: unknown[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}&rowsPerPage=100`)).body.rows.length;
    for (let i = 0; i < 2; i++) {
      const res = await send(d, '/report', { v: 2 });
      expect(res?.status).toBe(403);
      expect(JSON.parse(res!.body)).toEqual({ key: 'right_error', message: 'The device type of this device was deleted: the device no longer has access' });
    }
    await expectCounters(d, { contacts: 3, refusedContacts: 2, reports: 1 });
    const activitiesAfter = (await api.request<{ rows: unknown[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}&rowsPerPage=100`)).body.rows.length;
    expect(activitiesAfter).toBe(activitiesBefore);
  });

  it('a session opened before the delete is refused by the worker once its device cache expires (≤ 2 s), counted too', async () => {
    const d = await newDevice();
    const session = await keepAliveSession(d);
    try {
      expect((await session.request('/report', { v: 1 })).status).toBe(200);
      expect((await api.request('DELETE', `/device-type/${d.typeHashId}`)).status).toBe(204);
      await new Promise((r) => setTimeout(r, 2200));
      const res = await session.request('/report', { v: 2 });
      expect(res.status).toBe(403);
      expect(JSON.parse(res.body)).toMatchObject({ key: 'right_error' });
    } finally {
      session.close();
    }
    await expectCounters(d, { contacts: 2, reports: 1, refusedContacts: 1 });
  });
});
