// The customer's view: the live issue stream (GET /issue/stream) against the whole service in one process, tenant
// isolated; and (once people sign in on main) the customer's pages in a real browser.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { closeContext } from '../../src/app/bootstrap.ts';
import type { AppContext } from '../../src/app/context.ts';
import { liveIssueChannel } from '../../src/monitoring/issues/stream.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { until, waitFor } from '../support/until.ts';

interface Tenant { environmentHashId: string; environmentId: number; jwt: string; request<T>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }> }

async function tenant(ctx: AppContext, base: string, name: string): Promise<Tenant> {
  const env = await createEnvironment(ctx.db, 'monitoring', name);
  const account = await createMachineAccount(ctx.db, env.hashId, ['READ', 'STATIC', 'ISSUES']);
  const login = await fetch(`${base}/authentication/machine-login`, { method: 'POST', headers: { 'content-type': 'application/json', 'api-version': '8' }, body: JSON.stringify({ assertion: account.assertion }) });
  const { jwt } = (await login.json()) as { jwt: string };
  return {
    environmentHashId: env.hashId, environmentId: Number(env.id), jwt,
    async request<T>(method: string, url: string, body?: unknown) {
      const res = await fetch(`${base}${url}`, {
        method, body: body === undefined ? undefined : JSON.stringify(body),
        headers: { 'api-version': '8', 'environment-hash-id': env.hashId, authorization: `Bearer ${jwt}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
    },
  };
}

interface Block { event?: string; id?: string; data?: string; retry?: string; comment?: string }

/** An open event stream, read as it arrives. */
async function openStream(base: string, t: Tenant) {
  const abort = new AbortController();
  // as an EventSource opens it: the headers as query parameters
  const res = await fetch(`${base}/issue/stream?apiVersion=8&environmentHashId=${t.environmentHashId}`, { headers: { authorization: `Bearer ${t.jwt}` }, signal: abort.signal });
  const blocks: Block[] = [];
  if (res.status === 200 && res.body) {
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    void (async () => {
      let buffer = '';
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block: Block = {};
            for (const line of buffer.slice(0, end).split('\n')) {
              if (line.startsWith(':')) block.comment = line.slice(1).trim();
              else (block as Record<string, string>)[line.slice(0, line.indexOf(':'))] = line.slice(line.indexOf(':') + 1).trimStart();
            }
            blocks.push(block);
            buffer = buffer.slice(end + 2);
          }
        }
      } catch {
        // aborted
      }
    })();
  } else {
    await res.text();
  }
  return {
    status: res.status, contentType: res.headers.get('content-type'), blocks,
    events: () => blocks.filter((b) => b.event === 'issue').map((b) => ({ id: b.id!, data: JSON.parse(b.data!) as { kind: string; issue: { hashId: string; title: string; level: number } } })),
    close: () => abort.abort(),
  };
}

describe('GET /issue/stream', () => {
  let ctx: AppContext;
  let service: RunningService;
  let base: string;
  beforeAll(async () => {
    ctx = await testContext();
    service = await startService(ctx, ['all']);
    base = `http://127.0.0.1:${service.apiPort()}`;
  }, 60_000);
  afterAll(async () => {
    await service?.stop();
    await closeContext(ctx);
  });

  it("streams an environment's new issues, comments and closing as they happen; another environment's stream gets none of them", async () => {
    const a = await tenant(ctx, base, 'customer A');
    const b = await tenant(ctx, base, 'customer B');
    const pinGroupOf = async (t: Tenant) => (await t.request<{ hashId: string }>('POST', '/graph/pin-group', { symbolKey: 'post', geometry: null, fields: { id: 'Post' } })).body.hashId;
    const [pgA, pgB] = [await pinGroupOf(a), await pinGroupOf(b)];
    const streamA = await openStream(base, a);
    const streamB = await openStream(base, b);
    expect(streamA.status).toBe(200);
    expect(streamA.contentType).toBe('text/event-stream; charset=utf-8');
    expect(streamB.status).toBe(200);

    const added = await a.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: pgA, title: 'Pole leans', level: 2, comment: '' });
    expect(added.status).toBe(200);
    await waitFor(() => streamA.events().length >= 1, 15_000);
    expect(streamA.events()[0]).toMatchObject({ id: added.body.hashId, data: { kind: 'opened', issue: { hashId: added.body.hashId, title: 'Pole leans', level: 2 } } });

    expect((await a.request('POST', `/issue/${added.body.hashId}/comment`, { comment: 'On my way', closeIssue: true })).status).toBe(200);
    await waitFor(() => streamA.events().some((e) => e.data.kind === 'closed'), 15_000);
    expect(streamA.events().map((e) => e.data.kind)).toEqual(expect.arrayContaining(['opened', 'comment', 'closed']));

    // B's own issue reaches B; A's never did
    const addedB = await b.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: pgB, title: 'Flooded', level: 1, comment: '' });
    await waitFor(() => streamB.events().length >= 1, 15_000);
    expect(streamB.events().map((e) => e.id)).toEqual([addedB.body.hashId]);
    expect(streamA.events().every((e) => e.id === added.body.hashId)).toBe(true);

    // without credentials, nothing
    expect((await fetch(`${base}/issue/stream?apiVersion=8&environmentHashId=${a.environmentHashId}`)).status).toBe(401);
    streamA.close();
    streamB.close();
    // the channel is left once its last stream is gone
    await until(async () => Number(((await ctx.redis.pubsub('NUMSUB', liveIssueChannel(ctx.config, a.environmentId))) as [string, number])[1]), (n) => n === 0, 'the channel left', 10_000);
  }, 60_000);
});
