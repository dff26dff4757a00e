import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Job } from 'bullmq';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { counterHashKey } from '../../src/connectivity/counters/recorder.ts';
import type { DeviceBatchJob } from '../../src/connectivity/device-jobs.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { deviceQueues } from '../support/jobs.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';

// The handler a supplier would write: pending commands go into every answer; /ack marks them sent,
// /drop drops them, /expect expects the next report within EXPECT_MS (or ?ms=); events are logged.
const HANDLER = `
const EXPECT_MS = 800;
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  const event = args.event;
  if (event.type !== 'incomingRequest') {
    exec.addLog(event.type + ' ' + ('command' in event ? event.command.hashId : '-') + ' scheduled=' + args.scheduledCommands.map((c) => c.command.hashId).join(','));
    return;
  }
  const path = event.webRequest.url.path;
  const pending = args.scheduledCommands;
  if (path === '/ack') pending.forEach((c) => exec.markCommandAsSent(c.command.hashId));
  if (path === '/drop') pending.forEach((c) => exec.dropCommand(c.command.hashId));
  if (path === '/expect') exec.expectNextReportBefore(new Date(Date.now() + Number(event.webRequest.url.query.ms ?? EXPECT_MS)));
  if (path === '/steal') exec.markCommandAsSent(String(event.webRequest.url.query.id));
  if (path === '/schedule') exec.scheduleCommand({ commandTypeHashId: String(event.webRequest.url.query.type), fields: { position: Number(event.webRequest.url.query.position) } });
  return { statusCode: 200, body: { commands: pending.map((c) => ({ id: c.command.hashId, type: c.commandType.hashId, fields: c.command.fields })) } };
}`;

interface Mail {
  to: string[];
  text: string;
}
interface ActivityDetail {
  hashId: string;
  triggerType: string;
  failed: boolean;
  log: { message: string }[];
  triggerData: Record<string, unknown>;
  activities: { triggerType: string; failed: boolean; log: { message: string }[]; triggerData: Record<string, unknown> }[];
}
interface Command {
  hashId: string;
  sentAt: string | null;
  deletedAt: string | null;
  fields: Record<string, unknown>;
}

let ctx: AppContext;
let service: RunningService;
let smtp: SMTPServer;
let api: RestClient;
let port: number;
let commandTypeHashId: string;
const mails: Mail[] = [];

async function newDevice(): Promise<{ hashId: string; identity: string; key: Buffer }> {
  const type = await api.request('POST', '/device-type/', {
    name: 'Valve',
    eventHandler: HANDLER,
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'Valve', pinFieldConfigurations: [] }],
    commandTypeHashIds: [commandTypeHashId],
  });
  expect(type.status).toBe(200);
  const identity = `valve-${randomBytes(6).toString('hex')}`;
  const key = randomBytes(16);
  const device = await api.request('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId: type.body.hashId,
    psk: key.toString('hex'),
    pskIdentity: identity,
  });
  expect(device.status).toBe(200);
  return { hashId: device.body.hashId, identity, key };
}

/** One device contact over TLS-PSK; the handler's answer. */
async function contact(
  device: { identity: string; key: Buffer },
  path: string,
): Promise<{ status: number; commands: { id: string; type: string; fields: Record<string, unknown> }[] }> {
  const res = await pskHttpRequest({ port, identity: device.identity, key: device.key, path, body: '{}' });
  if (!res) throw new Error('no answer');
  return { status: res.status, commands: (JSON.parse(res.body) as { commands: { id: string; type: string; fields: Record<string, unknown> }[] }).commands };
}

async function addCommand(deviceHashId: string, more: Record<string, unknown> = {}): Promise<Command> {
  const before = new Set((await commandsOf(deviceHashId)).map((c) => c.hashId));
  const r = await api.request('POST', '/command/', {
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

async function commandsOf(deviceHashId: string): Promise<Command[]> {
  const r = await api.request<{ rows: { command: Command }[] }>('GET', `/command/?deviceHashId=${deviceHashId}&rowsPerPage=100`);
  return r.body.rows.map((x) => x.command);
}

/** The activities of `triggerType` for the device, waiting up to `ms` until `enough` of them exist. */
async function activities(deviceHashId: string, triggerType: string, enough = 1, ms = 10_000): Promise<ActivityDetail[]> {
  const until = Date.now() + ms;
  for (;;) {
    const page = await api.request<{ rows: { activity: { hashId: string } }[] }>(
      'GET',
      `/supplier-activity/?deviceHashId=${deviceHashId}&triggerType=${triggerType}&rowsPerPage=100`,
    );
    if (page.body.rows.length >= enough || Date.now() > until) {
      return Promise.all(
        page.body.rows.map(async (r) => (await api.request<{ activity: ActivityDetail }>('GET', `/supplier-activity/${r.activity.hashId}`)).body.activity),
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The device's event jobs of `type` not run yet (delayed, waiting, active), over every shard. A delayed job promoted
 * (`job.promote()`) runs now: the test moves the queue's clock instead of waiting for it.
 */
async function queuedEvents(deviceHashId: string, type: string): Promise<Job<DeviceBatchJob>[]> {
  const queues = deviceQueues(ctx);
  try {
    const jobs = (await Promise.all(queues.map((q) => q.getJobs(['delayed', 'waiting', 'active', 'prioritized'])))).flat() as Job<DeviceBatchJob>[];
    return jobs.filter((j) => j.data.items.some(({ job }) => job.deviceHashId === deviceHashId && job.kind === 'event' && job.event.type === type));
  } finally {
    await Promise.all(queues.map((q) => q.close()));
  }
}

/** Runs the device's delayed `type` job now and resolves once it has run (its writes done: the job leaves the queue). */
async function runDelayedNow(deviceHashId: string, type: string): Promise<void> {
  const [job] = await queuedEvents(deviceHashId, type);
  await job.promote();
  await expect.poll(async () => (await queuedEvents(deviceHashId, type)).length, { timeout: 20_000, interval: 50 }).toBe(0);
}

async function counter(deviceHashId: string, key: string): Promise<number> {
  let total = 0;
  for (let i = 0; i < 30; i++) {
    const hour = new Date().toISOString().slice(0, 13);
    total = Number((await ctx.redis.hget(counterHashKey(ctx.config, deviceHashId, hour), key)) ?? 0);
    if (total > 0) return total;
    await new Promise((r) => setTimeout(r, 50));
  }
  return total;
}

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), text: Buffer.concat(chunks).toString('utf8') });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const smtpPort = (smtp.server.address() as AddressInfo).port;
  ctx = await testContext({ SMTP_URL: `smtp://127.0.0.1:${smtpPort}`, MAIL_FROM: 'gridgate <gateway@example.com>' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
  const type = await api.request('POST', '/command-type/', {
    name: 'Open valve',
    fieldConfigurations: [{ key: 'position', name: 'Position', type: 'integer' }],
  });
  expect(type.status).toBe(200);
  commandTypeHashId = type.body.hashId;
});

afterAll(async () => {
  await service?.stop();
  for (const queue of deviceQueues(ctx)) {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
  }
  await closeContext(ctx);
  await new Promise<void>((resolve) => smtp.close(() => resolve()));
});

describe('commands through the real pipeline (a PSK device over HTTPS)', () => {
  it('runs newCommand, hands the command to the device on its next contact until it is marked sent, counts and mails it', async () => {
    const device = await newDevice();
    const command = await addCommand(device.hashId, { email: ['operator@example.com', 'field@example.com'] });

    const [added] = await activities(device.hashId, 'handleNewCommand');
    expect(added.failed).toBe(false);
    expect(added.triggerData).toMatchObject({ command: { hashId: command.hashId }, commandType: { hashId: commandTypeHashId } });
    expect(added.log.map((l) => l.message)).toContain(`newCommand ${command.hashId} scheduled=${command.hashId}`);

    // the device asks: the answer carries the pending command, again and again until it is marked sent
    expect((await contact(device, '/report')).commands).toEqual([{ id: command.hashId, type: commandTypeHashId, fields: { position: 40 } }]);
    expect((await contact(device, '/ack')).commands.map((c) => c.id)).toEqual([command.hashId]);
    expect((await contact(device, '/report')).commands).toEqual([]);

    const got = await api.request<{ command: Command }>('GET', `/command/${command.hashId}`);
    expect(got.body.command.sentAt).not.toBeNull();
    const acks = await activities(device.hashId, 'handleIncomingRequest', 3);
    const marking = acks.flatMap((a) => a.activities).find((a) => a.triggerType === 'markCommandAsSent');
    expect(marking?.failed).toBe(false);
    expect(marking?.triggerData).toMatchObject({ command: { hashId: command.hashId, sentAt: expect.any(String) }, commandType: { hashId: commandTypeHashId } });
    expect(await counter(device.hashId, 'commandsSent')).toBe(1);

    for (let i = 0; i < 100 && mails.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    const mail = mails.find((m) => m.text.includes(command.hashId));
    expect(mail?.to.sort()).toEqual(['field@example.com', 'operator@example.com']);
    expect(mail?.text).toContain('From: gridgate <gateway@example.com>');
    expect(mail?.text).toContain(device.identity);
    expect(mail?.text).toContain('Open valve');
  });

  it("lets a handler mark only its own device's commands", async () => {
    const owner = await newDevice();
    const thief = await newDevice();
    const command = await addCommand(owner.hashId);
    await contact(thief, `/steal?id=${command.hashId}`);
    const [run] = await activities(thief.hashId, 'handleIncomingRequest');
    expect(run.activities).toEqual([
      expect.objectContaining({
        triggerType: 'markCommandAsSent',
        failed: true,
        log: [expect.objectContaining({ message: expect.stringContaining('not a command of this device') })],
      }),
    ]);
    expect((await contact(owner, '/report')).commands.map((c) => c.id)).toEqual([command.hashId]);
  });

  it('lets the handler schedule a command for its own device (exec.scheduleCommand), validated like command add', async () => {
    const device = await newDevice();
    await contact(device, `/schedule?type=${commandTypeHashId}&position=7`);
    const [run] = await activities(device.hashId, 'handleIncomingRequest');
    expect(run.activities[0]).toMatchObject({
      triggerType: 'scheduleCommand',
      failed: false,
      triggerData: { command: { fields: { position: 7 }, userHashId: null } },
    });
    const scheduled = (run.activities[0].triggerData as { command: Command }).command;
    const [announced] = await activities(device.hashId, 'handleNewCommand');
    expect(announced.triggerData).toMatchObject({ command: { hashId: scheduled.hashId } });
    expect((await contact(device, '/report')).commands).toEqual([{ id: scheduled.hashId, type: commandTypeHashId, fields: { position: 7 } }]);

    await contact(device, '/schedule?type=nosuchtype&position=1');
    await contact(device, `/schedule?type=${commandTypeHashId}&position=1.5`);
    const failed = (await activities(device.hashId, 'handleIncomingRequest', 5))
      .flatMap((a) => a.activities)
      .filter((a) => a.triggerType === 'scheduleCommand' && a.failed);
    const messages = failed.map((a) => a.log[0].message);
    expect(messages).toHaveLength(2);
    expect(messages).toEqual(expect.arrayContaining([expect.stringContaining('commandTypeHashId: nosuchtype'), expect.stringContaining('fields.position')]));
    expect((await commandsOf(device.hashId)).map((c) => c.hashId)).toEqual([scheduled.hashId]);
  });

  it('fires commandDue from a delayed job at add time + delay', async () => {
    const device = await newDevice();
    const command = await addCommand(device.hashId, { delay: 600 });
    // queued delayed by the command's delay (within the moment the API took to queue it), not run before
    const [job] = await queuedEvents(device.hashId, 'commandDue');
    expect(await job.getState()).toBe('delayed');
    expect(job.delay).toBeGreaterThan(599_000);
    expect(job.delay).toBeLessThanOrEqual(600_000);
    expect(await activities(device.hashId, 'handleCommandDue', 1, 0)).toEqual([]);
    await runDelayedNow(device.hashId, 'commandDue');
    const [due] = await activities(device.hashId, 'handleCommandDue');
    expect(due).toBeDefined();
    expect(due.triggerData).toMatchObject({ command: { hashId: command.hashId } });
    expect(due.log.map((l) => l.message)).toContain(`commandDue ${command.hashId} scheduled=${command.hashId}`);
  });

  it('drops a command (exec.dropCommand): it leaves scheduledCommands but is not deleted', async () => {
    const device = await newDevice();
    const command = await addCommand(device.hashId);
    expect((await contact(device, '/drop')).commands.map((c) => c.id)).toEqual([command.hashId]);
    expect((await contact(device, '/report')).commands).toEqual([]);
    expect((await api.request<{ command: Command }>('GET', `/command/${command.hashId}`)).body.command).toMatchObject({ sentAt: null, deletedAt: null });
  });

  it('deletes an unsent command (deletedCommand runs, commandDue never does) and refuses to delete one the device holds', async () => {
    const device = await newDevice();
    const unsent = await addCommand(device.hashId);
    expect(await queuedEvents(device.hashId, 'commandDue')).toHaveLength(1);
    expect((await api.request('DELETE', `/command/${unsent.hashId}`)).status).toBe(204);
    // its commandDue is taken back: no job is left that could ever run it
    expect(await queuedEvents(device.hashId, 'commandDue')).toEqual([]);
    const [deleted] = await activities(device.hashId, 'handleDeletedCommand');
    expect(deleted.triggerData).toMatchObject({ command: { hashId: unsent.hashId, deletedAt: expect.any(String) } });
    expect(deleted.log.map((l) => l.message)).toContain(`deletedCommand ${unsent.hashId} scheduled=`);
    expect((await contact(device, '/report')).commands).toEqual([]);

    const held = await addCommand(device.hashId, { delay: 0, startAt: new Date(Date.now() + 3600_000).toISOString() });
    await contact(device, '/ack');
    const refused = await api.request<{ key: string; message: string }>('DELETE', `/command/${held.hashId}`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toContain('cannot be told');
    expect(await activities(device.hashId, 'handleCommandDue', 1, 0)).toEqual([]);
  });

  it('fires reportLate when an expected report does not come, and not when it comes in time', async () => {
    const late = await newDevice();
    await contact(late, '/expect');
    const [fired] = await activities(late.hashId, 'handleReportLate');
    expect(fired).toBeDefined();
    expect(fired.log.map((l) => l.message)).toContain('reportLate - scheduled=');
    expect(await counter(late.hashId, 'reportsLate')).toBe(1);

    // in time: the report comes (and is recorded as a contact after the expectation was set) well within its hour; the
    // expectation's job then runs now, as a no-op
    const punctual = await newDevice();
    await contact(punctual, '/expect?ms=3600000');
    const expectation = (await queuedEvents(punctual.hashId, 'reportLate'))[0].data.items[0].job;
    const setAt = expectation.kind === 'event' && expectation.event.type === 'reportLate' ? expectation.event.setAt : '';
    await contact(punctual, '/report');
    await expect
      .poll(
        async () =>
          (await ctx.db.query('SELECT last_online_at > $2::timestamptz AS after FROM device WHERE hash_id = $1', [punctual.hashId, setAt])).rows[0].after,
        { timeout: 10_000, interval: 100 },
      )
      .toBe(true);
    await runDelayedNow(punctual.hashId, 'reportLate');
    expect(await activities(punctual.hashId, 'handleReportLate', 1, 0)).toEqual([]);
    // a newer expectation replaces the older one: one reportLate job, which fires once
    const renewing = await newDevice();
    await contact(renewing, '/expect?ms=3600000');
    await contact(renewing, '/expect?ms=3600000');
    expect(await queuedEvents(renewing.hashId, 'reportLate')).toHaveLength(1);
    await runDelayedNow(renewing.hashId, 'reportLate');
    expect(await activities(renewing.hashId, 'handleReportLate')).toHaveLength(1);
  });
});
