import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMailer } from '../../src/mail/mailer.ts';
import type { DeviceBatchJob } from '../../src/connectivity/device-jobs.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addCommandType, addDeviceType, expectParameterError, field, findAll, type ErrorBody } from './fixtures.ts';

let api: TestApi;
let queue: Queue<DeviceBatchJob>;
beforeAll(async () => {
  api = await startTestApi();
  queue = new Queue(api.ctx.config.queueName, { connection: api.ctx.redis });
});
afterAll(async () => {
  await queue.obliterate({ force: true });
  await queue.close();
  await api.close();
});

interface Command {
  hashId: string;
  deviceHashId: string;
  commandTypeHashId: string;
  fields: Record<string, unknown>;
  pinGroupHashId: string | null;
  userHashId: string | null;
  startAt: string | null;
  delay: number;
  endAt: string | null;
  channelIndices: number[];
  email: string[];
  createdAt: string;
  deletedAt: string | null;
  sentAt: string | null;
}
interface Row {
  command: Command;
  commandType: { hashId: string; name: unknown };
  pinGroup: null;
}

const many = <T>(n: number, make: (i: number) => T) => Array.from({ length: n }, (_, i) => make(i));
const inOneHour = () => new Date(Date.now() + 3600_000).toISOString();

async function addDevice(c: ApiClient, deviceTypeHashId: string): Promise<string> {
  const identity = `cmd-${randomBytes(6).toString('hex')}`;
  const r = await c.request<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId,
    psk: randomBytes(16).toString('hex'),
    pskIdentity: identity,
  });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  return r.body.hashId;
}

/** An environment with a command type (overrides), a device type listing it (two channels) and `devices` devices. */
async function setup(commandType: Record<string, unknown> = {}, devices = 2) {
  const c = await api.login('connectivity');
  const commandTypeHashId = await addCommandType(c, {
    name: 'Set interval',
    fieldConfigurations: [field('interval', 'integer', { defaultValue: 60 }), field('mode', 'string', { allowNull: true, regex: '^(fast|slow)$' })],
    ...commandType,
  });
  const deviceTypeHashId = await addDeviceType(c, { commandTypeHashIds: [commandTypeHashId] });
  const deviceHashIds = [];
  for (let i = 0; i < devices; i++) deviceHashIds.push(await addDevice(c, deviceTypeHashId));
  return { c, commandTypeHashId, deviceTypeHashId, deviceHashIds };
}

const body = (objectHashIds: string[], commandTypeHashId: string, more: Record<string, unknown> = {}) => ({
  objectType: 'device',
  objectHashIds,
  commandTypeHashId,
  fields: {},
  email: [],
  ...more,
});

async function commandsOf(c: ApiClient, deviceHashId: string): Promise<Command[]> {
  return (await findAll<Row>(c, `/command/?deviceHashId=${deviceHashId}`, 50)).map((r) => r.command);
}

async function queuedEvents(commandHashId: string) {
  const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized']);
  return jobs
    .flatMap((j) => j.data.items.map((i) => ({ job: j, event: i.job.kind === 'event' ? i.job.event : null })))
    .filter((e) => e.event && 'commandHashId' in e.event && e.event.commandHashId === commandHashId);
}

describe('commands', () => {
  it('adds one command per device, finds, gets, and queues newCommand now and commandDue for startAt', async () => {
    const { c, commandTypeHashId, deviceHashIds } = await setup();
    const startAt = inOneHour();
    const add = await c.request('POST', '/command/', body(deviceHashIds, commandTypeHashId, { fields: { mode: 'fast' }, startAt, email: ['ops@example.com'] }));
    expect(add.status).toBe(204);
    expect(add.body).toBeNull();

    const rows = await findAll<Row>(c, '/command/', 1);
    expect(rows).toHaveLength(2);
    expect(rows.map((r) => r.command.deviceHashId).sort()).toEqual([...deviceHashIds].sort());
    for (const row of rows) {
      expect(row.pinGroup).toBeNull();
      expect(row.commandType).toMatchObject({ hashId: commandTypeHashId, name: 'Set interval' });
      expect(row.command).toMatchObject({
        commandTypeHashId,
        fields: { interval: 60, mode: 'fast' },
        pinGroupHashId: null,
        startAt,
        delay: 0,
        endAt: null,
        channelIndices: [],
        email: ['ops@example.com'],
        deletedAt: null,
        sentAt: null,
      });
      expect(row.command.userHashId).toMatch(/^[a-z0-9]+$/);
    }
    const one = rows[0].command;
    const get = await c.request<{ command: Command; commandType: unknown; createdByUserName: string }>('GET', `/command/${one.hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ command: one, commandType: rows[0].commandType, createdByUserName: 'machine account' });

    const events = await queuedEvents(one.hashId);
    expect(events.map((e) => e.event!.type).sort()).toEqual(['commandDue', 'newCommand']);
    const due = events.find((e) => e.event!.type === 'commandDue')!.job;
    expect(await due.getState()).toBe('delayed');
    expect(due.timestamp + (due.opts.delay ?? 0)).toBeGreaterThan(Date.parse(startAt) - 5000);
    // the job's own timestamp is taken a moment after the delay was computed
    expect(due.timestamp + (due.opts.delay ?? 0)).toBeLessThanOrEqual(Date.parse(startAt) + 1000);

    // filters: by device, and search by the device's identifier
    expect((await commandsOf(c, deviceHashIds[1])).map((x) => x.deviceHashId)).toEqual([deviceHashIds[1]]);
    const search = await c.request<{ rows: Row[] }>('GET', `/command/?search=${one.hashId}`);
    expect(search.body.rows.map((r) => r.command.hashId)).toEqual([one.hashId]);
  });

  it('takes a delay instead of startAt when start is optional; commandDue falls due at add time + delay', async () => {
    const { c, commandTypeHashId, deviceHashIds } = await setup({}, 1);
    expect((await c.request('POST', '/command/', body(deviceHashIds, commandTypeHashId, { delay: 120 }))).status).toBe(204);
    const [command] = await commandsOf(c, deviceHashIds[0]);
    expect(command).toMatchObject({ startAt: null, delay: 120 });
    const due = (await queuedEvents(command.hashId)).find((e) => e.event!.type === 'commandDue')!.job;
    expect(due.opts.delay).toBeGreaterThan(115_000);
    expect(due.opts.delay).toBeLessThanOrEqual(120_000);
  });

  it('enforces the limits, naming the field', async () => {
    const { c, commandTypeHashId, deviceHashIds } = await setup({}, 1);
    const ok = body(deviceHashIds, commandTypeHashId);
    expectParameterError(await c.request('POST', '/command/', { ...ok, objectHashIds: [] }), 'objectHashIds', '1');
    expectParameterError(await c.request('POST', '/command/', { ...ok, objectHashIds: many(41, (i) => `d${i}`) }), 'objectHashIds', '40');
    expectParameterError(await c.request('POST', '/command/', { ...ok, channelIndices: many(61, (i) => i) }), 'channelIndices', '60');
    expectParameterError(await c.request('POST', '/command/', { ...ok, email: ['not-an-address'] }), 'email');
    // the service's one address rule (src/app/email.ts): a local part over 64 characters, a domain label starting with a hyphen
    for (const address of [`${'a'.repeat(65)}@example.com`, 'ops@-example.com', 'x,<y@evil.test>']) {
      expectParameterError(await c.request('POST', '/command/', { ...ok, email: [address] }), 'email');
    }
    expectParameterError(await c.request('POST', '/command/', { ...ok, email: undefined }), 'email', 'required');
    expectParameterError(await c.request('POST', '/command/', { ...ok, fields: undefined }), 'fields', 'required');
    expectParameterError(await c.request('POST', '/command/', { ...ok, objectType: 'edge' }), 'objectType', 'device, pinGroup');
    expectParameterError(await c.request('POST', '/command/', { ...ok, delay: -1 }), 'delay');
    expectParameterError(await c.request('POST', '/command/', { ...ok, startAt: 'tomorrow' }), 'startAt');
    expectParameterError(await c.request('POST', '/command/', { ...ok, priority: 1 }), 'priority', 'not allowed');
    expectParameterError(await c.request('POST', '/command/', { ...ok, objectHashIds: [deviceHashIds[0], deviceHashIds[0]] }), 'objectHashIds', 'twice');
    expectParameterError(await c.request('DELETE', '/command/', { hashIds: many(31, (i) => `c${i}`) }), 'hashIds', '30');
    // the 40-device limit itself is allowed (unknown devices are then named)
    expectParameterError(
      await c.request('POST', '/command/', { ...ok, objectHashIds: [...deviceHashIds, ...many(39, (i) => `nosuchdevice${i}`)] }),
      'objectHashIds',
      'nosuchdevice0',
      'not a device',
    );
    expect(await commandsOf(c, deviceHashIds[0])).toEqual([]);
  });

  it('applies every rule of the command type: start, end, channelSelect, fields', async () => {
    const required = await setup({ start: 'required', end: 'required', channelSelect: 'single' }, 1);
    const r = (more: Record<string, unknown>) =>
      required.c.request(
        'POST',
        '/command/',
        body(required.deviceHashIds, required.commandTypeHashId, {
          startAt: inOneHour(),
          endAt: new Date(Date.now() + 7200_000).toISOString(),
          channelIndices: [1],
          ...more,
        }),
      );
    expectParameterError(await r({ startAt: null }), 'startAt', 'required');
    expectParameterError(await r({ delay: 10 }), 'delay', 'not allowed');
    expectParameterError(await r({ endAt: null }), 'endAt', 'required');
    expectParameterError(await r({ endAt: new Date(Date.now() + 60_000).toISOString() }), 'endAt', 'after startAt');
    expectParameterError(await r({ channelIndices: [] }), 'channelIndices', 'exactly one');
    expectParameterError(await r({ channelIndices: [0, 1] }), 'channelIndices', 'exactly one');
    expectParameterError(await r({ channelIndices: [2] }), 'channelIndices', '2', 'has 2 channels');
    expect((await r({})).status).toBe(204);

    const disabled = await setup({ start: 'disabled', channelSelect: 'multiple' }, 1);
    const d = (more: Record<string, unknown>) =>
      disabled.c.request('POST', '/command/', body(disabled.deviceHashIds, disabled.commandTypeHashId, { channelIndices: [0, 1], ...more }));
    expectParameterError(await d({ startAt: inOneHour() }), 'startAt', 'not allowed', 'disabled');
    expectParameterError(await d({ delay: 5 }), 'delay', 'not allowed');
    expectParameterError(await d({ endAt: inOneHour() }), 'endAt', 'not allowed');
    expectParameterError(await d({ channelIndices: [] }), 'channelIndices', 'one or more');
    expectParameterError(await d({ channelIndices: [1, 1] }), 'channelIndices', 'twice');
    expect((await d({})).status).toBe(204);

    const optional = await setup(
      {
        fieldConfigurations: [
          field('interval', 'integer', { allowNull: false }),
          field('mode', 'string', { valueOptions: [{ value: 'fast' }, { value: 'slow' }] }),
        ],
      },
      1,
    );
    const o = (more: Record<string, unknown>) =>
      optional.c.request('POST', '/command/', body(optional.deviceHashIds, optional.commandTypeHashId, { fields: { interval: 5 }, ...more }));
    expectParameterError(await o({ startAt: inOneHour(), delay: 5 }), 'startAt and delay');
    expectParameterError(await o({ channelIndices: [0] }), 'channelIndices', 'off');
    expectParameterError(await o({ fields: { interval: 5, colour: 'red' } }), 'fields.colour', 'not a field of the command type');
    expectParameterError(await o({ fields: { interval: 'often' } }), 'fields.interval', 'integer');
    expectParameterError(await o({ fields: {} }), 'fields.interval', 'required');
    expectParameterError(await o({ fields: { interval: 5, mode: 'medium' } }), 'fields.mode', 'valueOptions');
    expect((await o({ fields: { interval: 5, mode: 'slow' } })).status).toBe(204);

    // the regex of the first setup's configuration
    const regex = await setup({}, 1);
    expectParameterError(
      await regex.c.request('POST', '/command/', body(regex.deviceHashIds, regex.commandTypeHashId, { fields: { mode: 'medium' } })),
      'fields.mode',
      'pattern',
    );
  });

  it('refuses devices whose type does not list the command type, unknown command types, and location commands', async () => {
    const { c, commandTypeHashId, deviceHashIds } = await setup({}, 1);
    const otherType = await addDeviceType(c, { commandTypeHashIds: [] });
    const outsider = await addDevice(c, otherType);
    expectParameterError(
      await c.request('POST', '/command/', body([deviceHashIds[0], outsider], commandTypeHashId)),
      'objectHashIds',
      outsider,
      'commandTypeHashIds',
      commandTypeHashId,
    );
    expectParameterError(await c.request('POST', '/command/', body(deviceHashIds, 'nosuchcommandtype')), 'commandTypeHashId', 'nosuchcommandtype');
    expectParameterError(
      await c.request('POST', '/command/', { ...body(deviceHashIds, commandTypeHashId), objectType: 'pinGroup' }),
      'objectType pinGroup',
      'location',
    );
    // all or nothing: the valid device got no command either
    expect(await commandsOf(c, deviceHashIds[0])).toEqual([]);
  });

  it('deletes an unsent command (deletedCommand queued, commandDue taken back) and refuses one the device holds and cannot be told about in time', async () => {
    const { c, commandTypeHashId, deviceHashIds } = await setup({}, 1);
    const device = deviceHashIds[0];
    for (let i = 0; i < 5; i++) expect((await c.request('POST', '/command/', body([device], commandTypeHashId, { startAt: inOneHour() }))).status).toBe(204);
    const [unsent, sentPast, sentNoExpectation, sentLateReport, sentEarlyReport] = (await commandsOf(c, device)).sort((a, b) =>
      a.createdAt.localeCompare(b.createdAt),
    );
    const db = api.ctx.db;
    await db.query("UPDATE command SET sent_at = now() - interval '2 hours', start_at = now() - interval '1 hour' WHERE hash_id = $1", [sentPast.hashId]);
    await db.query('UPDATE command SET sent_at = now() WHERE hash_id = ANY($1)', [[sentNoExpectation.hashId, sentLateReport.hashId, sentEarlyReport.hashId]]);

    expect((await c.request('DELETE', `/command/${unsent.hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/command/${unsent.hashId}`)).status).toBe(404);
    expect((await c.request('DELETE', `/command/${unsent.hashId}`)).status).toBe(404);
    expect((await queuedEvents(unsent.hashId)).map((e) => e.event!.type).sort()).toEqual(['deletedCommand', 'newCommand']);

    const executed = await c.request<ErrorBody>('DELETE', `/command/${sentPast.hashId}`);
    expect(executed.status).toBe(409);
    expect(executed.body).toMatchObject({ key: 'conflict_error', message: expect.stringContaining('already executed') });
    const unreachable = await c.request<ErrorBody>('DELETE', `/command/${sentNoExpectation.hashId}`);
    expect(unreachable.status).toBe(409);
    expect(unreachable.body.message).toContain('cannot be told');

    // the device's next report is expected after the command starts: too late to tell it
    await db.query("UPDATE device SET next_report_before = now() + interval '2 hours' WHERE hash_id = $1", [device]);
    const multi = await c.request<{ hashId: string; deleted: boolean; failureReason?: string }[]>('DELETE', '/command/', {
      hashIds: [sentLateReport.hashId, 'nosuchcommand', unsent.hashId],
    });
    expect(multi.status).toBe(200);
    expect(multi.body.map((r) => [r.hashId, r.deleted])).toEqual([
      [sentLateReport.hashId, false],
      ['nosuchcommand', false],
      [unsent.hashId, false],
    ]);
    expect(multi.body[0].failureReason).toContain('cannot be told in time');

    // expected before the command starts: it can still be told, so it may go
    await db.query("UPDATE device SET next_report_before = now() + interval '10 minutes' WHERE hash_id = $1", [device]);
    const allowed = await c.request<{ hashId: string; deleted: boolean }[]>('DELETE', '/command/', { hashIds: [sentEarlyReport.hashId, sentPast.hashId] });
    expect(allowed.body).toEqual([
      { hashId: sentEarlyReport.hashId, deleted: true },
      { hashId: sentPast.hashId, deleted: false, failureReason: expect.stringContaining('already executed') },
    ]);
    expect((await commandsOf(c, device)).map((x) => x.hashId).sort()).toEqual([sentPast.hashId, sentNoExpectation.hashId, sentLateReport.hashId].sort());
  });

  it("keeps environments apart: B cannot see, delete or command A's commands, devices and command types", async () => {
    const a = await setup({}, 1);
    const b = await setup({}, 1);
    expect((await a.c.request('POST', '/command/', body(a.deviceHashIds, a.commandTypeHashId))).status).toBe(204);
    const [command] = await commandsOf(a.c, a.deviceHashIds[0]);
    expect((await b.c.request<ErrorBody>('GET', `/command/${command.hashId}`)).body).toMatchObject({ key: 'not_found_error' });
    expect((await b.c.request('DELETE', `/command/${command.hashId}`)).status).toBe(404);
    expect((await b.c.request('DELETE', '/command/', { hashIds: [command.hashId] })).body).toEqual([
      { hashId: command.hashId, deleted: false, failureReason: expect.stringContaining('not found') },
    ]);
    expect(await findAll<Row>(b.c, '/command/')).toEqual([]);
    expect(await findAll<Row>(b.c, `/command/?deviceHashId=${a.deviceHashIds[0]}`)).toEqual([]);
    expectParameterError(
      await b.c.request('POST', '/command/', body(a.deviceHashIds, b.commandTypeHashId)),
      'objectHashIds',
      'not a device of this environment',
    );
    expectParameterError(
      await b.c.request('POST', '/command/', body(b.deviceHashIds, a.commandTypeHashId)),
      'commandTypeHashId',
      'not a command type of this environment',
    );
    expect((await a.c.request<{ command: Command }>('GET', `/command/${command.hashId}`)).body.command.deletedAt).toBeNull();
  });

  it('logs command mail at info level when SMTP_URL is not set, rather than dropping it', async () => {
    const lines: string[] = [];
    const log = pino(
      { level: 'info' },
      {
        write: (line: string) => {
          lines.push(line);
        },
      },
    );
    const mailer = createMailer({ ...api.ctx, config: { ...api.ctx.config, smtpUrl: null, mailFrom: 'gridgate <noreply@example.com>' }, log });
    mailer.send({ to: ['ops@example.com'], subject: 'Command sent', text: 'command c1 was sent' });
    await mailer.drain();
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({
        level: 30,
        msg: expect.stringContaining('SMTP_URL'),
        mail: { from: 'gridgate <noreply@example.com>', to: ['ops@example.com'], subject: 'Command sent', text: 'command c1 was sent' },
      }),
    ]);
  });

  it('in a monitoring environment needs M-READ / M-SENSORS and shows only the commands of its claimed devices (test/monitoring/commands.test.ts)', async () => {
    const m = await api.login('monitoring', ['STATIC']);
    expect((await m.request('GET', '/command/')).status).toBe(403);
    expect((await m.request('POST', '/command/', body(['x'], 'y'))).status).toBe(403);
    const reader = await api.login('monitoring', ['READ']);
    expect((await reader.request<{ rows: unknown[] }>('GET', '/command/')).body.rows).toEqual([]);
  });
});
