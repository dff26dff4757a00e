import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, findAll } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from '../monitoring/fixtures.ts';
import { until } from '../support/until.ts';
import { asAuthor } from '../../src/app/author.ts';
import { newHashId } from '../../src/app/hash-id.ts';
import { startRetention } from '../../src/monitoring/retention/prune.ts';

// What the audit trail must never hold: rows of another tenant (whatever author a pooled connection last named),
// rows that housekeeping moves or deletes (the week partitions, retention), and the bytes of large values.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface LogRow {
  log: {
    objectType: string | null;
    objectHashId: string | null;
    action: string;
    diff: { old: Record<string, unknown> | null; new: Record<string, unknown> | null } | null;
  };
}
const logOf = (c: ApiClient, query = '') => findAll<LogRow>(c, `/settings/log${query}`, 100);
const ok = <T>(r: { status: number; body: T }): T => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};
const environmentId = async (c: ApiClient) =>
  (await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId])).rows[0].id;

/** Tenant Y's manual report dated `generatedAt`, its fields holding `note`. */
async function manualReport(y: ApiClient, generatedAt: string, note: string): Promise<string> {
  const pinGroupHashId = (await addPinGroup(y, 'Y station')).hashId;
  const pinHashId = (await addPin(y, pinGroupHashId, 'Y inlet')).hashId;
  const form = { pinGroup: [{ key: 'note', name: 'Note', type: 'string' }], pin: [], measurement: [] };
  const { hashId: reportTypeHashId } = ok(
    await y.request<{ hashId: string }>('POST', '/report-type/', { name: 'Inspection', fieldConfigurations: form, quantities: [{ name: 'Level', unit: 'm' }] }),
  );
  const quantityHashId = ok(await y.request<{ quantities: { hashId: string }[] }>('GET', `/report-type/${reportTypeHashId}`)).quantities[0].hashId;
  return ok(
    await y.request<{ hashId: string }>('POST', '/report/', {
      reportTypeHashId,
      pinGroupHashId,
      fields: { note },
      measurements: [{ pinHashId, quantityHashId, generatedAt, orderOfMagnitude: 0, significand: 3 }],
    }),
  ).hashId;
}

describe('audit trail and housekeeping', () => {
  it("the week partition run moves one tenant's rows without logging them in the log of the tenant whose operation last used the connection", async () => {
    const x = await api.login('monitoring', ['READ', 'STATIC', 'ISSUES', 'ENVIRONMENT_ADMIN', 'AUDIT_TRAIL']);
    const y = await api.login('monitoring', ['READ', 'STATIC', 'REPORTS', 'ENVIRONMENT_ADMIN', 'AUDIT_TRAIL']);
    // a week no partition holds yet: Y's report lands in condition_report_default
    const reportHashId = await manualReport(y, '2020-01-08T10:00:00Z', 'Y-CONFIDENTIAL-NOTE');
    expect((await api.ctx.db.query('SELECT 1 FROM condition_report_default WHERE hash_id = $1', [reportHashId])).rows).toHaveLength(1);
    // X keeps changing its label: the pool's connections last named X's account as the author of their writes
    const label = ok(await x.request<{ hashId: string }>('POST', '/label/', { name: 'mine', color: '#ff0000' })).hashId;
    for (const color of ['#00ff00', '#0000ff', '#ff00ff']) expect((await x.request('POST', `/label/${label}`, { color })).status).toBe(204);

    const retention = startRetention(api.ctx, 3_600_000, 0);
    try {
      await until(
        async () => (await api.ctx.db.query("SELECT to_regclass('condition_report_w20200106') AS p")).rows[0].p,
        (p) => p !== null,
        "the partition of Y's week",
      );
      await until(
        async () => (await api.ctx.db.query('SELECT 1 FROM condition_report_default WHERE hash_id = $1', [reportHashId])).rows,
        (r) => r.length === 0,
        "Y's report moved",
      );
    } finally {
      retention.stop();
    }
    expect((await api.ctx.db.query('SELECT 1 FROM condition_report_w20200106 WHERE hash_id = $1', [reportHashId])).rows).toHaveLength(1);

    const xLog = await logOf(x);
    expect(xLog.map((r) => r.log.objectType)).toEqual(['label', 'label', 'label', 'label']);
    expect(JSON.stringify(xLog)).not.toContain('Y-CONFIDENTIAL-NOTE');
    // the move is nobody's change: Y's log holds the report's creation only
    const yReports = (await logOf(y)).filter((r) => r.log.objectType === 'conditionReport');
    expect(yReports.map((r) => r.log.action)).toEqual(['create']);
    const { rows } = await api.ctx.db.query('SELECT 1 FROM audit_log WHERE environment_id = $1 AND object_type <> $2', [await environmentId(x), 'label']);
    expect(rows).toEqual([]);
  });

  it('a row of another environment is not logged under an author, whichever write reaches it', async () => {
    const x = await api.login('monitoring', ['READ', 'STATIC', 'AUDIT_TRAIL', 'ISSUES']);
    const y = await api.login('monitoring', ['READ', 'STATIC', 'AUDIT_TRAIL', 'ISSUES']);
    const [xId, yId] = [await environmentId(x), await environmentId(y)];
    // Y's issue: its comments have no environment of their own, their issue has
    const yPinGroup = (await addPinGroup(y, 'Y place')).hashId;
    const yIssue = ok(
      await y.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: yPinGroup, pinHashIds: [], title: 'Y issue', level: 1, comment: '' }),
    ).hashId;
    const yIssueId = (await api.ctx.db.query<{ id: number }>('SELECT id FROM issue WHERE hash_id = $1', [yIssue])).rows[0].id;
    const yLogBefore = await logOf(y);
    const yLabel = newHashId();
    await api.ctx.db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [yLabel, yId, 'Y-SECRET-LABEL', '#000000']);
    await asAuthor({ environmentId: xId, userHashId: 'x-account' }, async () => {
      await api.ctx.db.query('UPDATE label SET name = $2 WHERE hash_id = $1', [yLabel, 'Y-SECRET-RENAMED']);
      await api.ctx.db.tx((tx) => tx.query('DELETE FROM label WHERE hash_id = $1', [yLabel]));
      await api.ctx.db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [newHashId(), yId, 'Y-SECRET-NEW', '#000000']);
      await api.ctx.db.query('INSERT INTO issue_comment (hash_id, issue_id, comment) VALUES ($1, $2, $3)', [newHashId(), yIssueId, 'Y-SECRET-COMMENT']);
    });
    expect(await logOf(x)).toEqual([]);
    expect(await logOf(y)).toEqual(yLogBefore);
  });

  it('housekeeping on its own connection logs nothing, even when an operation starts it', async () => {
    const x = await api.login('monitoring', ['READ', 'STATIC', 'AUDIT_TRAIL']);
    const xId = await environmentId(x);
    await asAuthor({ environmentId: xId, userHashId: 'x-account' }, () =>
      api.ctx.db.maintenance(async (db) => {
        await db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [newHashId(), xId, 'housekeeping', '#000000']);
      }),
    );
    expect(await logOf(x)).toEqual([]);
  });

  it('a firmware image and a photo are logged as their size and digest, not their bytes', async () => {
    const s = await api.login('connectivity', ['ENVIRONMENT_ADMIN']);
    const image = randomBytes(256 * 1024);
    const deviceTypeHashId = await addDeviceType(s);
    const firmware = ok(
      await s.request<{ hashId: string }>('POST', '/firmware/', { deviceTypeHashId, version: '1.0.0', data: image.toString('base64') }),
    ).hashId;
    const [created] = await logOf(s, `?objectType=firmware&objectHashId=${firmware}`);
    expect(created.log.diff?.new?.data).toEqual({ bytes: image.length, sha256: createHash('sha256').update(image).digest('hex') });
    expect(JSON.stringify(created).length).toBeLessThan(4096);

    const m = await api.login('monitoring', ['READ', 'STATIC', 'AUDIT_TRAIL']);
    const photo = `data:image/png;base64,${randomBytes(64 * 1024).toString('base64')}`;
    const pinGroup = (await addPinGroup(m, 'with a photo')).hashId;
    expect((await m.request('POST', `/graph/pin-group/${pinGroup}`, { photo })).status).toBeLessThan(300);
    const [updated] = await logOf(m, `?objectType=pinGroup&objectHashId=${pinGroup}`);
    expect(updated.log.action).toBe('update');
    expect(updated.log.diff?.new?.photo).toEqual({ bytes: Buffer.byteLength(photo), sha256: createHash('sha256').update(photo).digest('hex') });
    // a small value is still logged as it is
    expect(updated.log.diff?.old?.photo ?? null).toBeNull();
  });
});

describe("an operation's author", () => {
  it('ends with the operation: what it started and runs later (a timer, a batch flushed after it) writes as nobody', async () => {
    const x = await api.login('monitoring', ['READ', 'STATIC', 'AUDIT_TRAIL']);
    const xId = await environmentId(x);
    const insert = (name: string) =>
      api.ctx.db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [newHashId(), xId, name, '#000000']);
    let later: Promise<unknown> = Promise.resolve();
    let armed!: () => void;
    const go = new Promise<void>((resolve) => {
      armed = resolve;
    });
    await asAuthor({ environmentId: xId, userHashId: 'x-account' }, async () => {
      await insert('during the operation');
      later = go.then(() => insert('after the operation'));
    });
    armed();
    await later;
    expect((await logOf(x)).map((r) => r.log.diff?.new?.name)).toEqual(['during the operation']);
  });
});
