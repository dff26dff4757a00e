import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMachineAccount } from '../../src/accounts/store.ts';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient, pskDevice, type RestClient } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { until } from '../support/until.ts';
import { dropMailQueue, TestSmtp, type ReceivedMail } from './smtp.ts';

// Supplier alerts end to end: a subscriber of a device type whose handler throws gets one alert with the
// failure, then summaries with the count of the failures since, no sooner than the quiet interval.

const QUIET_SECONDS = 3;
const THROWING_HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  throw new Error('cannot read ' + args.event.webRequest.url.path);
}`;

const smtp = new TestSmtp();
let ctx: AppContext;
let service: RunningService;
let api: RestClient;

/** An account of the environment with an address, subscribed to the object. */
async function subscriber(objectType: string, objectHashId: string, table: string, locale: string | null = null): Promise<string> {
  const { hashId } = await createMachineAccount(ctx.db, api.environmentHashId, ['ENVIRONMENT_ADMIN'], 'supplier engineer');
  const email = `eng-${hashId}@example.com`;
  await ctx.db.query('UPDATE machine_account SET email = $2, locale = $3 WHERE hash_id = $1', [hashId, email, locale]);
  await ctx.db.query(
    `INSERT INTO supplier_subscription (hash_id, environment_id, user_id, object_type, object_id)
     SELECT $1, a.environment_id, a.id, $3, o.id FROM machine_account a, ${table} o WHERE a.hash_id = $2 AND o.hash_id = $4`,
    [`s${hashId}`, hashId, objectType, objectHashId],
  );
  return email;
}

/** The failures a mail accounts for: the first alert's count ("n failures so far", else 1) or a summary's. */
function failuresIn(mail: ReceivedMail): number {
  const summary = /^(\d+) failures? of /.exec(mail.subject);
  if (summary) return Number(summary[1]);
  return Number(/\((\d+) failures so far\)/.exec(mail.text)?.[1] ?? 1);
}

beforeAll(async () => {
  await smtp.start();
  // 500 requests on connections of their own from 127.0.0.1 within seconds: past the device port's default handshake
  // rate per address, which this test is not about
  ctx = await testContext({
    SMTP_URL: smtp.url(),
    NOTIFICATION_ALERT_QUIET_SECONDS: String(QUIET_SECONDS),
    MAIL_RETRY_BASE_MS: '100',
    MAIL_RETRY_MAX_MS: '500',
    HTTPS_HANDSHAKE_RATE_PER_ADDRESS: '100000',
    HTTPS_HANDSHAKE_BURST_PER_ADDRESS: '100000',
  });
  service = await startService(ctx, ['all']);
  api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
});

afterAll(async () => {
  await service?.stop();
  await dropMailQueue(ctx);
  await closeContext(ctx);
  await smtp.stop();
});

describe('supplier alerts', () => {
  it('give one alert with the failure, then summaries counting every later failure, for a handler that throws on 500 requests', async () => {
    const device = await pskDevice(api, THROWING_HANDLER);
    const deviceTypeHashId = (await api.request<{ device: { deviceTypeHashId: string } }>('GET', `/device/${device.hashId}`)).body.device.deviceTypeHashId;
    const engineer = await subscriber('deviceType', deviceTypeHashId, 'device_type');
    const unsubscribed = `other-${deviceTypeHashId}@example.com`;
    // a user of the environment with an address who did not subscribe (the device type's creator is subscribed on add)
    await createMachineAccount(ctx.db, api.environmentHashId, ['ENVIRONMENT_ADMIN'], 'bystander', unsubscribed);

    let sent = 0;
    const send = async () => {
      while (sent < 500) {
        const path = `/r${sent++}`;
        const res = await pskHttpRequest({ port: service.https!.port(), identity: device.identity, key: device.key, path, body: '{}' });
        expect(res?.status).toBe(500);
      }
    };
    await Promise.all(Array.from({ length: 8 }, send));

    const mails = await until(
      async () => smtp.to(engineer),
      (m) => m.reduce((n, x) => n + failuresIn(x), 0) >= 500,
      'mails accounting for 500 failures',
      60_000,
    );
    expect(mails.reduce((n, x) => n + failuresIn(x), 0)).toBe(500);
    const [alert, ...summaries] = mails;
    expect(alert.subject).toBe('The event handler of device type "provisioned" failed');
    expect(alert.text).toContain(`Device: ${device.identity} (${device.hashId})`);
    const activityHashId = /Activity: (\S+)/.exec(alert.text)?.[1];
    const activity = (
      await api.request<{ activity: { failed: boolean; log: { type: string; message: string }[] } }>('GET', `/supplier-activity/${activityHashId}`)
    ).body.activity;
    expect(activity.failed).toBe(true);
    // the error exactly as the activity log has it (with the line of the supplier's source where the sandbox names it)
    const error = activity.log
      .filter((l) => l.type === 'error')
      .map((l) => l.message)
      .join('\n');
    expect(error).toContain('cannot read /r');
    // the throw is on line 3 of the supplier's TypeScript source
    expect(error).toMatch(/\(line 3, column \d+\)/);
    expect(alert.text).toContain(error);
    expect(summaries.length).toBeGreaterThan(0);
    for (const s of summaries) expect(s.subject).toMatch(/^\d+ failures? of the event handler of device type "provisioned"$/);
    expect(summaries[0].text).toMatch(/failed \d+ times? since the last alert/);
    // far fewer mails than failures, and none to an account that did not subscribe
    expect(mails.length).toBeLessThan(20);
    expect(smtp.to(unsubscribed)).toEqual([]);
    const [{ alerts }] = (
      await ctx.db.query<{ alerts: number }>(
        'SELECT alerts_since_last_notification AS alerts FROM supplier_subscription s JOIN machine_account a ON a.id = s.user_id WHERE a.email = $1',
        [engineer],
      )
    ).rows;
    expect(alerts).toBe(0);
  }, 120_000);

  it('alert the subscribers of a report type whose parser throws, not those of the device type whose handler called it', async () => {
    const reportType = await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
      name: 'Broken parser',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser: 'function handle(args: { payload: string }, exec: Exec) {\n  return JSON.parse(args.payload).missing.value;\n}',
    });
    expect(reportType.status).toBe(200);
    const device = await pskDevice(
      api,
      `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  exec.parseReport({ reportTypeHashId: '${reportType.body.hashId}', payload: '{}' });
  return { statusCode: 200 };
}`,
    );
    const deviceTypeHashId = (await api.request<{ device: { deviceTypeHashId: string } }>('GET', `/device/${device.hashId}`)).body.device.deviceTypeHashId;
    const parserEngineer = await subscriber('supplierReportType', reportType.body.hashId, 'report_type');
    const handlerEngineer = await subscriber('deviceType', deviceTypeHashId, 'device_type');
    const dutchEngineer = await subscriber('supplierReportType', reportType.body.hashId, 'report_type', 'nl');
    const res = await pskHttpRequest({ port: service.https!.port(), identity: device.identity, key: device.key, path: '/report', body: '{}' });
    expect(res?.status).toBe(200);
    const [alert] = await until(
      async () => smtp.to(parserEngineer),
      (m) => m.length === 1,
      'the parser alert',
    );
    expect(alert.subject).toBe('The report parser of report type "Broken parser" failed');
    expect(alert.text).toContain(`Device: ${device.identity} (${device.hashId})`);
    expect(alert.text).toMatch(/error: TypeError: .*undefined/);
    // in the subscriber's own language
    const [nl] = await until(
      async () => smtp.to(dutchEngineer),
      (m) => m.length === 1,
      'the Dutch parser alert',
    );
    expect(nl.subject).toBe('De rapportparser van rapporttype "Broken parser" faalde');
    expect(nl.text).toContain(`Apparaat: ${device.identity} (${device.hashId})`);
    // the handler ran without failing: its device type's subscriber hears nothing (an alert of the same flush would be stored with the parser's)
    const stored = await ctx.db.query('SELECT 1 FROM notification WHERE $1 = ANY(recipients)', [handlerEngineer]);
    expect(stored.rows).toEqual([]);
  });
});
