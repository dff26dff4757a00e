import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { pinThresholdsOf } from '../../src/monitoring/thresholds/store.ts';
import { testContext } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { until, waitFor } from '../support/until.ts';
import { linkedDevice, ok, type LinkedDevice } from './linked-device.ts';

// Pin thresholds and the issues they open, from the outside: a linked device reports values that
// cross each limit; the issue opens on the pin group, follows the values, shows in issue find, on
// the pin group, its pins and its grid; it closes itself only when the environment allows it.

let ctx: AppContext;
let service: RunningService;
const RIGHTS = ['READ', 'STATIC', 'SENSORS', 'THRESHOLDS', 'ISSUES', 'ENVIRONMENT_ADMIN'];

beforeAll(async () => {
  ctx = await testContext();
  service = await startService(ctx, ['all']);
});
afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

const pair = (significand: number, orderOfMagnitude = 0) => ({ orderOfMagnitude, significand });
const LIMITS = { criticallyLow: pair(10), low: pair(20), high: pair(80), criticallyHigh: pair(90) };

interface IssueRow {
  issue: { hashId: string; level: number; closedAt: string | null; title: string; pinGroupHashId: string };
  pinGroup: { hashId: string; level: number };
  subscribed: boolean;
}
interface IssueGet {
  issue: IssueRow['issue'];
  automation: { type: string; quantities?: { hashId: string }[] } | null;
  pins: { hashId: string; level: number }[];
  comments: { comment: { comment: string; userHashId: string | null }; userName: string | null }[];
  trigger: { lastLevel: number; lastValue: { significand: number }; crossingCount: number; measurementCount: number } | null;
}

async function issues(d: LinkedDevice): Promise<IssueRow[]> {
  return ok(await d.customer.request<{ rows: IssueRow[] }>('GET', `/issue/?pinGroupHashId=${d.pinGroupHashId}&rowsPerPage=100`)).rows;
}
const getIssue = async (d: LinkedDevice, hashId: string) => ok(await d.customer.request<IssueGet>('GET', `/issue/${hashId}`));

/** Reports `v` and waits until the open issue's trigger saw it (or, with `none`, that no issue is open). */
async function reportAndSee(d: LinkedDevice, v: number): Promise<IssueGet> {
  await d.report(v);
  const rows = await until(
    () => issues(d),
    (r) => r.some((i) => i.issue.closedAt === null),
    'an open issue',
  );
  const open = rows.find((i) => i.issue.closedAt === null)!;
  return until(
    () => getIssue(d, open.issue.hashId),
    (g) => g.trigger?.lastValue.significand === v,
    `the issue to see ${v}`,
  );
}

describe('pin thresholds', () => {
  it('are set as the SDK sets them, shown on pin, pin group and edge get, removed with null; limits are parameter_errors', async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const c = d.customer;
    const edge = ok(
      await c.request<{ hashId: string }>('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [1, 1],
            [2, 2],
          ],
        },
        fields: { id: 'line' },
      }),
    ).hashId;
    ok(await c.request('POST', `/graph/pin/${d.pinHashId}`, { edgeHashId: edge }));
    const set = ok(
      await c.request<{ hashId: string }>('POST', '/measurement-threshold/thresholds', {
        pinHashId: d.pinHashId,
        quantityHashId: d.quantityHashId,
        thresholds: LIMITS,
      }),
    );
    expect(set.hashId).toMatch(/^[a-z0-9]+$/);
    const shown = [
      { value: { hashId: set.hashId, pinHashId: d.pinHashId, ...LIMITS }, quantity: expect.objectContaining({ hashId: d.quantityHashId, name: 'Voltage' }) },
    ];
    expect(ok(await c.request<{ thresholds: unknown[] }>('GET', `/graph/pin/${d.pinHashId}`)).thresholds).toEqual(shown);
    expect(ok(await c.request<{ thresholds: unknown[] }>('GET', `/graph/pin-group/${d.pinGroupHashId}`)).thresholds).toEqual(shown);
    expect(ok(await c.request<{ thresholds: unknown[] }>('GET', `/graph/edge/${edge}`)).thresholds).toEqual(shown);
    const found = ok(
      await c.request<{ rows: { location: { pin: { hashId: string } } | null; threshold: unknown }[] }>('GET', '/measurement-threshold/?type=port'),
    );
    expect(found.rows).toEqual([
      expect.objectContaining({ location: expect.objectContaining({ pin: { hashId: d.pinHashId, name: 'Pipe' } }), threshold: LIMITS }),
    ]);

    // the helper the chart reads: the pin's own limits, else the quantity's defaults
    const ids = await ctx.db.query<{ pin: number; q: number }>('SELECT p.id AS pin, q.id AS q FROM pin p, quantity q WHERE p.hash_id = $1 AND q.hash_id = $2', [
      d.pinHashId,
      d.quantityHashId,
    ]);
    const env = await ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    const { pin, q } = ids.rows[0];
    expect((await pinThresholdsOf(ctx.db, env.rows[0].id, [{ pinId: pin, quantityId: q }])).get(`${pin}:${q}`)).toEqual({ hashId: set.hashId, ...LIMITS });
    // another environment's pin is not answered
    expect((await pinThresholdsOf(ctx.db, env.rows[0].id + 100000, [{ pinId: pin, quantityId: q }])).size).toBe(0);

    // an array: all or nothing, answered per item; the error names the item's field
    expectParameterError(
      await c.request('POST', '/measurement-threshold/thresholds', [
        { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: null },
        { pinHashId: d.pinHashId, quantityHashId: 'nosuchquantity', thresholds: LIMITS },
      ]),
      '[1].quantityHashId',
    );
    expect(ok(await c.request<{ thresholds: unknown[] }>('GET', `/graph/pin/${d.pinHashId}`)).thresholds).toHaveLength(1);
    expectParameterError(
      await c.request('POST', '/measurement-threshold/thresholds', { pinHashId: 'nosuchpin', quantityHashId: d.quantityHashId, thresholds: LIMITS }),
      'pinHashId',
    );
    expectParameterError(
      await c.request('POST', '/measurement-threshold/thresholds', {
        pinHashId: d.pinHashId,
        quantityHashId: d.quantityHashId,
        thresholds: { ...LIMITS, low: pair(85) },
      }),
      'thresholds.high',
    );
    expectParameterError(
      await c.request('POST', '/measurement-threshold/thresholds', {
        pinHashId: d.pinHashId,
        quantityHashId: d.quantityHashId,
        thresholds: { ...LIMITS, extra: 1 },
      }),
      'extra',
    );
    expectParameterError(
      await c.request(
        'POST',
        '/measurement-threshold/thresholds',
        Array.from({ length: 501 }, () => ({ pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: null })),
      ),
      '500',
    );

    const removed = ok(
      await c.request<{ hashId: (string | null)[] }>('POST', '/measurement-threshold/thresholds', [
        { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: null },
      ]),
    );
    expect(removed.hashId).toEqual([null]);
    expect(ok(await c.request<{ thresholds: unknown[] }>('GET', `/graph/pin/${d.pinHashId}`)).thresholds).toEqual([]);
  });

  it("are set the same at SDK 17's path (graph setThreshold, POST /graph/thresholds), one item or an array", async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const c = d.customer;
    const set = ok(
      await c.request<{ hashId: string }>('POST', '/graph/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: LIMITS }),
    );
    const shown = [{ value: { hashId: set.hashId, pinHashId: d.pinHashId, ...LIMITS }, quantity: expect.objectContaining({ hashId: d.quantityHashId }) }];
    expect(ok(await c.request<{ thresholds: unknown[] }>('GET', `/graph/pin/${d.pinHashId}`)).thresholds).toEqual(shown);
    expect(ok(await c.request('POST', '/graph/thresholds', [{ pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: null }]))).toEqual({
      hashId: [null],
    });
    expect(ok(await c.request<{ thresholds: unknown[] }>('GET', `/graph/pin/${d.pinHashId}`)).thresholds).toEqual([]);
    expectParameterError(
      await c.request('POST', '/graph/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: { ...LIMITS, low: pair(85) } }),
      'thresholds.high',
    );
  });

  it("isolates tenants: another customer can neither set thresholds on the pin nor use the supplier's quantity", async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const other = await linkedDevice(ctx, service, RIGHTS);
    expectParameterError(
      await other.customer.request('POST', '/measurement-threshold/thresholds', {
        pinHashId: d.pinHashId,
        quantityHashId: other.quantityHashId,
        thresholds: LIMITS,
      }),
      'pinHashId',
    );
    expectParameterError(
      await other.customer.request('POST', '/measurement-threshold/thresholds', {
        pinHashId: other.pinHashId,
        quantityHashId: d.quantityHashId,
        thresholds: LIMITS,
      }),
      'quantityHashId',
    );
    expect(ok(await other.customer.request<{ rows: unknown[] }>('GET', '/measurement-threshold/?type=port')).rows).toEqual([]);
  });
});

describe('threshold issues', () => {
  it('open on a crossing, follow every level, show on the pin group, its pins and its grid; stay open without auto close', async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const c = d.customer;
    const grid = ok(
      await c.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'grid' }, pinGroupHashIds: [d.pinGroupHashId] }),
    ).hashId;
    const edge = ok(
      await c.request<{ hashId: string }>('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [1, 1],
            [2, 2],
          ],
        },
        fields: { id: 'line' },
      }),
    ).hashId;
    ok(await c.request('POST', `/graph/pin/${d.pinHashId}`, { edgeHashId: edge }));
    await d.reportUntilOnPin(50);
    ok(await c.request('POST', '/measurement-threshold/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: LIMITS }));
    // in range: nothing opens
    await d.report(50);
    await d.report(80);
    await d.report(20);

    const high = await reportAndSee(d, 85);
    expect(high.issue).toMatchObject({ level: 1, closedAt: null, pinGroupHashId: d.pinGroupHashId, title: 'Voltage too high on Pipe' });
    expect(high.automation).toEqual({ type: 'thresholds', quantities: [expect.objectContaining({ hashId: d.quantityHashId })] });
    expect(high.pins.map((p) => [p.hashId, p.level])).toEqual([[d.pinHashId, 1]]);
    expect(high.trigger).toMatchObject({ lastLevel: 1, crossingCount: 1, measurementCount: 1 });
    expect(ok(await c.request<{ pinGroup: { level: number } }>('GET', `/graph/pin-group/${d.pinGroupHashId}`)).pinGroup.level).toBe(1);
    expect(ok(await c.request<{ pinGroups: { level: number }[] }>('GET', `/graph/pin-group-grid/${grid}`)).pinGroups.map((p) => p.level)).toEqual([1]);

    // each level: the same issue follows, its level rises to the worst seen
    const criticallyHigh = await reportAndSee(d, 95);
    expect(criticallyHigh.issue.hashId).toBe(high.issue.hashId);
    expect(criticallyHigh.issue.level).toBe(2);
    expect(criticallyHigh.trigger).toMatchObject({ lastLevel: 2, crossingCount: 2 });
    const low = await reportAndSee(d, 15);
    expect(low.trigger).toMatchObject({ lastLevel: 1, crossingCount: 3 });
    const criticallyLow = await reportAndSee(d, 5);
    expect(criticallyLow.trigger).toMatchObject({ lastLevel: 2, crossingCount: 4 });
    expect(ok(await c.request<{ pinGroup: { level: number } }>('GET', `/graph/pin-group/${d.pinGroupHashId}`)).pinGroup.level).toBe(2);
    expect(ok(await c.request<{ pin: { level: number } }>('GET', `/graph/pin/${d.pinHashId}`)).pin.level).toBe(2);
    expect(ok(await c.request<{ edge: { level: number } }>('GET', `/graph/edge/${edge}`)).edge.level).toBe(2);

    // back in range: the environment does not close issues itself, so it stays open
    const back = await reportAndSee(d, 50);
    expect(back.issue).toMatchObject({ hashId: high.issue.hashId, level: 2, closedAt: null });
    expect(back.trigger).toMatchObject({ lastLevel: 0, crossingCount: 4, measurementCount: 5 });
    const rows = await issues(d);
    expect(rows.map((r) => [r.issue.hashId, r.pinGroup.level])).toEqual([[high.issue.hashId, 2]]);

    // the user closes it: the pin group is quiet again, and the next crossing opens a new issue
    expect((await c.request('POST', `/issue/${high.issue.hashId}`, { closed: true })).status).toBe(204);
    expect(ok(await c.request<{ pinGroup: { level: number } }>('GET', `/graph/pin-group/${d.pinGroupHashId}`)).pinGroup.level).toBe(0);
    const next = await reportAndSee(d, 9);
    expect(next.issue.hashId).not.toBe(high.issue.hashId);
    expect(next.issue).toMatchObject({ level: 2, title: 'Voltage critically low on Pipe' });
    // reopening the first while the second is open: refused
    expect((await c.request<{ key: string }>('POST', `/issue/${high.issue.hashId}`, { closed: false })).body.key).toBe('conflict_error');
  });

  it('close themselves when the environment allows it, after the trigger amount of in-range measurements', async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const c = d.customer;
    ok(
      await c.request('PUT', '/environment/', {
        allowAutoCloseThresholdIssues: true,
        issueAutoClosingTriggerAmount: 2,
        issueAutoClosingTriggerUnitType: 'measurements',
      }),
    );
    await d.reportUntilOnPin(50);
    ok(await c.request('POST', '/measurement-threshold/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: LIMITS }));
    const opened = await reportAndSee(d, 91);
    const once = await reportAndSee(d, 50);
    expect(once.issue.closedAt).toBeNull();
    await d.report(60);
    const closed = await until(
      () => getIssue(d, opened.issue.hashId),
      (g) => g.issue.closedAt !== null,
      'the issue to close',
    );
    expect(closed.trigger).toMatchObject({ lastLevel: 0, measurementCount: 3 });
    expect(closed.comments.map((x) => [x.comment.userHashId, x.userName])).toEqual([[null, null]]);
    expect(ok(await c.request<{ pinGroup: { level: number } }>('GET', `/graph/pin-group/${d.pinGroupHashId}`)).pinGroup.level).toBe(0);
    expectParameterError(await c.request('PUT', '/environment/', { issueAutoClosingTriggerUnitType: 'fortnights' }), 'issueAutoClosingTriggerUnitType');
    expectParameterError(await c.request('PUT', '/environment/', { issueAutoClosingTriggerAmount: 0 }), 'issueAutoClosingTriggerAmount');
  });

  it('close themselves after a time in range when the trigger unit is a time (reports are 60 s apart by their generatedAt)', async () => {
    const d = await linkedDevice(ctx, service, RIGHTS);
    const c = d.customer;
    ok(
      await c.request('PUT', '/environment/', {
        allowAutoCloseThresholdIssues: true,
        issueAutoClosingTriggerAmount: 2,
        issueAutoClosingTriggerUnitType: 'minutes',
      }),
    );
    await d.reportUntilOnPin(50);
    ok(await c.request('POST', '/measurement-threshold/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: LIMITS }));
    const opened = await reportAndSee(d, 85);
    // in range at t, t + 1 min: not yet two minutes
    expect((await reportAndSee(d, 50)).issue.closedAt).toBeNull();
    expect((await reportAndSee(d, 51)).issue.closedAt).toBeNull();
    // t + 2 min: closed
    await d.report(52);
    const closed = await until(
      () => getIssue(d, opened.issue.hashId),
      (g) => g.issue.closedAt !== null,
      'the issue to close',
    );
    expect(closed.trigger).toMatchObject({ lastValue: { significand: 52 }, measurementCount: 4 });
  });

  it("open from the quantity's default thresholds on a pin without its own", async () => {
    const d = await linkedDevice(ctx, service, RIGHTS, { defaultHighThreshold: pair(100), defaultCriticallyHighThreshold: pair(200) });
    await d.reportUntilOnPin(50);
    const opened = await reportAndSee(d, 150);
    expect(opened.issue).toMatchObject({ level: 1, title: 'Voltage too high on Pipe' });
  });

  it("are forgotten by another process's threshold cache as soon as this one changes them, not CACHE_MS later", async () => {
    // process B: a context of the same deployment (QUEUE_NAME: the change bus's channel), with its own cache
    const other = await testContext({ QUEUE_NAME: ctx.config.queueName });
    try {
      const d = await linkedDevice(ctx, service, RIGHTS);
      const c = d.customer;
      ok(await c.request('POST', '/measurement-threshold/thresholds', { pinHashId: d.pinHashId, quantityHashId: d.quantityHashId, thresholds: LIMITS }));
      const pin = Number((await ctx.db.query<{ id: string }>('SELECT id FROM pin WHERE hash_id = $1', [d.pinHashId])).rows[0].id);
      // both processes hold the pin's limits
      await ctx.thresholds.load(ctx.db, [pin], []);
      await other.thresholds.load(other.db, [pin], []);
      await other.changes.listen();
      expect(other.thresholds.pin(pin)?.limits.get(d.quantityHashId)).toMatchObject({ high: { significand: 80 } });
      expect(ctx.thresholds.pin(pin)?.limits.get(d.quantityHashId)).toMatchObject({ high: { significand: 80 } });

      ok(
        await c.request('POST', '/measurement-threshold/thresholds', {
          pinHashId: d.pinHashId,
          quantityHashId: d.quantityHashId,
          thresholds: { ...LIMITS, high: pair(85) },
        }),
      );
      // this process forgot before it answered; the other as soon as Redis brought the change, well within CACHE_MS (5 s)
      expect(ctx.thresholds.pin(pin)).toBeUndefined();
      await waitFor(() => other.thresholds.pin(pin) === undefined, 3000);
      await other.thresholds.load(other.db, [pin], []);
      expect(other.thresholds.pin(pin)?.limits.get(d.quantityHashId)).toMatchObject({ high: { significand: 85 } });
    } finally {
      await closeContext(other);
    }
  });
});
