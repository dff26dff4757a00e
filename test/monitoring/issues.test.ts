import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { expectParameterError, type ErrorBody } from '../connectivity/fixtures.ts';
import { until } from '../support/until.ts';
import { linkedDevice, ok } from './linked-device.ts';

// Issues from the outside: add, find, get, update, delete, comments, subscriptions, limits and
// tenants over real HTTP; and a linked device that falls silent raises its connectivity issue.

let ctx: AppContext;
let service: RunningService;
const RIGHTS = ['READ', 'STATIC', 'SENSORS', 'THRESHOLDS', 'ISSUES', 'ENVIRONMENT_ADMIN'];
const CHECK_MS = 300;

beforeAll(async () => {
  ctx = await testContext({ CONNECTIVITY_CHECK_MS: String(CHECK_MS) });
  service = await startService(ctx, ['all']);
});
afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

interface Issue {
  hashId: string;
  title: string;
  level: number;
  closedAt: string | null;
  userHashId: string | null;
  assignedUserHashId: string | null;
  pinGroupHashId: string;
}
interface IssueGet {
  issue: Issue;
  userName: string | null;
  pins: { hashId: string }[];
  pinGroup: { hashId: string; level: number };
  automation: unknown;
  labels: unknown[];
  comments: { comment: { hashId: string; comment: string; userHashId: string | null }; userName: string | null }[];
  subscribed: boolean;
  links: { pinGroup: { hashId: string }; pin: { hashId: string } | null }[];
  trigger: unknown;
}
interface Row {
  issue: Issue;
  pinGroup: { hashId: string; level: number };
  subscribed: boolean;
  userName: string | null;
}

describe('issue CRUD and comments', () => {
  let d: Awaited<ReturnType<typeof linkedDevice>>;
  beforeAll(async () => {
    d = await linkedDevice(ctx, service, RIGHTS);
  });
  /** A new issue on the device's pin group and pin, as the customer; its hashId. */
  const addIssue = async (body: Record<string, unknown> = {}) =>
    ok(
      await d.customer.request<{ hashId: string; mentionedUsers: unknown[] }>('POST', '/issue/', {
        pinGroupHashId: d.pinGroupHashId,
        pinHashIds: [d.pinHashId],
        title: 'Pole leans',
        level: 1,
        comment: 'Seen on the way',
        automation: null,
        ...body,
      }),
    );
  const getIssue = async (hashId: string) => ok(await d.customer.request<IssueGet>('GET', `/issue/${hashId}`));

  it('add answers the hashId; get shows the issue, its pins, pin group, first comment and the author subscribed', async () => {
    const added = await addIssue();
    expect(added.mentionedUsers).toEqual([]);
    const got = await getIssue(added.hashId);
    expect(got.issue).toMatchObject({
      hashId: added.hashId,
      title: 'Pole leans',
      level: 1,
      closedAt: null,
      pinGroupHashId: d.pinGroupHashId,
      assignedUserHashId: null,
    });
    expect(got.issue.userHashId).toMatch(/^[a-z0-9]+$/);
    expect(got).toMatchObject({
      pins: [{ hashId: d.pinHashId }],
      automation: null,
      labels: [],
      subscribed: true,
      trigger: null,
      pinGroup: { hashId: d.pinGroupHashId },
    });
    expect(got.comments.map((x) => [x.comment.comment, x.comment.userHashId])).toEqual([['Seen on the way', got.issue.userHashId]]);
    expect(got.links).toEqual([{ pinGroup: expect.objectContaining({ hashId: d.pinGroupHashId }), pin: expect.objectContaining({ hashId: d.pinHashId }) }]);
  });

  it('find sorts, pages, filters by pin group and searches; the deprecated links form files an issue on every pin', async () => {
    // an environment of its own: find sees every issue of it
    const own = await linkedDevice(ctx, service, RIGHTS);
    const c = own.customer;
    const added = ok(
      await c.request<{ hashId: string }>('POST', '/issue/', {
        pinGroupHashId: own.pinGroupHashId,
        pinHashIds: [own.pinHashId],
        title: 'Pole leans',
        level: 1,
        comment: '',
      }),
    );
    const viaLinks = ok(
      await c.request<{ hashId: string }>('POST', '/issue/', {
        links: [{ pinGroupHashId: own.pinGroupHashId, pinHashId: null }],
        title: 'Graffiti',
        level: 0,
        comment: '',
      }),
    );
    const rows = ok(await c.request<{ rows: Row[]; nextPageOffset: string | null }>('GET', '/issue/?sortBy=level&descending=true'));
    expect(rows.rows.map((r) => [r.issue.hashId, r.issue.level, r.subscribed])).toEqual([
      [added.hashId, 1, true],
      [viaLinks.hashId, 0, true],
    ]);
    const paged = ok(await c.request<{ rows: Row[]; nextPageOffset: string | null }>('GET', '/issue/?rowsPerPage=1'));
    expect(paged.rows).toHaveLength(1);
    const second = ok(await c.request<{ rows: Row[]; nextPageOffset: string | null }>('GET', `/issue/?rowsPerPage=1&offset=${paged.nextPageOffset}`));
    expect(new Set([paged.rows[0].issue.hashId, second.rows[0].issue.hashId]).size).toBe(2);
    expect(ok(await c.request<{ rows: Row[] }>('GET', '/issue/?pinGroupHashId=nosuchgroup')).rows).toEqual([]);
    expect(ok(await c.request<{ rows: Row[] }>('GET', '/issue/?search=graffiti')).rows.map((r) => r.issue.hashId)).toEqual([viaLinks.hashId]);
  });

  it("update changes level and title, then closes; the pin group's level follows its open issues", async () => {
    const own = await linkedDevice(ctx, service, RIGHTS);
    const c = own.customer;
    const added = ok(
      await c.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: own.pinGroupHashId, title: 'Pole leans', level: 1, comment: '' }),
    );
    expect((await c.request('POST', `/issue/${added.hashId}`, { level: 2, title: 'Pole fell' })).status).toBe(204);
    expect(ok(await c.request<{ pinGroup: { level: number } }>('GET', `/graph/pin-group/${own.pinGroupHashId}`)).pinGroup.level).toBe(2);
    expect((await c.request('POST', `/issue/${added.hashId}`, { closed: true })).status).toBe(204);
    expect(ok(await c.request<IssueGet>('GET', `/issue/${added.hashId}`)).issue).toMatchObject({ title: 'Pole fell', level: 2, closedAt: expect.any(String) });
    expect(ok(await c.request<{ pinGroup: { level: number } }>('GET', `/graph/pin-group/${own.pinGroupHashId}`)).pinGroup.level).toBe(0);
  });

  it('comments: one added with closeIssue closes the issue; it can be changed and deleted, once', async () => {
    const c = d.customer;
    const issue = await addIssue({ comment: '' });
    const commented = ok(
      await c.request<{ newComments: { comment: { hashId: string; comment: string }; userName: string | null }[]; mentionedUsers: unknown[] }>(
        'POST',
        `/issue/${issue.hashId}/comment`,
        { comment: 'Cleaned', closeIssue: true },
      ),
    );
    expect(commented.newComments.map((x) => x.comment.comment)).toEqual(['Cleaned']);
    expect((await getIssue(issue.hashId)).issue.closedAt).not.toBeNull();
    const commentHashId = commented.newComments[0].comment.hashId;
    const changed = ok(
      await c.request<{ comment: { comment: string }; mentionedUsers: unknown[] }[]>('POST', `/issue-comment/${commentHashId}`, { comment: 'Cleaned twice' }),
    );
    expect(changed.map((x) => x.comment.comment)).toEqual(['Cleaned twice']);
    expect((await c.request('DELETE', `/issue-comment/${commentHashId}`)).status).toBe(204);
    expect((await getIssue(issue.hashId)).comments).toEqual([]);
    expect((await c.request('DELETE', `/issue-comment/${commentHashId}`)).status).toBe(404);
  });

  it('a subscription to an issue is turned off and on again', async () => {
    const issue = await addIssue();
    expect((await d.customer.request('POST', `/issue/${issue.hashId}/notifications`, { subscribed: false })).status).toBe(204);
    expect((await getIssue(issue.hashId)).subscribed).toBe(false);
    expect((await d.customer.request('POST', `/issue/${issue.hashId}/notifications`, { subscribed: true })).status).toBe(204);
    expect((await getIssue(issue.hashId)).subscribed).toBe(true);
  });

  it('the grid notification level: pin-group-grid get answers it (default 0), set and cleared; a level past 2 is a parameter_error', async () => {
    const c = d.customer;
    const grid = ok(
      await c.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'grid' }, pinGroupHashIds: [d.pinGroupHashId] }),
    ).hashId;
    expect(ok(await c.request<{ notificationLevel: number | null }>('GET', `/graph/pin-group-grid/${grid}`)).notificationLevel).toBe(0);
    expect((await c.request('POST', `/graph/grid/${grid}/notification`, { level: 2 })).status).toBe(204);
    expect(ok(await c.request<{ notificationLevel: number | null }>('GET', `/graph/pin-group-grid/${grid}`)).notificationLevel).toBe(2);
    expect((await c.request('POST', `/graph/grid/${grid}/notification`, { level: null })).status).toBe(204);
    expect(ok(await c.request<{ notificationLevel: number | null }>('GET', `/graph/pin-group-grid/${grid}`)).notificationLevel).toBeNull();
    expectParameterError(await c.request('POST', `/graph/grid/${grid}/notification`, { level: 3 }), 'level');
    expect((await c.request('POST', '/graph/grid/nosuchgrid/notification', { level: 1 })).status).toBe(404);
  });

  it('every limit of add, comment and update is a parameter_error naming the field', async () => {
    const c = d.customer;
    const issue = await addIssue();
    const add = (body: Record<string, unknown>) =>
      c.request('POST', '/issue/', { pinGroupHashId: d.pinGroupHashId, title: 't', level: 0, comment: '', ...body });
    expectParameterError(await add({ title: 'x'.repeat(101) }), 'title', '100');
    expectParameterError(await add({ comment: 'x'.repeat(65537) }), 'comment', '65536');
    expectParameterError(await add({ level: 3 }), 'level');
    expectParameterError(await add({ pinHashIds: ['nosuchpin'] }), 'pinHashIds[0]');
    expectParameterError(await add({ pinGroupHashId: 'nosuchgroup' }), 'pinGroupHashId');
    expectParameterError(await add({ labelHashIds: ['somelabel'] }), 'labelHashIds[0]');
    expectParameterError(await add({ labelHashIds: Array.from({ length: 11 }, (_, i) => `l${i}`) }), 'labelHashIds', '10');
    expectParameterError(await add({ automation: { type: 'thresholds', quantityHashIds: [] } }), 'automation');
    expectParameterError(await add({ automation: { type: 'thresholds', quantityHashIds: ['nosuchquantity'] } }), 'automation.quantityHashIds[0]');
    expectParameterError(await add({ assignedUserHashId: 'nosuchuser' }), 'assignedUserHashId');
    expectParameterError(await add({ links: Array.from({ length: 21 }, () => ({ pinGroupHashId: d.pinGroupHashId, pinHashId: null })) }), 'links', '20');
    expectParameterError(await c.request('POST', `/issue/${issue.hashId}/comment`, { comment: 'x'.repeat(65537) }), 'comment', '65536');
    expectParameterError(await c.request('POST', `/issue/${issue.hashId}`, { title: '' }), 'title');
  });

  it("an issue with the SDK's thresholds automation on the supplier's quantity answers it with the quantity", async () => {
    const auto = await addIssue({
      title: 'watch',
      level: 0,
      comment: '',
      pinHashIds: undefined,
      automation: { type: 'thresholds', quantityHashIds: [d.quantityHashId] },
    });
    expect((await getIssue(auto.hashId)).automation).toEqual({ type: 'thresholds', quantities: [expect.objectContaining({ hashId: d.quantityHashId })] });
  });

  it('delete: the issue is gone (404), and a second delete is 404', async () => {
    const issue = await addIssue();
    expect((await d.customer.request('DELETE', `/issue/${issue.hashId}`)).status).toBe(204);
    expect((await d.customer.request('GET', `/issue/${issue.hashId}`)).status).toBe(404);
    expect((await d.customer.request('DELETE', `/issue/${issue.hashId}`)).status).toBe(404);
  });

  it('isolates tenants: another environment neither sees nor touches the issue or its comments, nor files one on a foreign pin group', async () => {
    const a = await linkedDevice(ctx, service, RIGHTS);
    const b = await linkedDevice(ctx, service, RIGHTS);
    const issue = ok(
      await a.customer.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: a.pinGroupHashId, title: 'mine', level: 1, comment: 'hello' }),
    );
    const comment = ok(await a.customer.request<IssueGet>('GET', `/issue/${issue.hashId}`)).comments[0].comment.hashId;
    const grid = ok(
      await a.customer.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'grid' }, pinGroupHashIds: [a.pinGroupHashId] }),
    ).hashId;
    expect(ok(await b.customer.request<{ rows: Row[] }>('GET', '/issue/')).rows).toEqual([]);
    for (const [method, url, body] of [
      ['GET', `/issue/${issue.hashId}`, undefined],
      ['POST', `/issue/${issue.hashId}`, { closed: true }],
      ['DELETE', `/issue/${issue.hashId}`, undefined],
      ['POST', `/issue/${issue.hashId}/comment`, { comment: 'x' }],
      ['POST', `/issue/${issue.hashId}/notifications`, { subscribed: true }],
      ['POST', `/issue-comment/${comment}`, { comment: 'x' }],
      ['DELETE', `/issue-comment/${comment}`, undefined],
      ['POST', `/graph/grid/${grid}/notification`, { level: 1 }],
    ] as const) {
      expect((await b.customer.request<ErrorBody>(method, url, body)).status, `${method} ${url}`).toBe(404);
    }
    expectParameterError(
      await b.customer.request('POST', '/issue/', { pinGroupHashId: a.pinGroupHashId, title: 't', level: 0, comment: '' }),
      'pinGroupHashId',
    );
    expect(ok(await a.customer.request<IssueGet>('GET', `/issue/${issue.hashId}`)).issue.closedAt).toBeNull();
  });
});

describe('issue find rows', () => {
  it('carry the deprecated links (SDK releases before Api-Version 8 require them): one per pin, or one without a pin for an issue on every pin', async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const c = d.customer;
    const onPin = ok(
      await c.request<{ hashId: string }>('POST', '/issue/', {
        pinGroupHashId: d.pinGroupHashId,
        pinHashIds: [d.pinHashId],
        title: 'on pin',
        level: 0,
        comment: '',
      }),
    ).hashId;
    const onAll = ok(
      await c.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: d.pinGroupHashId, title: 'on all', level: 0, comment: '' }),
    ).hashId;
    const rows = ok(await c.request<{ rows: (Row & { links: IssueGet['links'] })[] }>('GET', '/issue/')).rows;
    const linksOf = (hashId: string) => rows.find((r) => r.issue.hashId === hashId)!.links;
    expect(linksOf(onPin)).toEqual([
      {
        pinGroup: expect.objectContaining({ hashId: d.pinGroupHashId }),
        pin: expect.objectContaining({ hashId: d.pinHashId, pinGroupHashId: d.pinGroupHashId }),
      },
    ]);
    expect(linksOf(onAll)).toEqual([{ pinGroup: expect.objectContaining({ hashId: d.pinGroupHashId }), pin: null }]);
  });
});

describe('connectivity thresholds and issues', () => {
  it('set and find, with limits; a silent linked device opens its issue within the threshold plus the check interval; it closes when allowed and the device reports', async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const c = d.customer;
    await d.reportUntilOnPin(1);
    expect(
      (await c.request('POST', '/connectivity-threshold/?priorityLevel=2', { connectivityThreshold: { missedReports: 0, offlineForSeconds: 2 } })).status,
    ).toBe(204);
    expect(
      (
        await c.request('POST', `/connectivity-threshold/?priorityLevel=1&deviceTypeHashId=${d.deviceTypeHashId}`, {
          connectivityThreshold: { missedReports: 3, offlineForSeconds: 3600 },
        })
      ).status,
    ).toBe(204);
    const found = ok(
      await c.request<{ rows: { connectivityThreshold: Record<string, unknown>; deviceType?: { hashId: string } }[] }>(
        'GET',
        '/connectivity-threshold/find?sortBy=priorityLevel&descending=false',
      ),
    );
    expect(found.rows).toEqual([
      {
        connectivityThreshold: { deviceTypeHashId: d.deviceTypeHashId, priorityLevel: 1, missedReports: 3, offlineForSeconds: 3600 },
        deviceType: expect.objectContaining({ hashId: d.deviceTypeHashId }),
      },
      { connectivityThreshold: { priorityLevel: 2, missedReports: 0, offlineForSeconds: 2 } },
    ]);
    expect(ok(await c.request<{ rows: unknown[] }>('GET', '/connectivity-threshold/find?priorityLevel=2')).rows).toHaveLength(1);
    expectParameterError(await c.request('POST', '/connectivity-threshold/?priorityLevel=3', { connectivityThreshold: null }), 'priorityLevel');
    expectParameterError(
      await c.request('POST', '/connectivity-threshold/?priorityLevel=1', { connectivityThreshold: { missedReports: -1, offlineForSeconds: 1 } }),
      'missedReports',
    );
    expectParameterError(
      await c.request('POST', '/connectivity-threshold/?priorityLevel=1', { connectivityThreshold: { missedReports: 1, offlineForSeconds: 7 * 86400 + 1 } }),
      'offlineForSeconds',
    );
    expectParameterError(
      await c.request('POST', '/connectivity-threshold/?priorityLevel=1&deviceTypeHashId=nosuchtype', { connectivityThreshold: null }),
      'deviceTypeHashId',
    );
    // another customer: not its device type, and it sees none of these
    const other = await linkedDevice(ctx, service, RIGHTS);
    expectParameterError(
      await other.customer.request('POST', `/connectivity-threshold/?priorityLevel=1&deviceTypeHashId=${d.deviceTypeHashId}`, { connectivityThreshold: null }),
      'deviceTypeHashId',
    );
    expect(ok(await other.customer.request<{ rows: unknown[] }>('GET', '/connectivity-threshold/find')).rows).toEqual([]);

    // silent for 2 s: the issue opens within 2 s plus a minute (the check runs every CHECK_MS)
    const rows = await until(
      () => c.request<{ rows: Row[] }>('GET', `/issue/?pinGroupHashId=${d.pinGroupHashId}`).then(ok),
      (r) => r.rows.some((x) => x.issue.closedAt === null),
      'a connectivity issue',
      2000 + 60_000,
    );
    const issue = rows.rows[0];
    expect(issue.issue).toMatchObject({ level: 2, title: `Device ${d.deviceHashId} is not reporting`, userHashId: null });
    expect(issue.pinGroup.level).toBe(2);
    expect(ok(await c.request<{ automation: unknown }>('GET', `/issue/${issue.issue.hashId}`)).automation).toEqual({ type: 'missing' });

    // the environment does not close it itself: a report leaves it open; once allowed, the device's contact closes it
    await d.report(2);
    await new Promise((r) => setTimeout(r, CHECK_MS * 4));
    expect(ok(await c.request<IssueGet>('GET', `/issue/${issue.issue.hashId}`)).issue.closedAt).toBeNull();
    ok(await c.request('PUT', '/environment/', { allowAutoCloseConnectivityIssues: true }));
    await d.report(3);
    const closed = await until(
      () => c.request<IssueGet>('GET', `/issue/${issue.issue.hashId}`).then(ok),
      (g) => g.issue.closedAt !== null,
      'the issue to close',
    );
    expect(closed.comments.map((x) => x.comment.userHashId)).toEqual([null]);
    // the other customer's silent device opened nothing here
    expect(ok(await other.customer.request<{ rows: Row[] }>('GET', '/issue/')).rows.every((r) => r.issue.pinGroupHashId === other.pinGroupHashId)).toBe(true);
  });
});
