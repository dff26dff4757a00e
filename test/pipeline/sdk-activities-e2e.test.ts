// A real run (a PSK device's report through gateway, queue, worker and sandbox) read back with
// supplier activity get in the shapes the original SDK's supplier-activity models require, at
// Api-Version 5 (SDK 17.37.0) and 8 (SDK 18.3.1). The shapes are written out here; the SDK is no
// dependency. The SDK validates answers allowing unknown members: required ones are checked here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { pskHttpRequest } from '../support/psk-client.ts';

type Obj = Record<string, unknown>;
interface Api {
  request<T = Obj>(method: string, url: string, body?: unknown, version?: number): Promise<{ status: number; body: T }>;
}

const HANDLER = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  exec.addLog('run');
  exec.parseReport({ reportTypeHashId: '__REPORT_TYPE__', payload: '{"v":21}' });
  exec.setDeviceFields({ serial: 'S-1' });
  exec.expectNextReportBefore(new Date(Date.now() + 3600e3));
  exec.increaseReportingCounter();
  const [sent, dropped] = args.scheduledCommands;
  if (sent) exec.markCommandAsSent(sent.command.hashId);
  if (dropped) exec.dropCommand(dropped.command.hashId, { markAsDeleted: true });
  exec.markCommandAsSent('nosuchcommand');
  exec.scheduleCommand({ commandTypeHashId: '__COMMAND_TYPE__', fields: {}, startAt: null, endAt: null, channelIndices: null });
  exec.offerFirmware('nosuchimage');
  exec.sendRequest({ url: 'https://not-allowed.example/hook?a=1', method: 'post', headers: {}, body: { type: 'json', data: { x: 1 } } });
  return { statusCode: 200, headers: { 'x-one': 'a' }, body: { type: 'json', data: { ok: true } } };
}`;
const PARSER = `function handle(args: { payload: string }, exec: Exec) {
  return { generatedAt: new Date(), measurements: [{ channelIndex: 0, quantityHashId: '__QUANTITY__', generatedAt: new Date(), orderOfMagnitude: 0, significand: 21 }] };
}`;

// the trigger types the SDK's supplier-activity models know
const SDK_CALLS = [
  'dropCommand',
  'increaseReportingCounter',
  'markCommandAsSent',
  'parseReport',
  'scheduleCommand',
  'sendRequest',
  'setDeviceFields',
  'expectNextReportBefore',
];
const ACTIVITY_KEYS = ['createdAt', 'failed', 'hashId', 'log', 'rootActivityHashId', 'triggerData', 'triggerType'];
const keys = (o: unknown) => Object.keys(o as Obj).sort();
const WEB_REQUEST_KEYS = ['createdAt', 'hashId', 'incoming', 'request', 'response'];

let ctx: AppContext;
let service: RunningService;
let api: Api;
const device = { identity: `sdk-act-${Date.now()}`, key: Buffer.alloc(16, 7), hashId: '' };
let quantityHashId = '';
let reportTypeHashId = '';

beforeAll(async () => {
  ctx = await testContext();
  service = await startService(ctx, ['all']);
  const env = await createEnvironment(ctx.db, 'connectivity', 'sdk activities');
  const account = await createMachineAccount(ctx.db, env.hashId, ['ENVIRONMENT_ADMIN']);
  const base = `http://127.0.0.1:${service.apiPort()}`;
  const login = await fetch(`${base}/authentication/machine-login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '5' },
    body: JSON.stringify({ assertion: account.assertion }),
  });
  const { jwt } = (await login.json()) as { jwt: string };
  api = {
    async request(method, url, body, version = 5) {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: {
          'api-version': String(version),
          'environment-hash-id': `supplier:${env.hashId}`,
          authorization: `Bearer ${jwt}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
  };
  quantityHashId = (await api.request<{ hashId: string }>('POST', '/quantity/', { name: { en: 'Temperature', nl: 'Temperatuur' } }, 8)).body.hashId;
  reportTypeHashId = (
    await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
      name: 'Temperature',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser: PARSER.replace('__QUANTITY__', quantityHashId),
    })
  ).body.hashId;
  const commandType = (await api.request<{ hashId: string }>('POST', '/command-type/', { name: 'Cycle', fieldConfigurations: [] })).body.hashId;
  const type = await api.request<{ hashId: string }>('POST', '/device-type/', {
    name: 'Logger',
    eventHandler: HANDLER.replace('__REPORT_TYPE__', reportTypeHashId).replace('__COMMAND_TYPE__', commandType),
    fieldConfigurations: [{ key: 'serial', name: 'Serial', type: 'string' }],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'T', pinFieldConfigurations: [] }],
    commandTypeHashIds: [commandType],
  });
  expect(type.status).toBe(200);
  const added = await api.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: device.identity,
    deviceTypeHashId: type.body.hashId,
    psk: device.key.toString('hex'),
    pskIdentity: device.identity,
  });
  device.hashId = added.body.hashId;
  for (let i = 0; i < 2; i++) {
    expect(
      (await api.request('POST', '/command/', { objectType: 'device', objectHashIds: [device.hashId], commandTypeHashId: commandType, fields: {}, email: [] }))
        .status,
    ).toBe(204);
  }
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

async function reportAndRead(): Promise<string> {
  const res = await pskHttpRequest({ port: service.https!.port(), identity: device.identity, key: device.key, path: '/report?x=1', body: '{"t":1}' });
  expect(res?.status).toBe(200);
  const rows = (
    await api.request<{ rows: { activity: { hashId: string; triggerType: string } }[] }>(
      'GET',
      `/supplier-activity/?deviceHashId=${device.hashId}&rowsPerPage=50`,
    )
  ).body.rows;
  const run = rows.find((r) => r.activity.triggerType === 'handleIncomingRequest');
  expect(run).toBeDefined();
  return run!.activity.hashId;
}

describe("supplier activity get in the SDK's shapes", () => {
  let runHashId = '';
  beforeAll(async () => {
    runHashId = await reportAndRead();
  });

  it.each([5, 8])('at Api-Version %i: rootActivityHashId everywhere, the request as a WebRequest, each call as its model has it', async (version) => {
    const got = await api.request<{ activity: Obj & { activities: Obj[]; log: Obj[] } }>('GET', `/supplier-activity/${runHashId}`, undefined, version);
    expect(got.status).toBe(200);
    const activity = got.body.activity;
    expect(keys(activity)).toEqual([...ACTIVITY_KEYS, 'activities'].sort());
    expect(activity).toMatchObject({ hashId: runHashId, rootActivityHashId: runHashId, triggerType: 'handleIncomingRequest', failed: false });

    // triggerData: {request: WebRequest}, the method in lower case, the answer's headers as strings
    const trigger = activity.triggerData as { request: Obj & { request: Obj; response: Obj } };
    expect(keys(trigger)).toEqual(['request']);
    expect(keys(trigger.request)).toEqual(WEB_REQUEST_KEYS);
    expect(trigger.request).toMatchObject({ incoming: true, createdAt: expect.any(String), hashId: expect.any(String) });
    expect(keys(trigger.request.request)).toEqual(['body', 'certificate', 'headers', 'ip', 'method', 'pskIdentityHint', 'url']);
    expect(trigger.request.request).toMatchObject({
      url: { protocol: 'https', path: '/report', query: { x: '1' }, host: expect.any(String) },
      method: 'post',
      certificate: null,
      body: { type: 'json', data: { t: 1 } },
      pskIdentityHint: device.identity,
    });
    expect(trigger.request.response).toEqual({ statusCode: 200, headers: { 'x-one': 'a' }, body: { type: 'json', data: { ok: true } } });

    // sub-activities: only kinds the SDK knows, each with its root; offerFirmware is a line of the run's log
    const subs = activity.activities;
    for (const sub of subs) {
      expect(SDK_CALLS).toContain(sub.triggerType);
      expect(keys(sub)).toEqual(sub.triggerType === 'parseReport' ? [...ACTIVITY_KEYS, 'activities'].sort() : ACTIVITY_KEYS);
      expect(sub.rootActivityHashId).toBe(runHashId);
    }
    expect(activity.log).toContainEqual({ type: 'error', message: 'offerFirmware(nosuchimage): firmware nosuchimage does not exist in this environment' });
    const byType = (t: string) => subs.filter((s) => s.triggerType === t);

    // parseReport: the report type in full, observations with the quantity in the version's shape, no sub-activities of its own
    const [parse] = byType('parseReport');
    expect(parse.activities).toEqual([]);
    const parsed = parse.triggerData as { reportType: Obj; observations: { measurement: Obj; quantity: Obj }[] };
    expect(parsed.reportType).toEqual({
      hashId: reportTypeHashId,
      name: 'Temperature',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      deletedAt: null,
    });
    expect(parsed.observations[0].quantity).toMatchObject({
      hashId: quantityHashId,
      name: version >= 7 ? { en: 'Temperature', nl: 'Temperatuur' } : 'Temperature',
      unit: version >= 8 ? null : '-',
    });

    const [sent, failedSend] = byType('markCommandAsSent');
    expect(keys(sent.triggerData)).toEqual(['command', 'commandType']);
    // a call that failed keeps its arguments (the model's {} alternative, plus members it does not know); why is in its log
    expect(failedSend).toMatchObject({ failed: true, triggerData: { commandHashId: 'nosuchcommand' } });
    expect(failedSend.triggerData).not.toHaveProperty('command');
    expect(byType('dropCommand')[0].triggerData).toMatchObject({
      removeFromScheduledCommands: true,
      markAsDeleted: true,
      command: { deletedAt: expect.any(String) },
    });
    expect(byType('setDeviceFields')[0].triggerData).toEqual({ diff: { old: { serial: null }, new: { serial: 'S-1' } } });
    expect(keys(byType('expectNextReportBefore')[0].triggerData)).toEqual(['before']);
    expect(keys(byType('scheduleCommand')[0].triggerData)).toEqual(['command', 'commandType']);
    expect(byType('increaseReportingCounter')[0].triggerData).toEqual({});
    const send = byType('sendRequest')[0];
    expect(send).toMatchObject({
      failed: true,
      triggerData: {
        request: {
          incoming: false,
          response: null,
          request: { url: { protocol: 'https', host: 'not-allowed.example', path: '/hook', query: { a: '1' } }, method: 'post', ip: '', certificate: null },
        },
        error: expect.stringContaining('OUTBOUND_ALLOWED_HOSTS'),
      },
    });
    expect(keys((send.triggerData as { request: Obj }).request)).toEqual(WEB_REQUEST_KEYS);
  });

  it("names the handler as the author of a command it scheduled (command get's createdByUserName is a string)", async () => {
    const rows = (
      await api.request<{ rows: { command: { hashId: string; userHashId: string | null } }[] }>('GET', `/command/?deviceHashId=${device.hashId}&rowsPerPage=50`)
    ).body.rows;
    const scheduled = rows.find((r) => r.command.userHashId === null);
    expect(scheduled).toBeDefined();
    const got = await api.request<{ createdByUserName: unknown }>('GET', `/command/${scheduled!.command.hashId}`);
    expect(got.body.createdByUserName).toBe('device type event handler');
    const byAccount = rows.find((r) => r.command.userHashId !== null);
    expect((await api.request<{ createdByUserName: unknown }>('GET', `/command/${byAccount!.command.hashId}`)).body.createdByUserName).toBe('machine account');
  });

  it('shows command events with the command and its type, named at the version', async () => {
    const rows = (
      await api.request<{ rows: { activity: { hashId: string; triggerType: string } }[] }>(
        'GET',
        `/supplier-activity/?deviceHashId=${device.hashId}&rowsPerPage=50`,
      )
    ).body.rows;
    const event = rows.find((r) => r.activity.triggerType === 'handleNewCommand');
    expect(event).toBeDefined();
    const got = await api.request<{ activity: Obj }>('GET', `/supplier-activity/${event!.activity.hashId}`, undefined, 5);
    expect(got.body.activity).toMatchObject({
      rootActivityHashId: event!.activity.hashId,
      triggerData: { command: { deviceHashId: device.hashId }, commandType: { name: 'Cycle' } },
    });
  });
});
