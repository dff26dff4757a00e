import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPinGroup } from './fixtures.ts';

// Labels and the labels of issues, over the REST interface: shapes, rights, tenants, limits.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'ISSUES'];
interface Label {
  hashId: string;
  name: string;
  color: string;
  createdAt: string;
  updatedAt: string;
  deletedAt: null;
}
interface IssueGet {
  issue: { hashId: string; updatedAt: string };
  labels: Label[];
}
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function addLabel(c: ApiClient, name: string, color = '#ff0000'): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', '/label/', { name, color });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(Object.keys(r.body)).toEqual(['hashId']);
  return r.body.hashId;
}

async function addIssue(c: ApiClient, labelHashIds?: string[]): Promise<string> {
  const pg = await addPinGroup(c);
  const r = await c.request<{ hashId: string }>('POST', '/issue/', {
    pinGroupHashId: pg.hashId,
    title: 'Pole leans',
    level: 1,
    comment: '',
    ...(labelHashIds ? { labelHashIds } : {}),
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.hashId;
}

const labelsOf = async (c: ApiClient, issueHashId: string) => (await c.request<IssueGet>('GET', `/issue/${issueHashId}`)).body.labels;
const issuesWith = async (c: ApiClient, labelHashId: string) =>
  (await findAll<{ issue: { hashId: string } }>(c, `/issue/?labelHashId=${labelHashId}`)).map((r) => r.issue.hashId);

describe('labels', () => {
  it('add, get, find, update and delete answer the SDK shapes', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const hashId = await addLabel(c, 'Fix this month', '#aB12cD');
    const get = await c.request('GET', `/label/${hashId}`);
    expect(get).toEqual({ status: 200, body: { hashId, name: 'Fix this month', color: '#aB12cD' } });
    const rows = await findAll<{ label: Label }>(c, '/label/');
    expect(rows).toEqual([
      {
        label: {
          hashId,
          name: 'Fix this month',
          color: '#aB12cD',
          createdAt: expect.stringMatching(ISO),
          updatedAt: expect.stringMatching(ISO),
          deletedAt: null,
        },
      },
    ]);
    expect((await c.request('POST', `/label/${hashId}`, { color: '#00ff00' })).status).toBe(204);
    expect((await c.request('GET', `/label/${hashId}`)).body).toEqual({ hashId, name: 'Fix this month', color: '#00ff00' });
    expect((await c.request('POST', `/label/${hashId}`, { name: 'Next month' })).status).toBe(204);
    expect((await c.request('GET', `/label/${hashId}`)).body).toEqual({ hashId, name: 'Next month', color: '#00ff00' });
    expect((await c.request('DELETE', `/label/${hashId}`)).status).toBe(204);
    expect((await c.request<ErrorBody>('GET', `/label/${hashId}`)).status).toBe(404);
    expect((await c.request('POST', `/label/${hashId}`, { name: 'x' })).status).toBe(404);
    expect((await c.request('DELETE', `/label/${hashId}`)).status).toBe(404);
    expect(await findAll(c, '/label/')).toEqual([]);
  });

  it('find sorts by name (the default, descending as the SDK defaults), pages and searches', async () => {
    const c = await api.login('monitoring', RIGHTS);
    for (const name of ['delta', 'alpha', 'charlie', 'bravo']) await addLabel(c, name);
    expect((await findAll<{ label: Label }>(c, '/label/', 3)).map((r) => r.label.name)).toEqual(['delta', 'charlie', 'bravo', 'alpha']);
    expect((await findAll<{ label: Label }>(c, '/label/?sortBy=name&descending=false')).map((r) => r.label.name)).toEqual([
      'alpha',
      'bravo',
      'charlie',
      'delta',
    ]);
    expect((await findAll<{ label: Label }>(c, '/label/?search=RAV')).map((r) => r.label.name)).toEqual(['bravo']);
    expectParameterError(await c.request('GET', '/label/?sortBy=color'), 'sortBy');
  });

  it('changing a label needs ISSUES, reading it READ; a connectivity environment has no labels', async () => {
    const owner = await api.login('monitoring', RIGHTS);
    const readOnly = await api.login('monitoring', ['READ']);
    const issuesOnly = await api.login('monitoring', ['ISSUES']);
    const own = await addLabel(issuesOnly, 'mine');
    for (const r of [
      await readOnly.request<ErrorBody>('POST', '/label/', { name: 'x', color: '#000000' }),
      await issuesOnly.request<ErrorBody>('GET', '/label/'),
      await issuesOnly.request<ErrorBody>('GET', `/label/${own}`),
    ])
      expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    const readable = await addLabel(owner, 'shared');
    for (const r of [
      await readOnly.request<ErrorBody>('POST', `/label/${readable}`, { name: 'y' }),
      await readOnly.request<ErrorBody>('DELETE', `/label/${readable}`),
    ])
      expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    const supplier = await api.login('connectivity');
    const r = await supplier.request<ErrorBody>('GET', '/label/');
    expect([r.status, r.body.key]).toEqual([403, 'right_error']);
  });

  it("another environment's label is not found, not listed and cannot tag an issue", async () => {
    const a = await api.login('monitoring', RIGHTS);
    const b = await api.login('monitoring', RIGHTS);
    const theirs = await addLabel(a, 'theirs');
    expect((await b.request('GET', `/label/${theirs}`)).status).toBe(404);
    expect((await b.request('POST', `/label/${theirs}`, { name: 'stolen' })).status).toBe(404);
    expect((await b.request('DELETE', `/label/${theirs}`)).status).toBe(404);
    expect(await findAll(b, '/label/')).toEqual([]);
    const pg = await addPinGroup(b);
    expectParameterError(
      await b.request('POST', '/issue/', { pinGroupHashId: pg.hashId, title: 't', level: 0, comment: '', labelHashIds: [theirs] }),
      'labelHashIds[0]',
      theirs,
    );
    const issue = await addIssue(b);
    expectParameterError(await b.request('POST', `/issue/${issue}`, { labelHashIds: [theirs] }), 'labelHashIds[0]', theirs);
    expect(await issuesWith(b, theirs)).toEqual([]);
    expect((await a.request('GET', `/label/${theirs}`)).body).toEqual({ hashId: theirs, name: 'theirs', color: '#ff0000' });
  });

  it('limits are parameter_errors naming the field', async () => {
    const c = await api.login('monitoring', RIGHTS);
    expectParameterError(await c.request('POST', '/label/', { name: '', color: '#000000' }), 'name');
    expectParameterError(await c.request('POST', '/label/', { name: 'x'.repeat(256), color: '#000000' }), 'name', '255');
    expectParameterError(await c.request('POST', '/label/', { name: 'x', color: 'red' }), 'color');
    expectParameterError(await c.request('POST', '/label/', { name: 'x', color: '#0000000' }), 'color');
    expectParameterError(await c.request('POST', '/label/', { color: '#000000' }), 'name');
    expectParameterError(await c.request('POST', '/label/', { name: 'x' }), 'color');
    const hashId = await addLabel(c, 'x'.repeat(255));
    expectParameterError(await c.request('POST', `/label/${hashId}`, { color: '#12345g' }), 'color');
    expectParameterError(await c.request('POST', `/label/${hashId}`, { name: 'x'.repeat(256) }), 'name');
  });
});

describe('issue labels', () => {
  it('issue add tags the issue: get answers the labels in the order given, find filters by labelHashId', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const [urgent, later] = [await addLabel(c, 'urgent', '#ff0000'), await addLabel(c, 'later', '#0000ff')];
    const tagged = await addIssue(c, [later, urgent]);
    const untagged = await addIssue(c);
    expect(await labelsOf(c, tagged)).toEqual([
      { hashId: later, name: 'later', color: '#0000ff', createdAt: expect.stringMatching(ISO), updatedAt: expect.stringMatching(ISO), deletedAt: null },
      { hashId: urgent, name: 'urgent', color: '#ff0000', createdAt: expect.stringMatching(ISO), updatedAt: expect.stringMatching(ISO), deletedAt: null },
    ]);
    expect(await labelsOf(c, untagged)).toEqual([]);
    expect(await issuesWith(c, urgent)).toEqual([tagged]);
    expect(await issuesWith(c, later)).toEqual([tagged]);
    // a label renamed is shown renamed on its issues
    await c.request('POST', `/label/${urgent}`, { name: 'very urgent' });
    expect((await labelsOf(c, tagged)).map((l) => l.name)).toEqual(['later', 'very urgent']);
  });

  it('issue update replaces the labels (an empty list removes them) and counts as a change of the issue', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const [a, b] = [await addLabel(c, 'a'), await addLabel(c, 'b')];
    const issue = await addIssue(c, [a]);
    const before = (await c.request<IssueGet>('GET', `/issue/${issue}`)).body.issue.updatedAt;
    expect((await c.request('POST', `/issue/${issue}`, { labelHashIds: [b, a, b] })).status).toBe(204);
    expect((await labelsOf(c, issue)).map((l) => l.hashId)).toEqual([b, a]);
    expect(await issuesWith(c, b)).toEqual([issue]);
    expect((await findAll<{ issue: { hashId: string } }>(c, `/issue/?updatedAfter=${before}`)).map((r) => r.issue.hashId)).toEqual([issue]);
    expect((await c.request('POST', `/issue/${issue}`, { title: 'untouched labels' })).status).toBe(204);
    expect((await labelsOf(c, issue)).map((l) => l.hashId)).toEqual([b, a]);
    expect((await c.request('POST', `/issue/${issue}`, { labelHashIds: [] })).status).toBe(204);
    expect(await labelsOf(c, issue)).toEqual([]);
    expect(await issuesWith(c, a)).toEqual([]);
  });

  it('a label deleted while an issue update tags with it is refused or removed, never left on the issue', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const issue = await addIssue(c);
    for (let i = 0; i < 30; i++) {
      const label = await addLabel(c, `race ${i}`);
      const [update] = await Promise.all([c.request('POST', `/issue/${issue}`, { labelHashIds: [label] }), c.request('DELETE', `/label/${label}`)]);
      expect([204, 400]).toContain(update.status);
      expect(await labelsOf(c, issue)).toEqual([]);
    }
  });

  it('deleting a label removes it from every issue it tagged', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const [gone, kept] = [await addLabel(c, 'gone'), await addLabel(c, 'kept')];
    const first = await addIssue(c, [gone, kept]);
    const second = await addIssue(c, [gone]);
    expect((await c.request('DELETE', `/label/${gone}`)).status).toBe(204);
    expect((await labelsOf(c, first)).map((l) => l.hashId)).toEqual([kept]);
    expect(await labelsOf(c, second)).toEqual([]);
    expect(await issuesWith(c, gone)).toEqual([]);
    // nor can it tag an issue again
    expectParameterError(await c.request('POST', `/issue/${second}`, { labelHashIds: [gone] }), 'labelHashIds[0]');
  });
});
