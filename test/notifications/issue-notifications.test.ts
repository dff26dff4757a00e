import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMachineAccount } from '../../src/accounts/store.ts';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { linkedDevice, ok, type LinkedDevice } from '../monitoring/linked-device.ts';
import { environmentClient } from '../support/provision.ts';
import { until } from '../support/until.ts';
import { dropMailQueue, TestSmtp } from './smtp.ts';

// Issue notifications end to end: a linked device's values cross a pin's thresholds, the issue opens, and the
// accounts whose notificationLevel covers it are subscribed and mailed through a real SMTP server.

const RIGHTS = ['READ', 'STATIC', 'SENSORS', 'THRESHOLDS', 'ISSUES', 'ENVIRONMENT_ADMIN'];
const DIGEST_SECONDS = 2;
const pair = (significand: number) => ({ orderOfMagnitude: 0, significand });
const LIMITS = { criticallyLow: pair(10), low: pair(20), high: pair(80), criticallyHigh: pair(90) };

const smtp = new TestSmtp();
let ctx: AppContext;
let service: RunningService;
let serial = 0;

/** An account of the environment with an address; `level` 'default' leaves its settings unset (0). */
async function person(environmentHashId: string, level: 0 | 1 | 2 | null | 'default', reader: { locale?: string; timezone?: string } = {}): Promise<string> {
  const { hashId } = await createMachineAccount(ctx.db, environmentHashId, ['READ'], `person ${++serial}`);
  const email = `p${serial}-${hashId}@example.com`;
  await ctx.db.query('UPDATE machine_account SET email = $2, locale = $3, timezone = $4 WHERE hash_id = $1', [
    hashId,
    email,
    reader.locale ?? null,
    reader.timezone ?? null,
  ]);
  if (level !== 'default') {
    await ctx.db.query(
      `INSERT INTO user_environment_settings (account_id, environment_id, notification_level)
       SELECT a.id, a.environment_id, $2 FROM machine_account a WHERE a.hash_id = $1`,
      [hashId, level],
    );
  }
  return email;
}

async function criticalIssue(d: LinkedDevice, value = 95): Promise<{ hashId: string; at: number }> {
  ok(await d.customer.request('POST', '/measurement-threshold/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: LIMITS }));
  await d.reportUntilOnPin(50);
  const at = await d.report(value);
  const rows = await until(
    async () =>
      ok(
        await d.customer.request<{ rows: { issue: { hashId: string; level: number; closedAt: string | null } }[] }>(
          'GET',
          `/issue/?pinGroupHashId=${d.pinGroupHashId}`,
        ),
      ).rows,
    (r) => r.some((i) => i.issue.level === 2 && i.issue.closedAt === null),
    'a critical issue',
  );
  return { hashId: rows.find((i) => i.issue.level === 2)!.issue.hashId, at };
}

beforeAll(async () => {
  await smtp.start();
  ctx = await testContext({ SMTP_URL: smtp.url(), NOTIFICATION_DIGEST_SECONDS: String(DIGEST_SECONDS), MAIL_RETRY_BASE_MS: '100', MAIL_RETRY_MAX_MS: '500' });
  service = await startService(ctx, ['all']);
});

afterAll(async () => {
  await service?.stop();
  await dropMailQueue(ctx);
  await closeContext(ctx);
  await smtp.stop();
});

describe('issue notifications', () => {
  it("mail a critical threshold issue to accounts with notificationLevel 0 and 2, not to one with null, in each reader's locale and time zone", async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const all = await person(d.customer.environmentHashId, 0, { locale: 'de-DE', timezone: 'Europe/Amsterdam' });
    const byDefault = await person(d.customer.environmentHashId, 'default');
    const critical = await person(d.customer.environmentHashId, 2);
    const none = await person(d.customer.environmentHashId, null);
    const dutch = await person(d.customer.environmentHashId, 0, { locale: 'nl-NL', timezone: 'Europe/Amsterdam' });
    const { hashId, at } = await criticalIssue(d, 1234);
    const [mail] = await until(
      async () => smtp.to(all),
      (m) => m.length === 1,
      "the level 0 account's mail",
    );
    await until(
      async () => [smtp.to(byDefault), smtp.to(critical)],
      (m) => m.every((x) => x.length === 1),
      'the mails of the default and level 2 accounts',
    );

    expect(mail.subject).toMatch(/^New critical issue: Voltage critically high on Pipe/);
    expect(mail.text).toContain(`Issue ${hashId}`);
    expect(mail.text).toContain('Where: pin group Post 1, pin Pipe');
    expect(mail.text).toContain('last value 1.234 V, beyond the critically high limit of 90 V');
    const since = new Intl.DateTimeFormat('de-DE', { dateStyle: 'medium', timeStyle: 'long', timeZone: 'Europe/Amsterdam' }).format(new Date(at));
    expect(mail.text).toContain(`Since: ${since}`);
    expect(smtp.to(critical)[0].text).toContain('last value 1,234 V');
    // a Dutch reader reads Dutch words, not only Dutch numbers and dates
    const [nl] = await until(
      async () => smtp.to(dutch),
      (m) => m.length === 1,
      "the Dutch reader's mail",
    );
    expect(nl.subject).toMatch(/^Nieuwe melding \(kritiek\): Voltage critically high on Pipe/);
    expect(nl.text).toContain(`Melding ${hashId}`);
    expect(nl.text).toContain('Waar: pingroep Post 1, pin Pipe');
    expect(nl.text).toContain('laatste waarde 1.234 V, voorbij de kritiek hoge grens van 90 V');
    const sinds = new Intl.DateTimeFormat('nl-NL', { dateStyle: 'medium', timeStyle: 'long', timeZone: 'Europe/Amsterdam' }).format(new Date(at));
    expect(nl.text).toContain(`Sinds: ${sinds}`);
    // the subscriptions show in issue get's answer of each account's own view: the store has them
    const { rows } = await ctx.db.query<{ email: string }>(
      'SELECT a.email FROM issue_subscription s JOIN issue i ON i.id = s.issue_id JOIN machine_account a ON a.id = s.account_id WHERE i.hash_id = $1 AND a.email IS NOT NULL',
      [hashId],
    );
    expect(rows.map((r) => r.email).sort()).toEqual([all, byDefault, critical, dutch].sort());
    // every account's mails were made in the same scan: the null account's would have come with them
    expect(smtp.to(none)).toEqual([]);
  });

  it("do not subscribe an account whose level is above the issue's, and do when the issue rises to it", async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const critical = await person(d.customer.environmentHashId, 2);
    const all = await person(d.customer.environmentHashId, 0);
    ok(await d.customer.request('POST', '/measurement-threshold/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: LIMITS }));
    await d.reportUntilOnPin(50);
    await d.report(85);
    await until(
      async () => smtp.to(all),
      (m) => m.length === 1,
      "the serious issue's mail",
    );
    expect(smtp.to(all)[0].subject).toMatch(/^New serious issue/);
    expect(smtp.to(critical)).toEqual([]);
    await d.report(99);
    const [raised] = await until(
      async () => smtp.to(critical),
      (m) => m.length === 1,
      'the mail of the issue raised to critical',
    );
    expect(raised.subject).toMatch(/^Issue now critical/);
  });

  it('mail a comment and the close to the subscribers, not the comment to its own author', async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const reader = await person(d.customer.environmentHashId, 0);
    const { hashId } = await criticalIssue(d);
    await until(
      async () => smtp.to(reader),
      (m) => m.length === 1,
      'the opening mail',
    );
    // the commenting account (subscribed at the opening, level 0 by default) gets an address now
    const author = `author-${hashId}@example.com`;
    await ctx.db.query(`UPDATE machine_account SET email = $2 WHERE email IS NULL AND environment_id = (SELECT environment_id FROM issue WHERE hash_id = $1)`, [
      hashId,
      author,
    ]);
    ok(await d.customer.request('POST', `/issue/${hashId}/comment`, { comment: 'Crew sent to Post 1' }));
    ok(await d.customer.request('POST', `/issue/${hashId}/comment`, { comment: 'Valve replaced', closeIssue: true }));
    // within the digest window after the opening mail: both come at its end, in one mail or two
    const mails = await until(
      async () => smtp.to(reader).slice(1),
      (m) =>
        m
          .map((x) => x.text)
          .join('\n')
          .includes('Issue closed'),
      'the comment and close mails',
      30_000,
    );
    const text = mails.map((m) => m.text).join('\n');
    expect(text).toMatch(/commented on: Voltage critically high/);
    expect(text).toContain('Crew sent to Post 1');
    expect(text).toContain('Valve replaced');
    expect(text).toContain('Closed: ');
    const own = await until(
      async () => smtp.to(author),
      (m) => m.some((x) => x.text.includes('Issue closed')),
      'the close mail of the author',
    );
    expect(own.map((m) => m.text).join('\n')).not.toContain('Crew sent to Post 1');
  });

  it("follow the grid's level over the account's own for issues on the grid's pin groups", async () => {
    const customer = await environmentClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`, 'monitoring', 'grids', RIGHTS);
    const viaGrid = await person(customer.environmentHashId, null);
    const mutedByGrid = await person(customer.environmentHashId, 0);
    const elsewhere = await person(customer.environmentHashId, null);
    const pinGroupHashId = ok(
      await customer.request<{ hashId: string }>('POST', '/graph/pin-group', { symbolKey: 'post', geometry: null, fields: { id: 'Gridded' } }),
    ).hashId;
    const grid = ok(
      await customer.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'Route north' }, pinGroupHashIds: [pinGroupHashId] }),
    ).hashId;
    for (const [email, level] of [
      [viaGrid, 1],
      [mutedByGrid, null],
    ] as const) {
      await ctx.db.query(
        `INSERT INTO grid_notification (grid_id, account_id, level) SELECT g.id, a.id, $3 FROM grid g, machine_account a WHERE g.hash_id = $1 AND a.email = $2`,
        [grid, email, level],
      );
    }
    ok(await customer.request('POST', '/issue/', { pinGroupHashId, title: 'Fence broken', level: 1, comment: 'seen on the round' }));
    const [mail] = await until(
      async () => smtp.to(viaGrid),
      (m) => m.length === 1,
      'the mail of the account subscribed through the grid',
    );
    expect(mail.subject).toBe('New serious issue: Fence broken');
    expect(smtp.to(mutedByGrid)).toEqual([]);
    expect(smtp.to(elsewhere)).toEqual([]);
  });

  it('gather many issues at once into a digest instead of a mail each', async () => {
    const customer = await environmentClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`, 'monitoring', 'many', RIGHTS);
    const reader = await person(customer.environmentHashId, 0);
    const pinGroupHashId = ok(
      await customer.request<{ hashId: string }>('POST', '/graph/pin-group', { symbolKey: 'post', geometry: null, fields: { id: 'Station' } }),
    ).hashId;
    const titles = Array.from({ length: 40 }, (_, i) => `Leak ${i + 1} at the station`);
    await Promise.all(titles.map((title) => customer.request('POST', '/issue/', { pinGroupHashId, title, level: 1, comment: 'found on the round' }).then(ok)));
    const mails = await until(
      async () => smtp.to(reader),
      (m) => titles.every((t) => m.some((x) => x.text.includes(`: ${t}\n`))),
      'every issue in the mails',
      30_000,
    );
    // one mail at once, then at most one digest per window while the issues kept coming
    expect(mails.length).toBeLessThan(10);
    expect(mails.some((m) => /^\d+ issue notifications$/.test(m.subject))).toBe(true);
  });

  it('reach their subscribers after an SMTP outage during which the issues opened', async () => {
    const customer = await environmentClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`, 'monitoring', 'outage', RIGHTS);
    const reader = await person(customer.environmentHashId, 0);
    const pinGroupHashId = ok(
      await customer.request<{ hashId: string }>('POST', '/graph/pin-group', { symbolKey: 'post', geometry: null, fields: { id: 'Remote' } }),
    ).hashId;
    const port = smtp.port;
    await smtp.stop();
    try {
      ok(await customer.request('POST', '/issue/', { pinGroupHashId, title: 'Gate open during the outage', level: 2, comment: 'camera' }));
      const queued = () =>
        ctx.db.query<{ attempts: number; state: string }>(
          'SELECT n.attempts, n.state FROM notification n JOIN machine_account a ON a.id = n.account_id WHERE a.email = $1',
          [reader],
        );
      await until(
        async () => (await queued()).rows,
        (r) => r.length === 1 && r[0].state === 'queued' && r[0].attempts >= 3,
        'tries while SMTP is away',
        30_000,
      );
    } finally {
      await smtp.start(port);
    }
    const [mail] = await until(
      async () => smtp.to(reader),
      (m) => m.length === 1,
      'the mail after the outage',
      30_000,
    );
    expect(mail.subject).toBe('New critical issue: Gate open during the outage');
  });
});
