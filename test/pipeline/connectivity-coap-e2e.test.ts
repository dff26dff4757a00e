/**
 * Issue #3's device-side behaviour with the device on CoAP over DTLS (a PSK device on node-dtls-client, libcoap for
 * a wrong key): commands and their events, command delete refusal, expectNextReportBefore/reportLate, setDeviceFields
 * validation, a deleted device type, the connectivity counters and lastOnlineAt (firmware downloads included), each
 * checked in what the device receives and in what is stored.
 */
import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import type { ParsedPacket } from 'coap-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../src/app/redis.ts';
import { decodeBlock, encodeBlock } from '../../src/coap/block.ts';
import { decodeUint, encodeUint } from '../../src/coap/message.ts';
import { commandDueJobId } from '../../src/connectivity/commands/events.ts';
import { connectivityClient } from '../support/provision.ts';
import { DtlsCoapPeer, report, run, startCoapWorld, storedAt, type CoapWorld } from '../coap/support.ts';

// What a supplier would write for a CoAP device: pending commands go into every answer; /ack marks them sent,
// /expect expects the next report within EXPECT_MS (or a body's expectMs), /fields sets device fields, /report parses
// a report and counts it with increaseReportingCounter.
const HANDLER = `
const REPORT_TYPE = "__REPORT_TYPE__";
const EXPECT_MS = 1500;
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  const event = args.event;
  if (event.type !== 'incomingRequest') {
    exec.addLog(event.type + ' ' + ('command' in event ? event.command.hashId : '-') + ' scheduled=' + args.scheduledCommands.map((c) => c.command.hashId).join(','));
    return;
  }
  const r = event.webRequest;
  const body = (r.body !== undefined && r.body.type === 'json' ? r.body.data : {}) as Record<string, unknown>;
  const pending = args.scheduledCommands;
  exec.addLog(r.url.protocol + ' ' + r.method + ' ' + r.url.path + ' ' + JSON.stringify(body));
  if (r.url.path === '/ack') pending.forEach((c) => exec.markCommandAsSent(c.command.hashId));
  if (r.url.path === '/expect') exec.expectNextReportBefore(new Date(Date.now() + (typeof body.expectMs === 'number' ? body.expectMs : EXPECT_MS)));
  if (r.url.path === '/fields') exec.setDeviceFields(body);
  if (r.url.path === '/report') {
    exec.increaseReportingCounter();
    exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(body) });
  }
  return { statusCode: 200, body: { commands: pending.map((c) => ({ id: c.command.hashId, type: c.commandType.hashId, fields: c.command.fields })), fields: args.device.fields } };
}`;

interface Dev {
  hashId: string;
  identity: string;
  key: Buffer;
  typeHashId: string;
}
interface Answer {
  commands: { id: string; type: string; fields: Record<string, unknown> }[];
  fields: Record<string, unknown>;
}
interface SubActivity {
  triggerType: string;
  failed: boolean;
  log: { message: string }[];
  triggerData: Record<string, unknown>;
}
interface ActivityDetail {
  hashId: string;
  createdAt: string;
  triggerType: string;
  failed: boolean;
  log: { message: string }[];
  triggerData: Record<string, unknown>;
  activities: SubActivity[];
}
interface Command {
  hashId: string;
  createdAt: string;
  sentAt: string | null;
  fields: Record<string, unknown>;
}
interface DeviceView {
  fields: Record<string, unknown>;
  userFacingIdentifier: string;
  lastOnlineAt: string | null;
  nextReportBefore: string | null;
}
interface CounterEntry {
  key: string;
  total: number;
  values: { hour: string; value: number }[];
}

const REFUSAL = { key: 'right_error', message: 'The device type of this device was deleted: the device no longer has access' };

let world: CoapWorld;
let queue: Queue;
let commandTypeHashId: string;

beforeAll(async () => {
  world = await startCoapWorld();
  queue = new Queue(world.ctx.config.queueName, { connection: createRedis(world.ctx.config, world.ctx.log) });
  const type = await world.api.request('POST', '/command-type/', {
    name: 'Open valve',
    fieldConfigurations: [{ key: 'position', name: 'Position', type: 'integer' }],
  });
  expect(type.status).toBe(200);
  commandTypeHashId = type.body.hashId;
});

afterAll(async () => {
  await world?.close();
  // the delayed jobs still waiting (reportLate in 10 minutes, commandDue in 10) go with the test's queue
  await queue?.obliterate({ force: true }).catch(() => undefined);
  await queue?.close();
});

/** A device type with the handler above (serial is its identifier field) and one PSK device of it. */
async function newDevice(): Promise<Dev> {
  const type = await world.api.request('POST', '/device-type/', {
    name: 'CoAP valve',
    eventHandler: HANDLER.replace('__REPORT_TYPE__', world.reportTypeHashId),
    identifierFieldKey: 'serial',
    fieldConfigurations: [
      { key: 'serial', name: 'Serial', type: 'string', regex: '^S-[0-9]+$' },
      { key: 'depth', name: 'Depth', type: 'number', lowerbound: 0 },
    ],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'Voltage', pinFieldConfigurations: [], defaultPinName: 'V', charts: [] }],
    commandTypeHashIds: [commandTypeHashId],
  });
  expect(type.status).toBe(200);
  const identity = `coapvalve-${randomBytes(5).toString('hex')}`;
  const key = randomBytes(16);
  const device = await world.api.request('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId: type.body.hashId,
    psk: key.toString('hex'),
    pskIdentity: identity,
  });
  expect(device.status).toBe(200);
  return { hashId: device.body.hashId, identity, key, typeHashId: type.body.hashId };
}

const session = (d: Dev) => DtlsCoapPeer.connect(world.coapsPort, d.identity, d.key);

let messageId = 1;

/** One CON POST of JSON to `path`, on `peer` or on a DTLS session of its own; the CoAP answer as the device gets it. */
async function contact(
  d: Dev,
  path: string,
  body: unknown = {},
  peer?: DtlsCoapPeer,
): Promise<{ code: string; format: number | null; packet: ParsedPacket; body: unknown }> {
  const own = peer ?? (await session(d));
  try {
    const packet = await own.exchange({
      code: 'POST',
      messageId: messageId++ & 0xffff,
      token: randomBytes(4),
      options: [
        { name: 'Uri-Path', value: Buffer.from(path.slice(1)) },
        { name: 'Content-Format', value: encodeUint(50) },
      ],
      payload: Buffer.from(JSON.stringify(body)),
    });
    const format = packet.options.find((o) => o.name === 'Content-Format');
    return {
      code: packet.code,
      format: format ? decodeUint(format.value) : null,
      packet,
      body: packet.payload.length > 0 ? JSON.parse(packet.payload.toString()) : null,
    };
  } finally {
    if (!peer) own.close();
  }
}

/** A contact the handler answers 2.05 with JSON: the answer's commands and the fields the run saw. */
async function answered(d: Dev, path: string, body: unknown = {}, peer?: DtlsCoapPeer): Promise<Answer> {
  const res = await contact(d, path, body, peer);
  expect(res.code).toBe('2.05');
  expect(res.format).toBe(50);
  return res.body as Answer;
}

async function commandsOf(deviceHashId: string): Promise<Command[]> {
  const list = await world.api.request<{ rows: { command: Command }[] }>('GET', `/command/?deviceHashId=${deviceHashId}&rowsPerPage=100`);
  expect(list.status).toBe(200);
  return list.body.rows.map((r) => r.command);
}

/** Adds one command for the device over the REST API (default: 10 minutes' delay) and returns it as stored. */
async function addCommand(deviceHashId: string, more: Record<string, unknown> = {}): Promise<Command> {
  const before = new Set((await commandsOf(deviceHashId)).map((c) => c.hashId));
  const r = await world.api.request('POST', '/command/', {
    objectType: 'device',
    objectHashIds: [deviceHashId],
    commandTypeHashId,
    fields: { position: 40 },
    email: [],
    delay: 600,
    ...more,
  });
  expect(r.status).toBe(204);
  const added = (await commandsOf(deviceHashId)).filter((c) => !before.has(c.hashId));
  expect(added).toHaveLength(1);
  return added[0];
}

const deleteCommand = (hashId: string) => world.api.request<{ key: string; message: string }>('DELETE', `/command/${hashId}`);

/** The device's activities of `triggerType` (newest first), waiting up to `ms` until at least `enough` exist. */
async function activities(deviceHashId: string, triggerType: string, enough = 1, ms = 10_000): Promise<ActivityDetail[]> {
  const until = Date.now() + ms;
  for (;;) {
    const page = await world.api.request<{ rows: { activity: { hashId: string } }[] }>(
      'GET',
      `/supplier-activity/?deviceHashId=${deviceHashId}&triggerType=${triggerType}&rowsPerPage=100`,
    );
    expect(page.status).toBe(200);
    if (page.body.rows.length >= enough || Date.now() > until) {
      return Promise.all(
        page.body.rows.map(
          async (r) => (await world.api.request<{ activity: ActivityDetail }>('GET', `/supplier-activity/${r.activity.hashId}`)).body.activity,
        ),
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The run of an incoming request whose log line contains `text` (activities reach PostgreSQL just after the answer). */
async function runLogging(d: Dev, text: string): Promise<ActivityDetail> {
  const until = Date.now() + 10_000;
  for (;;) {
    const found = (await activities(d.hashId, 'handleIncomingRequest', 1, 0)).filter((a) => a.log.some((l) => l.message.includes(text)));
    if (found.length > 0 || Date.now() > until) {
      expect(found).toHaveLength(1);
      return found[0];
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function device(d: Dev): Promise<DeviceView> {
  const r = await world.api.request<{ device: DeviceView }>('GET', `/device/${d.hashId}`);
  expect(r.status).toBe(200);
  return r.body.device;
}

/** The device as the REST API shows it, polled (up to 5 s) until `ready` holds. */
async function pollDevice(d: Dev, ready: (v: DeviceView) => boolean): Promise<DeviceView> {
  const until = Date.now() + 5000;
  for (;;) {
    const view = await device(d);
    if (ready(view) || Date.now() > until) return view;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The device's counters from the REST route, polled until they show `expected` (they reach Redis in batches of tens of ms). */
async function expectCounters(d: Dev, expected: Record<string, number>): Promise<CounterEntry[]> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const r = await world.api.request<CounterEntry[]>('GET', `/device/device/${d.hashId}/connectivity-counters`);
    expect(r.status).toBe(200);
    const got = Object.fromEntries(r.body.map((e) => [e.key, e.total]));
    if (Object.entries(expected).every(([k, v]) => got[k] === v) || Date.now() > deadline) {
      expect(got).toMatchObject(expected);
      return r.body;
    }
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe('issue #3 with the device on CoAP over DTLS (PSK)', () => {
  it('commands: newCommand runs; CoAP answers carry the command until the handler marks it sent; sentAt and commandsSent are set; commandDue fires from its delayed job', async () => {
    const d = await newDevice();
    const command = await addCommand(d.hashId, { delay: 2 });
    expect(command.sentAt).toBeNull();
    expect(await (await queue.getJob(commandDueJobId(command.hashId)))?.getState()).toBe('delayed');

    const [added] = await activities(d.hashId, 'handleNewCommand');
    expect(added.failed).toBe(false);
    expect(added.triggerData).toMatchObject({ command: { hashId: command.hashId }, commandType: { hashId: commandTypeHashId } });
    expect(added.log.map((l) => l.message)).toEqual([`newCommand ${command.hashId} scheduled=${command.hashId}`]);

    const expected = [{ id: command.hashId, type: commandTypeHashId, fields: { position: 40 } }];
    const peer = await session(d);
    try {
      // every contact carries the pending command, on one session and on a new one, until the handler marks it sent
      expect((await answered(d, '/status', {}, peer)).commands).toEqual(expected);
      expect((await answered(d, '/status')).commands).toEqual(expected);
      expect((await contact(d, '/ack', {}, peer)).body).toMatchObject({ commands: expected });
      expect((await answered(d, '/status', {}, peer)).commands).toEqual([]);
    } finally {
      peer.close();
    }
    expect((await answered(d, '/status')).commands).toEqual([]);

    const got = await world.api.request<{ command: Command }>('GET', `/command/${command.hashId}`);
    expect(got.body.command.sentAt).not.toBeNull();
    const other = await connectivityClient(world.ctx.db, `http://127.0.0.1:${world.service.apiPort()}`);
    expect((await other.request('GET', `/command/${command.hashId}`)).status).toBe(404);
    expect((await other.request<{ rows: unknown[] }>('GET', `/command/?deviceHashId=${d.hashId}`)).body.rows).toEqual([]);
    const ack = await runLogging(d, 'coaps POST /ack');
    expect(ack.activities).toEqual([
      expect.objectContaining({
        triggerType: 'markCommandAsSent',
        failed: false,
        triggerData: expect.objectContaining({ command: expect.objectContaining({ hashId: command.hashId, sentAt: got.body.command.sentAt }) }),
      }),
    ]);
    await expectCounters(d, { commandsSent: 1, contacts: 5 });

    const [due] = await activities(d.hashId, 'handleCommandDue');
    expect(due.failed).toBe(false);
    expect(due.triggerData).toMatchObject({ command: { hashId: command.hashId } });
    expect(due.log[0].message).toMatch(new RegExp(`^commandDue ${command.hashId} scheduled=`));
    // a delayed job: it ran no earlier than the command's creation + delay (both times from PostgreSQL)
    expect(Date.parse(due.createdAt) - Date.parse(command.createdAt)).toBeGreaterThanOrEqual(2000);
    expect(await activities(d.hashId, 'handleCommandDue', 2, 0)).toHaveLength(1);
  });

  it('a device back after a while gets its many pending commands in one answer too large for a datagram: Block2 blocks, the handler run once, each command sent once', async () => {
    const d = await newDevice();
    const added: Command[] = [];
    for (let i = 0; i < 20; i++) added.push(await addCommand(d.hashId, { fields: { position: i } }));
    expect(await activities(d.hashId, 'handleNewCommand', 20)).toHaveLength(20);
    const peer = await session(d);
    try {
      const token = Buffer.from('many');
      const options = [
        { name: 'Uri-Path' as const, value: Buffer.from('ack') },
        { name: 'Content-Format' as const, value: encodeUint(50) },
      ];
      const first = await peer.exchange({ code: 'POST', messageId: 1, token, options, payload: Buffer.from('{}') });
      expect(first.code).toBe('2.05');
      let block = decodeBlock(first.options.find((o) => o.name === 'Block2')!.value)!;
      expect(block).toMatchObject({ num: 0, more: true });
      const etag = first.options.find((o) => o.name === 'ETag')!.value;
      const parts = [first.payload];
      // the next blocks: the same request with Block2 num > 0 (RFC 7959 §2.4), answered from the answer the endpoint keeps
      for (let num = 1; block.more; num++) {
        const next = await peer.exchange({
          code: 'POST',
          messageId: 1 + num,
          token,
          options: [...options, { name: 'Block2', value: encodeBlock({ num, more: false, szx: block.szx }) }],
        });
        expect(next.code).toBe('2.05');
        expect(next.options.find((o) => o.name === 'ETag')!.value).toEqual(etag);
        block = decodeBlock(next.options.find((o) => o.name === 'Block2')!.value)!;
        expect(block.num).toBe(num);
        parts.push(next.payload);
      }
      expect(parts.length).toBeGreaterThan(1);
      const answer = JSON.parse(Buffer.concat(parts).toString()) as Answer;
      expect(answer.commands).toEqual(added.map((c, i) => ({ id: c.hashId, type: commandTypeHashId, fields: { position: i } })));
    } finally {
      peer.close();
    }
    expect((await commandsOf(d.hashId)).every((c) => c.sentAt !== null)).toBe(true);
    await expectCounters(d, { commandsSent: 20, contacts: 1 });
    expect(await activities(d.hashId, 'handleIncomingRequest', 1, 0)).toHaveLength(1);
    expect((await answered(d, '/status')).commands).toEqual([]);
  });

  it('command delete follows what the CoAP device holds: refused once it has executed it or cannot be told in time, allowed while its next report comes first; deletedCommand runs', async () => {
    const d = await newDevice();
    const startAt = new Date(Date.now() + 3600_000).toISOString();
    const later = await addCommand(d.hashId, { delay: undefined, startAt });
    const soon = await addCommand(d.hashId, { delay: 1 });
    expect((await answered(d, '/ack')).commands.map((c) => c.id).sort()).toEqual([later.hashId, soon.hashId].sort());
    expect((await commandsOf(d.hashId)).every((c) => c.sentAt !== null)).toBe(true);

    // the device reports when it likes (no expectation): it cannot be told before startAt
    let refused = await deleteCommand(later.hashId);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ key: 'conflict_error', message: expect.stringContaining('not expected to report before it executes it') });
    // sentAt + 1 s passes: the device has executed the other one (each refused delete leaves the command alone)
    const until = Date.now() + 10_000;
    for (;;) {
      refused = await deleteCommand(soon.hashId);
      if (refused.status !== 409 || refused.body.message.includes('already executed') || Date.now() > until) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(refused.status).toBe(409);
    expect(refused.body.message).toBe(`command ${soon.hashId} was sent to the device, which has already executed it`);

    // its next report is expected after startAt: still too late
    await answered(d, '/expect', { expectMs: 2 * 3600_000 });
    expect(Date.parse((await device(d)).nextReportBefore!)).toBeGreaterThan(Date.parse(startAt));
    refused = await deleteCommand(later.hashId);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toContain('it cannot be told in time to ignore it');

    // expected in 10 minutes, before startAt: the handler can tell the device on that report
    await answered(d, '/expect', { expectMs: 600_000 });
    expect((await deleteCommand(later.hashId)).status).toBe(204);
    const [deleted] = await activities(d.hashId, 'handleDeletedCommand');
    expect(deleted.failed).toBe(false);
    expect(deleted.triggerData).toMatchObject({ command: { hashId: later.hashId, deletedAt: expect.any(String) } });
    expect(deleted.log.map((l) => l.message)).toEqual([`deletedCommand ${later.hashId} scheduled=`]);
    // its commandDue was taken back; the executed one's stays done
    expect(await queue.getJob(commandDueJobId(later.hashId))).toBeUndefined();
    expect((await commandsOf(d.hashId)).map((c) => c.hashId)).toEqual([soon.hashId]);
  });

  it('expectNextReportBefore over CoAP: reportLate runs from a delayed job and counts when no report comes; a report in time prevents it', async () => {
    const late = await newDevice();
    const punctual = await newDevice();
    const peer = await session(punctual);
    try {
      await answered(late, '/expect');
      await answered(punctual, '/expect', {}, peer);
      // the punctual device reports at once, well within the 1.5 s it announced
      const r = report(4);
      await answered(punctual, '/report', JSON.parse(r.body), peer);
      expect(await storedAt(world, r.t, punctual.hashId)).toEqual([4000]);
    } finally {
      peer.close();
    }
    // the expectation is stored and waits as a delayed job, one per device (the report does not take it back: it runs as a no-op)
    for (const d of [late, punctual]) {
      const view = await device(d);
      expect(view.nextReportBefore).not.toBeNull();
      expect(view.lastOnlineAt).not.toBeNull();
      const jobId = await queue.getDeduplicationJobId(`reportLate-${d.hashId}`);
      expect(jobId).not.toBeNull();
      expect(await (await queue.getJob(jobId!))?.getState()).toBe('delayed');
    }

    const [fired] = await activities(late.hashId, 'handleReportLate');
    expect(fired.failed).toBe(false);
    expect(fired.log.map((l) => l.message)).toEqual(['reportLate - scheduled=']);
    await expectCounters(late, { reportsLate: 1, contacts: 1 });

    // the punctual device's job has run (its deduplication key goes with it), as a no-op
    const until = Date.now() + 10_000;
    while ((await queue.getDeduplicationJobId(`reportLate-${punctual.hashId}`)) && Date.now() < until) await new Promise((res) => setTimeout(res, 100));
    expect(await queue.getDeduplicationJobId(`reportLate-${punctual.hashId}`)).toBeNull();
    expect(await activities(punctual.hashId, 'handleReportLate', 1, 0)).toEqual([]);
    await expectCounters(punctual, { reportsLate: 0, contacts: 2, reports: 1 });
  });

  it('a firmware download over CoAP is a contact: it moves lastOnlineAt, and a device downloading within its expectation is not late', async () => {
    const d = await newDevice();
    const image = randomBytes(300);
    const added = await world.api.request<{ hashId: string }>('POST', '/firmware/', {
      deviceTypeHashId: d.typeHashId,
      version: 'during-expectation',
      data: image.toString('base64'),
    });
    expect(added.status).toBe(200);
    const peer = await session(d);
    let announcedAt: number;
    try {
      await answered(d, '/expect', {}, peer);
      announcedAt = Date.parse((await pollDevice(d, (v) => v.lastOnlineAt !== null)).lastOnlineAt!);
      await new Promise((r) => setTimeout(r, 50)); // the download is a later contact than the announcement, in ms
      // the device downloads (64-byte blocks) instead of reporting
      const blocks: Buffer[] = [];
      for (let num = 0; ; num++) {
        const block = await peer.exchange({
          code: 'GET',
          messageId: 100 + num,
          token: Buffer.from([num]),
          options: [
            { name: 'Uri-Path', value: Buffer.from('firmware') },
            { name: 'Uri-Path', value: Buffer.from(added.body.hashId) },
            { name: 'Block2', value: encodeUint(num * 16 + 2) },
          ],
        });
        expect(block.code).toBe('2.05');
        blocks.push(block.payload);
        if ((decodeUint(block.options.find((o) => o.name === 'Block2')!.value) & 8) === 0) break;
      }
      expect(Buffer.concat(blocks).equals(image)).toBe(true);
    } finally {
      peer.close();
    }
    const moved = await pollDevice(d, (v) => Date.parse(v.lastOnlineAt!) > announcedAt);
    expect(Date.parse(moved.lastOnlineAt!)).toBeGreaterThan(announcedAt);

    const until = Date.now() + 10_000;
    while ((await queue.getDeduplicationJobId(`reportLate-${d.hashId}`)) && Date.now() < until) await new Promise((res) => setTimeout(res, 100));
    expect(await queue.getDeduplicationJobId(`reportLate-${d.hashId}`)).toBeNull();
    expect(await activities(d.hashId, 'handleReportLate', 1, 0)).toEqual([]);
    await expectCounters(d, { reportsLate: 0, contacts: 2 });
  });

  it('setDeviceFields from a CoAP-triggered run is validated: a bad value fails that call visibly in the activity, the run and the answer go on', async () => {
    const d = await newDevice();
    // the run sees the device's fields as stored (none set yet)
    const unset = (await device(d)).fields;
    expect((await answered(d, '/fields', { serial: 'S-42', depth: 3.5 })).fields).toEqual(unset);
    const ok = await runLogging(d, '"serial":"S-42"');
    expect(ok.activities).toEqual([
      expect.objectContaining({
        triggerType: 'setDeviceFields',
        failed: false,
        triggerData: { diff: { old: { serial: null, depth: null }, new: { serial: 'S-42', depth: 3.5 } } },
      }),
    ]);
    expect(await device(d)).toMatchObject({ fields: { serial: 'S-42', depth: 3.5 }, userFacingIdentifier: 'S-42' });

    for (const [bad, reason] of [
      [{ depth: -1 }, 'fields.depth must be at least 0'],
      [{ depth: 'deep' }, 'fields.depth must be of type number'],
      [{ serial: 'X-1' }, 'fields.serial does not match'],
      [{ colour: 'red' }, 'fields.colour is not a field of the device type'],
    ] as const) {
      // the device still gets its answer, and the run sees the fields as they were
      expect((await answered(d, '/fields', bad)).fields).toEqual({ serial: 'S-42', depth: 3.5 });
      const run = await runLogging(d, JSON.stringify(bad));
      expect(run.failed).toBe(false);
      expect(run.activities).toHaveLength(1);
      expect(run.activities[0]).toMatchObject({ triggerType: 'setDeviceFields', failed: true });
      expect(run.activities[0].log[0].message).toContain(reason);
    }
    expect(await device(d)).toMatchObject({ fields: { serial: 'S-42', depth: 3.5 }, userFacingIdentifier: 'S-42' });
    await expectCounters(d, { contacts: 5, handlerFailures: 0 });
  });

  it('a deleted device type: a new DTLS session still shakes hands and each request gets 4.03 with the reason; a session from before is refused by the worker; counted, nothing run', async () => {
    const d = await newDevice();
    const before = await session(d);
    try {
      await answered(d, '/report', JSON.parse(report(1).body), before);
      expect((await world.api.request('DELETE', `/device-type/${d.typeHashId}`)).status).toBe(204);

      const after = await session(d);
      try {
        for (let i = 0; i < 2; i++) {
          const refused = await contact(d, '/report', JSON.parse(report(2).body), after);
          expect(refused).toMatchObject({ code: '4.03', format: 50, body: REFUSAL });
          expect(refused.packet.ack).toBe(true);
        }
      } finally {
        after.close();
      }
      // the session opened before the delete knew the device as usable; the worker's device cache forgets it within 2 s
      await new Promise((r) => setTimeout(r, 2200));
      expect(await contact(d, '/report', JSON.parse(report(3).body), before)).toMatchObject({ code: '4.03', body: { key: 'right_error' } });
    } finally {
      before.close();
    }
    await expectCounters(d, { contacts: 4, refusedContacts: 3, reports: 1 });
    const runs = await world.api.request<{ rows: unknown[] }>('GET', `/supplier-activity/?deviceHashId=${d.hashId}&rowsPerPage=100`);
    expect(runs.body.rows).toHaveLength(1);
  });

  it('connectivity counters of a CoAP device (contacts, reports, report failures, reporting counter, handshake failures) per key and hour, only for its own environment', async () => {
    const d = await newDevice();
    const startHour = new Date().toISOString().slice(0, 13);
    const reports = [report(1.5), report(2.5)];
    const peer = await session(d);
    try {
      for (const r of reports) await answered(d, '/report', JSON.parse(r.body), peer);
      await answered(d, '/status', {}, peer);
    } finally {
      peer.close();
    }
    await answered(d, '/report', { v: 'not a number' });
    // libcoap with a wrong key for the device's identity: the handshake fails, counted on the device
    const wrong = await run('coap-client-openssl', [
      '-B',
      '3',
      '-u',
      d.identity,
      '-k',
      'not-the-right-key',
      '-m',
      'post',
      '-e',
      '{}',
      `coaps://127.0.0.1:${world.coapsPort}/report`,
    ]);
    expect(wrong.stdout).not.toContain('commands');
    expect(await storedAt(world, reports[0].t, d.hashId)).toEqual([1500]);
    expect(await storedAt(world, reports[1].t, d.hashId)).toEqual([2500]);

    const entries = await expectCounters(d, {
      contacts: 4,
      reports: 2,
      reportFailures: 1,
      reportingCounter: 3,
      handshakeFailures: 1,
      refusedContacts: 0,
      handlerFailures: 0,
      commandsSent: 0,
    });
    const endHour = new Date().toISOString().slice(0, 13);
    const contacts = entries.find((e) => e.key === 'contacts')!;
    expect(contacts.values.reduce((sum, v) => sum + v.value, 0)).toBe(4);
    for (const v of contacts.values) expect([`${startHour}:00:00.000Z`, `${endHour}:00:00.000Z`]).toContain(v.hour);

    // a window before the device existed holds nothing
    const from = new Date(Date.now() - 48 * 3600_000).toISOString();
    const to = new Date(Date.now() - 24 * 3600_000).toISOString();
    const earlier = await world.api.request<CounterEntry[]>('GET', `/device/device/${d.hashId}/connectivity-counters?from=${from}&to=${to}`);
    expect(earlier.status).toBe(200);
    expect(earlier.body.find((e) => e.key === 'contacts')).toMatchObject({ total: 0, values: [] });

    const other = await connectivityClient(world.ctx.db, `http://127.0.0.1:${world.service.apiPort()}`);
    expect((await other.request('GET', `/device/device/${d.hashId}/connectivity-counters`)).status).toBe(404);
  });

  it('contacts the CoAP gateway answers itself count like those it queues: a firmware download, a revalidation, a body over the limit', async () => {
    const d = await newDevice();
    const image = randomBytes(100);
    const added = await world.api.request<{ hashId: string; sha256: string }>('POST', '/firmware/', {
      deviceTypeHashId: d.typeHashId,
      version: 'counted-1',
      data: image.toString('base64'),
    });
    expect(added.status).toBe(200);
    const firmwarePath = [
      { name: 'Uri-Path' as const, value: Buffer.from('firmware') },
      { name: 'Uri-Path' as const, value: Buffer.from(added.body.hashId) },
    ];
    const peer = await session(d);
    try {
      const whole = await peer.exchange({ code: 'GET', messageId: 1, token: Buffer.from('fw1'), options: firmwarePath });
      expect(whole.code).toBe('2.05');
      expect(whole.payload.equals(image)).toBe(true);
      const etag = Buffer.from(added.body.sha256, 'hex').subarray(0, 8);
      expect(
        (await peer.exchange({ code: 'GET', messageId: 2, token: Buffer.from('fw2'), options: [...firmwarePath, { name: 'ETag', value: etag }] })).code,
      ).toBe('2.03');
      // DEVICE_BODY_LIMIT_BYTES is 4096 in this world: the fifth 1 KiB Block1 block is refused by the exchange layer
      let answer: ParsedPacket | undefined;
      for (let num = 0; num < 5; num++) {
        answer = await peer.exchange({
          code: 'POST',
          messageId: 10 + num,
          token: Buffer.from('up'),
          options: [
            { name: 'Uri-Path', value: Buffer.from('report') },
            { name: 'Content-Format', value: encodeUint(50) },
            { name: 'Block1', value: encodeUint(num * 16 + 8 + 6) },
          ],
          payload: Buffer.alloc(1024, 0x20),
        });
        if (answer.code !== '2.31') break;
      }
      expect(answer?.code).toBe('4.13');
    } finally {
      peer.close();
    }
    await expectCounters(d, { contacts: 3, reports: 0, refusedContacts: 0 });
    expect(await activities(d.hashId, 'handleIncomingRequest', 1, 0)).toEqual([]);
  });
});
