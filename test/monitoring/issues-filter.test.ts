import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { addPinGroup } from './fixtures.ts';

// issue find's `closed` (not in the SDK: the console's issue list asks for the open issues only, a page at a time):
// open or closed only, paged across the filter, within the environment, and limits as parameter_error.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'ISSUES'];
interface Page {
  nextPageOffset: string | null;
  rows: { issue: { hashId: string; title: string; closedAt: string | null } }[];
}

/** Every page of a find, followed through nextPageOffset: the titles in order and the number of pages. */
async function allPages(c: ApiClient, query: string) {
  const titles: string[] = [];
  let pages = 0;
  let offset: string | null = null;
  do {
    const r: { status: number; body: Page } = await c.request<Page>('GET', `/issue/?${query}${offset ? `&offset=${offset}` : ''}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    pages++;
    titles.push(...r.body.rows.map((row) => row.issue.title));
    offset = r.body.nextPageOffset;
  } while (offset !== null && pages < 20);
  return { titles, pages };
}

describe('issue find: closed', () => {
  let c: ApiClient;
  const open: string[] = [];
  const closed: string[] = [];
  beforeAll(async () => {
    c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, 'valve');
    // interleaved, oldest first: seven open, six closed
    for (let i = 0; i < 13; i++) {
      const title = `issue ${String(i).padStart(2, '0')}`;
      const added = await c.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: pg.hashId, title, level: (i % 3) as 0 | 1 | 2, comment: '' });
      expect(added.status, JSON.stringify(added.body)).toBe(200);
      if (i % 2 === 1) {
        expect((await c.request('POST', `/issue/${added.body.hashId}`, { closed: true })).status).toBe(204);
        closed.push(title);
      } else {
        open.push(title);
      }
    }
    // another environment's issues, open and closed, at the same time: never in this one's answers
    const other = await api.login('monitoring', RIGHTS);
    const otherPg = await addPinGroup(other, 'valve');
    for (const title of ['foreign open', 'foreign closed']) {
      const added = await other.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: otherPg.hashId, title, level: 2, comment: '' });
      expect(added.status).toBe(200);
      if (title === 'foreign closed') expect((await other.request('POST', `/issue/${added.body.hashId}`, { closed: true })).status).toBe(204);
    }
  });

  it('closed=false answers the open issues only, newest first, every page full until the last', async () => {
    const { titles, pages } = await allPages(c, 'closed=false&rowsPerPage=3');
    expect(titles).toEqual([...open].reverse());
    // 7 open issues in pages of 3: 3 pages, whatever the closed ones between them
    expect(pages).toBe(3);
  });

  it('closed=true answers the closed issues only', async () => {
    const { titles, pages } = await allPages(c, 'closed=true&rowsPerPage=4');
    expect(titles).toEqual([...closed].reverse());
    expect(pages).toBe(2);
  });

  it('pages across the filter with the other sort orders too', async () => {
    const byLevel = await allPages(c, 'closed=false&rowsPerPage=2&sortBy=level&descending=false');
    expect(byLevel.titles.toSorted()).toEqual(open.toSorted());
    expect(byLevel.pages).toBe(4);
    const ascending = await allPages(c, 'closed=false&rowsPerPage=5&descending=false');
    expect(ascending.titles).toEqual(open);
  });

  it('absent, empty or null: open and closed, as the SDK expects', async () => {
    const every = [...open, ...closed].toSorted();
    expect((await allPages(c, 'rowsPerPage=100')).titles.toSorted()).toEqual(every);
    expect((await allPages(c, 'rowsPerPage=100&closed=')).titles.toSorted()).toEqual(every);
  });

  it('combines with search and the other filters', async () => {
    expect((await allPages(c, 'closed=false&search=issue%2004')).titles).toEqual(['issue 04']);
    expect((await allPages(c, 'closed=true&search=issue%2004')).titles).toEqual([]);
  });

  it('refuses a value that is not a boolean with a parameter_error naming closed', async () => {
    expectParameterError(await c.request('GET', '/issue/?closed=maybe'), 'closed');
    expectParameterError(await c.request('GET', '/issue/?closed=open'), 'closed');
  });
});
