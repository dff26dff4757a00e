import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { metricsRegistry } from '../../src/app/metrics.ts';
import { queueMails, startMailWorker, type MailWorker } from '../../src/mail/queue.ts';
import { insertNotifications, type OutgoingMail } from '../../src/mail/store.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { until } from '../support/until.ts';
import { dropMailQueue, TestSmtp } from './smtp.ts';

interface Row {
  notification: {
    hashId: string;
    kind: string;
    to: string[];
    subject: string;
    body: string;
    state: string;
    reason: string | null;
    attempts: number;
    sentAt: string | null;
  };
}

const smtp = new TestSmtp();
let ctx: AppContext;
let api: TestApi;
let admin: ApiClient;
let environmentId: number;
let worker: MailWorker | null;

async function notifications(state?: string): Promise<Row['notification'][]> {
  const r = await admin.request<{ rows: Row[] }>('GET', `/notification?rowsPerPage=100${state ? `&state=${state}` : ''}`);
  expect(r.status).toBe(200);
  return r.body.rows.map((x) => x.notification);
}

const mail = (to: string, subject: string, text = `about ${subject}`): OutgoingMail => ({
  environmentId,
  accountId: null,
  kind: 'command',
  to: [to],
  subject,
  text,
});

async function counted(state: string): Promise<number> {
  const metric = await metricsRegistry.getSingleMetric('gridgate_notifications_total')?.get();
  return metric?.values.find((v) => v.labels.state === state)?.value ?? 0;
}

beforeAll(async () => {
  await smtp.start();
  ctx = await testContext({ SMTP_URL: smtp.url(), MAIL_FROM: 'gridgate <alerts@example.com>', MAIL_RETRY_BASE_MS: '100', MAIL_RETRY_MAX_MS: '400' });
  api = await startTestApi(ctx);
  admin = await api.login('monitoring');
  const { rows } = await ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [admin.environmentHashId]);
  environmentId = rows[0].id;
  worker = startMailWorker(ctx);
});

afterAll(async () => {
  await worker?.close();
  await dropMailQueue(ctx);
  await api.close();
  await closeContext(ctx);
  await smtp.stop();
});

describe('the mail queue', () => {
  it('delivers a mail over SMTP (to, subject, body) and shows it as sent, counted on /metrics', async () => {
    const sentBefore = await counted('sent');
    const [hashId] = await queueMails(ctx, [mail('ops@example.com', 'Pump 3 — pressure critical', 'Druck 9,5 bar über 8 bar\nseit 10:00')]);
    const [received] = await until(
      async () => smtp.to('ops@example.com'),
      (m) => m.length === 1,
      'the mail at the SMTP server',
    );
    expect(received.subject).toBe('Pump 3 — pressure critical');
    expect(received.text).toBe('Druck 9,5 bar über 8 bar\nseit 10:00');
    expect(received.raw).toContain('From: gridgate <alerts@example.com>');
    const [row] = await until(
      () => notifications(),
      (rows) => rows.some((r) => r.hashId === hashId && r.state === 'sent'),
      'the notification marked sent',
    );
    expect(row).toMatchObject({
      hashId,
      kind: 'command',
      to: ['ops@example.com'],
      subject: 'Pump 3 — pressure critical',
      state: 'sent',
      reason: null,
      sentAt: expect.any(String),
    });
    expect(await counted('sent')).toBe(sentBefore + 1);
  });

  it("marks a mail to an address the server refuses (5xx) failed with the server's reply, without retrying it", async () => {
    smtp.refuse.add('gone@example.com');
    const [hashId] = await queueMails(ctx, [mail('gone@example.com', 'to nobody')]);
    const rows = await until(
      () => notifications('failed'),
      (r) => r.some((n) => n.hashId === hashId),
      'the refused mail marked failed',
    );
    const failed = rows.find((n) => n.hashId === hashId);
    expect(failed?.reason).toMatch(/550.*gone@example\.com.*mailbox unavailable/);
    expect(failed?.attempts).toBe(1);
    expect(smtp.to('gone@example.com')).toEqual([]);
  });

  it('keeps mails queued while the SMTP server is away and delivers every one once it is back on the same port', async () => {
    const port = smtp.port;
    await smtp.stop();
    const addresses = Array.from({ length: 5 }, (_, i) => `field${i}@example.com`);
    const hashIds = await queueMails(
      ctx,
      addresses.map((a) => mail(a, `outage ${a}`)),
    );
    // every mail was tried and is still queued, with the connection failure as its reason
    await until(
      () => notifications('queued'),
      (rows) => hashIds.every((h) => rows.some((r) => r.hashId === h && r.attempts >= 2)),
      'tries during the outage',
      30_000,
    );
    const waiting = (await notifications('queued')).filter((r) => hashIds.includes(r.hashId));
    expect(waiting.map((r) => r.reason)).toEqual(hashIds.map(() => expect.stringMatching(/ECONNREFUSED|connect/i)));
    await smtp.start(port);
    await until(
      async () => addresses.map((a) => smtp.to(a).length),
      (n) => n.every((x) => x === 1),
      'every mail after the outage',
      30_000,
    );
    const rows = await until(
      () => notifications('sent'),
      (r) => hashIds.every((h) => r.some((n) => n.hashId === h)),
      'every mail marked sent',
    );
    expect(rows.filter((r) => hashIds.includes(r.hashId)).map((r) => r.state)).toEqual(hashIds.map(() => 'sent'));
  });

  it('queues again, when a mail worker starts, a mail stored as queued whose job never reached Redis', async () => {
    const [hashId] = await insertNotifications(ctx.db, [mail('late@example.com', 'stored, never queued')], 'queued');
    await worker?.close();
    worker = startMailWorker(ctx);
    await until(
      async () => smtp.to('late@example.com'),
      (m) => m.length === 1,
      'the stored mail at the SMTP server',
    );
    await until(
      () => notifications('sent'),
      (r) => r.some((n) => n.hashId === hashId),
      'the stored mail marked sent',
    );
  });

  it('stores a mail as failed, and logs it, when SMTP_URL is not configured', async () => {
    const noSmtp = { ...ctx, config: { ...ctx.config, smtpUrl: null } };
    const [hashId] = await queueMails(noSmtp, [mail('ops@example.com', 'unsent')]);
    const [row] = (await notifications('failed')).filter((r) => r.hashId === hashId);
    expect(row).toMatchObject({ state: 'failed', reason: 'SMTP_URL is not configured' });
  });

  it('answers GET /notification only to the environment it belongs to, and only to its administrators', async () => {
    const other = await api.login('monitoring');
    expect((await other.request<{ rows: Row[] }>('GET', '/notification')).body.rows).toEqual([]);
    const reader = await api.login('monitoring', ['READ']);
    expect((await reader.request('GET', '/notification')).status).toBe(403);
    const bad = await admin.request<{ key: string; message: string }>('GET', '/notification?state=lost');
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('state');
  });
});
