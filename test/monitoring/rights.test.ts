import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, createMachineAccount, MONITORING_RIGHTS, type EnvironmentType } from '../../src/accounts/store.ts';
import { startTestApi, type TestApi } from '../helpers.ts';

// The rights matrix of the monitoring operations: each operation x (no right, wrong right, its
// right) x (connectivity, monitoring) environment, and each with another environment's hashId.
// Operations of a connectivity environment only (no monitoring right) are refused in every
// monitoring environment; operations of the account itself (no right at all) answer any account.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Op {
  method: string;
  url: string;
  body?: unknown;
  monitoring?: string;
  connectivity?: string;
}

const ops: Op[] = [
  { method: 'PUT', url: '/environment/', body: { name: 'x' }, monitoring: 'ENVIRONMENT_ADMIN' },
  { method: 'DELETE', url: '/environment/', monitoring: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/graph/pin-group', body: { symbolKey: 's', geometry: null, fields: { id: 'x' } }, monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/pin-group', monitoring: 'READ' },
  { method: 'GET', url: '/graph/pin-group/abc', monitoring: 'READ' },
  { method: 'POST', url: '/graph/pin-group/abc', body: { symbolKey: 's' }, monitoring: 'STATIC' },
  { method: 'DELETE', url: '/graph/pin-group/abc', monitoring: 'STATIC' },
  { method: 'POST', url: '/graph/pin-group/abc/pin', body: { fields: { id: 'x' } }, monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/pin', monitoring: 'READ' },
  { method: 'GET', url: '/graph/pin/abc', monitoring: 'READ' },
  { method: 'POST', url: '/graph/pin/abc', body: { fields: { id: 'x' } }, monitoring: 'STATIC' },
  { method: 'DELETE', url: '/graph/pin/abc', monitoring: 'STATIC' },
  { method: 'POST', url: '/device/claim', body: { claimTokens: ['nope'] }, monitoring: 'SENSORS' },
  { method: 'POST', url: '/device/unclaim', body: { hashIds: ['abc'] }, monitoring: 'SENSORS' },
  { method: 'POST', url: '/device/abc/link', body: { pinGroupHashId: 'abc', channelMapping: [] }, monitoring: 'SENSORS' },
  { method: 'POST', url: '/device/abc/unlink', monitoring: 'SENSORS' },
  { method: 'GET', url: '/device/', monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'GET', url: '/device/abc', monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'GET', url: '/measurement/', monitoring: 'READ' },
  { method: 'POST', url: '/graph/pin-grid', body: { fields: { id: 'g' } }, monitoring: 'STATIC' },
  { method: 'POST', url: '/graph/pin-group-grid', body: { fields: { id: 'g' } }, monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/pin-grid/abc', monitoring: 'READ' },
  { method: 'GET', url: '/graph/pin-group-grid/abc', monitoring: 'READ' },
  { method: 'POST', url: '/graph/pin-grid/abc', body: {}, monitoring: 'STATIC' },
  { method: 'POST', url: '/graph/pin-group-grid/abc', body: {}, monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/grid', monitoring: 'READ' },
  { method: 'GET', url: '/graph/tiles/1/0/0', monitoring: 'READ' },
  { method: 'POST', url: '/graph/grid', body: { fields: { id: 'g' } }, monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/grid/abc', monitoring: 'READ' },
  { method: 'POST', url: '/graph/grid/abc', body: {}, monitoring: 'STATIC' },
  { method: 'DELETE', url: '/graph/grid/abc', monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/', monitoring: 'READ' },
  { method: 'POST', url: '/graph/', body: [], monitoring: 'STATIC' },
  {
    method: 'POST',
    url: '/graph/edge',
    body: {
      geometry: {
        type: 'LineString',
        coordinates: [
          [1, 1],
          [2, 2],
        ],
      },
      fields: { id: 'e' },
    },
    monitoring: 'STATIC',
  },
  { method: 'GET', url: '/graph/edge', monitoring: 'READ' },
  { method: 'GET', url: '/graph/edge/abc', monitoring: 'READ' },
  { method: 'POST', url: '/graph/edge/abc', body: {}, monitoring: 'STATIC' },
  { method: 'DELETE', url: '/graph/edge/abc', monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/pin-group/abc/performance?asOf=2026-01-01T00:00:00Z', monitoring: 'READ' },
  {
    method: 'POST',
    url: '/command/',
    body: { objectType: 'pinGroup', objectHashIds: ['abc'], commandTypeHashId: 'abc', fields: {}, email: [] },
    monitoring: 'SENSORS',
    connectivity: 'ENVIRONMENT_ADMIN',
  },
  { method: 'GET', url: '/command/', monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'GET', url: '/command/abc', monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'DELETE', url: '/command/abc', monitoring: 'SENSORS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'DELETE', url: '/command/', body: { hashIds: ['abc'] }, monitoring: 'SENSORS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/graph/node', body: { geometry: { type: 'Point', coordinates: [1, 1] }, fields: { id: 'n' } }, monitoring: 'STATIC' },
  { method: 'GET', url: '/graph/node', monitoring: 'READ' },
  { method: 'GET', url: '/graph/node/abc', monitoring: 'READ' },
  { method: 'POST', url: '/graph/node/abc', body: {}, monitoring: 'STATIC' },
  { method: 'DELETE', url: '/graph/node/abc', monitoring: 'STATIC' },
  { method: 'GET', url: '/analytics/?source=pin&columns[0][type]=count', monitoring: 'READ' },
  { method: 'POST', url: '/analytics/panel', body: { title: 't', cards: [] }, monitoring: 'REPORTS' },
  { method: 'GET', url: '/analytics/panel', monitoring: 'READ' },
  { method: 'GET', url: '/analytics/panel/abc', monitoring: 'READ' },
  { method: 'POST', url: '/analytics/abc', body: { title: 't' }, monitoring: 'REPORTS' },
  { method: 'DELETE', url: '/analytics/panel/abc', monitoring: 'REPORTS' },
  {
    method: 'POST',
    url: '/report-type/',
    body: { name: 'r', fieldConfigurations: { pinGroup: [], pin: [], measurement: [] }, quantities: [] },
    monitoring: 'STATIC',
  },
  { method: 'GET', url: '/report-type/', monitoring: 'READ' },
  { method: 'GET', url: '/report-type/abc', monitoring: 'READ' },
  { method: 'POST', url: '/report-type/abc', body: { name: 'r' }, monitoring: 'STATIC' },
  { method: 'DELETE', url: '/report-type/abc', monitoring: 'STATIC' },
  { method: 'POST', url: '/report/', body: { reportTypeHashId: 'abc', pinGroupHashId: 'abc', measurements: [] }, monitoring: 'REPORTS' },
  { method: 'GET', url: '/report/', monitoring: 'READ' },
  { method: 'GET', url: '/report/abc', monitoring: 'READ' },
  { method: 'POST', url: '/report/abc', body: { fields: {} }, monitoring: 'REPORTS' },
  { method: 'DELETE', url: '/report/abc', monitoring: 'REPORTS' },
  { method: 'POST', url: '/settings/user-environment-settings', body: { notificationLevel: 1 }, monitoring: 'READ' },
  {
    method: 'POST',
    url: '/settings/export',
    body: {
      content: { type: 'all', staticOnly: true, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2021-01-01T00:00:00Z' },
      delimiter: ',',
      rowDelimiter: '\n',
    },
    monitoring: 'EXPORT',
  },
  { method: 'GET', url: '/settings/export', monitoring: 'EXPORT' },
  { method: 'GET', url: '/settings/log', monitoring: 'AUDIT_TRAIL', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/user/', body: { name: 'n', email: 'n@example.com', rights: ['USERS'] }, monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'GET', url: '/user/', monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'GET', url: '/user/abc', monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/user/abc', body: { rights: ['USERS'] }, monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'DELETE', url: '/user/abc', monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/device/claim-tokens', body: { deviceHashIds: ['abc'] }, monitoring: 'SENSORS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/measurement-threshold/thresholds', body: { pinHashId: 'abc', quantityHashId: 'abc', thresholds: null }, monitoring: 'THRESHOLDS' },
  { method: 'GET', url: '/measurement-threshold/', monitoring: 'THRESHOLDS' },
  { method: 'GET', url: '/connectivity-threshold/find', monitoring: 'READ' },
  { method: 'POST', url: '/connectivity-threshold/?priorityLevel=1', body: { connectivityThreshold: null }, monitoring: 'THRESHOLDS' },
  { method: 'GET', url: '/issue/', monitoring: 'READ' },
  { method: 'GET', url: '/issue/abc', monitoring: 'READ' },
  { method: 'POST', url: '/issue/', body: { pinGroupHashId: 'abc', title: 't', level: 0, comment: '' }, monitoring: 'ISSUES' },
  { method: 'POST', url: '/issue/abc', body: { closed: true }, monitoring: 'ISSUES' },
  { method: 'DELETE', url: '/issue/abc', monitoring: 'ISSUES' },
  { method: 'POST', url: '/issue/abc/comment', body: { comment: 'x' }, monitoring: 'ISSUES' },
  { method: 'POST', url: '/issue/abc/notifications', body: { subscribed: true }, monitoring: 'READ' },
  { method: 'POST', url: '/issue-comment/abc', body: { comment: 'x' }, monitoring: 'ISSUES' },
  { method: 'DELETE', url: '/issue-comment/abc', monitoring: 'ISSUES' },
  { method: 'POST', url: '/graph/grid/abc/notification', body: { level: 1 }, monitoring: 'READ' },
  { method: 'GET', url: '/chart/?startAt=2026-01-01T00:00:00Z&endAt=2026-01-02T00:00:00Z', monitoring: 'READ' },
  { method: 'GET', url: '/chart/panel?pinGroupHashId=abc', monitoring: 'READ' },
  { method: 'GET', url: '/chart/panels', monitoring: 'READ' },
  { method: 'POST', url: '/chart/panel?pinGroupHashId=abc', body: { lastMode: 'manual' }, monitoring: 'REPORTS' },
  { method: 'POST', url: '/chart/panels', body: {}, monitoring: 'REPORTS' },
  { method: 'GET', url: '/graph/pin-quantities/abc', monitoring: 'READ' },
  { method: 'POST', url: '/graph/pin-groups', body: { hashIds: [] }, monitoring: 'STATIC' },
  { method: 'POST', url: '/quantity/abc/merge', body: { targetQuantityHashId: 'def' }, monitoring: 'ENVIRONMENT_ADMIN', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'GET', url: '/suggestions/?type=pin.name&search=a', monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/label/', body: { name: 'l', color: '#000000' }, monitoring: 'ISSUES' },
  { method: 'GET', url: '/label/', monitoring: 'READ' },
  { method: 'GET', url: '/label/abc', monitoring: 'READ' },
  { method: 'POST', url: '/label/abc', body: { name: 'l' }, monitoring: 'ISSUES' },
  { method: 'DELETE', url: '/label/abc', monitoring: 'ISSUES' },
  {
    method: 'POST',
    url: '/measurement-filter/',
    body: { name: 'f', description: '', period: 'lastMonth', reportTypeHashIds: [], quantityHashIds: ['abc'], fieldKeys: [] },
    monitoring: 'REPORTS',
  },
  { method: 'GET', url: '/measurement-filter/', monitoring: 'READ' },
  { method: 'GET', url: '/measurement-filter/abc', monitoring: 'READ' },
  { method: 'POST', url: '/measurement-filter/abc', body: { name: 'f' }, monitoring: 'REPORTS' },
  { method: 'DELETE', url: '/measurement-filter/abc', monitoring: 'REPORTS' },
  { method: 'POST', url: '/import/template', body: { pinGroupHashIds: [], pinGroupGridHashIds: [], reportTypeHashIds: ['abc'] }, monitoring: 'IMPORT' },
  { method: 'POST', url: '/import/', body: { name: 'x', dataUrl: 'data:text/csv;base64,' }, monitoring: 'IMPORT' },
  { method: 'GET', url: '/import/', monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'DELETE', url: '/import/abc', monitoring: 'IMPORT' },
  {
    method: 'POST',
    url: '/quantity/',
    body: {
      name: 'q',
      unit: null,
      defaultCriticallyLowThreshold: null,
      defaultLowThreshold: null,
      defaultHighThreshold: null,
      defaultCriticallyHighThreshold: null,
    },
    monitoring: 'ENVIRONMENT_ADMIN',
    connectivity: 'ENVIRONMENT_ADMIN',
  },
  { method: 'GET', url: '/quantity/quantities', monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'GET', url: '/quantity/abc', monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'POST', url: '/quantity/abc', body: { name: 'q' }, monitoring: 'ENVIRONMENT_ADMIN', connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'DELETE', url: '/quantity/abc', monitoring: 'ENVIRONMENT_ADMIN', connectivity: 'ENVIRONMENT_ADMIN' },
  // SDK 17's routes that 18.3.1 dropped
  { method: 'GET', url: '/graph/pin/abc/measurements?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z', monitoring: 'READ' },
  { method: 'GET', url: '/graph/edge/abc/measurements?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z', monitoring: 'READ' },
  { method: 'POST', url: '/graph/thresholds', body: { pinHashId: 'abc', quantityHashId: 'abc', thresholds: null }, monitoring: 'THRESHOLDS' },
  // a connectivity environment's own (supplier update and delete)
  { method: 'PUT', url: '/supplier/', body: { name: 'x' }, connectivity: 'ENVIRONMENT_ADMIN' },
  { method: 'DELETE', url: '/supplier/', connectivity: 'ENVIRONMENT_ADMIN' },
];

// the account's own operations: no right, no environment; one account never reaches another's objects (test/accounts/)
// (a wrong password's 400 shows the account got past the rights check)
const accountOps: (Op & { answer: [number, string?] })[] = [
  { method: 'POST', url: '/environment/', body: { name: 'mine' }, answer: [200] },
  { method: 'POST', url: '/supplier/', body: { name: 'mine' }, answer: [200] },
  { method: 'GET', url: '/settings/', answer: [200] },
  { method: 'POST', url: '/settings/', body: { name: 'Me' }, answer: [204] },
  { method: 'POST', url: '/settings/feedback', body: { feedback: 'fine' }, answer: [204] },
  { method: 'POST', url: '/two-factor-authentication/get-keyuri', body: { password: 'wrong' }, answer: [400, 'parameter_error'] },
  { method: 'POST', url: '/two-factor-authentication/disable', body: { password: 'wrong' }, answer: [400, 'parameter_error'] },
];

type Account = Awaited<ReturnType<typeof newAccount>>;
const accounts = new Map<string, Promise<Account>>();

/** A logged-in account holding exactly `rights` in an environment of `type`, shared unless `fresh` (environment delete ends it). */
function account(type: EnvironmentType, rights: string[], fresh = false): Promise<Account> {
  if (fresh) return newAccount(type, rights);
  const key = `${type}:${rights.join(',')}`;
  if (!accounts.has(key)) accounts.set(key, newAccount(type, rights));
  return accounts.get(key)!;
}

/** A logged-in account of a new environment of `type` holding exactly `rights` (possibly none). */
async function newAccount(type: EnvironmentType, rights: string[]) {
  const env = await createEnvironment(api.ctx.db, type, `rights ${type}`);
  const made = await createMachineAccount(api.ctx.db, env.hashId, type === 'monitoring' ? ['READ'] : ['ENVIRONMENT_ADMIN']);
  await api.ctx.db.query('UPDATE machine_account SET rights = $2 WHERE hash_id = $1', [made.hashId, rights]);
  const login = await api.app.inject({
    method: 'POST',
    url: '/authentication/machine-login',
    headers: { 'api-version': '5' },
    payload: { assertion: made.assertion },
  });
  const jwt = (login.json() as { jwt: string }).jwt;
  return {
    env: env.hashId,
    async call(op: Op, environmentHashId = env.hashId) {
      const r = await api.app.inject({
        method: op.method as 'GET',
        url: op.url,
        headers: { 'api-version': '5', 'environment-hash-id': environmentHashId, authorization: `Bearer ${jwt}` },
        ...(op.body === undefined ? {} : { payload: op.body as object }),
      });
      return { status: r.statusCode, key: r.body ? (r.json() as { key?: string }).key : undefined };
    },
  };
}

const ends = (op: Op) => op.method === 'DELETE' && (op.url === '/environment/' || op.url === '/supplier/');

describe('rights matrix of the monitoring operations', () => {
  it.each(ops.map((op) => [`${op.method} ${op.url}`, op] as const))('%s', async (_name, op) => {
    const cases: { who: string; type: EnvironmentType; rights: string[]; allowed: boolean }[] = [
      { who: 'monitoring, no right', type: 'monitoring', rights: [], allowed: false },
      { who: 'monitoring, every other right', type: 'monitoring', rights: MONITORING_RIGHTS.filter((r) => r !== op.monitoring), allowed: false },
      ...(op.monitoring ? [{ who: `monitoring, ${op.monitoring}`, type: 'monitoring' as const, rights: [op.monitoring], allowed: true }] : []),
      { who: 'connectivity, no right', type: 'connectivity', rights: [], allowed: false },
      { who: 'connectivity, ENVIRONMENT_ADMIN', type: 'connectivity', rights: ['ENVIRONMENT_ADMIN'], allowed: op.connectivity === 'ENVIRONMENT_ADMIN' },
    ];
    for (const c of cases) {
      const a = await account(c.type, c.rights, ends(op));
      const r = await a.call(op);
      if (c.allowed) {
        expect([401, 403], `${c.who}: ${r.status} ${r.key}`).not.toContain(r.status);
      } else {
        expect({ who: c.who, status: r.status, key: r.key }).toEqual({ who: c.who, status: 403, key: 'right_error' });
      }
    }
    // with its right, but naming another environment: that environment does not exist for it
    const [type, right] = op.monitoring ? (['monitoring', op.monitoring] as const) : (['connectivity', op.connectivity!] as const);
    for (const other of ['monitoring', 'connectivity'] as const) {
      const mine = await account(type, [right], true);
      const foreign = await account(other, other === 'monitoring' ? ['READ'] : ['ENVIRONMENT_ADMIN']);
      expect(await mine.call(op, foreign.env)).toEqual({ status: 404, key: 'not_found_error' });
    }
  });
});

describe('operations of the account itself', () => {
  it.each(accountOps.map((op) => [`${op.method} ${op.url}`, op] as const))(
    '%s answers an account without rights, in either environment type',
    async (_name, op) => {
      for (const type of ['monitoring', 'connectivity'] as const) {
        const r = await (await account(type, [], true)).call(op);
        expect({ type, status: r.status, key: r.key }).toEqual({ type, status: op.answer[0], key: op.answer[1] });
      }
    },
  );
});
