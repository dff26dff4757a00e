import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

export const IDENTIFIER = `function handle(args: { request: WebRequest }): { deviceTypeHashId: string; deviceIdentifier: string } {
  const body = args.request.body as { type: 'json'; data: { id: string } };
  return { deviceTypeHashId: 'dt1', deviceIdentifier: body.data.id };
}
`;

interface Webhook {
  hashId: string;
  name: string;
  createdAt: string;
}
const URL_FORM = /^https:\/\/localhost:0\/webhook\/([a-z0-9]+)\/([A-Za-z0-9_-]+)$/;

describe('supplier webhooks', () => {
  it('adds with a URL carrying a 256-bit secret, gets, finds, updates and deletes', async () => {
    const c = await api.login('connectivity');
    const before = Date.now();
    const add = await c.request<{ hashId: string; url: string }>('POST', '/supplier-webhook/', { name: 'The Things Stack', identifier: IDENTIFIER });
    expect(add.status).toBe(200);
    const { hashId, url } = add.body;
    const [, urlHashId, secret] = URL_FORM.exec(url) ?? [];
    expect(urlHashId).toBe(hashId);
    // base64url of 32 random bytes: 43 characters, 256 bits
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32);

    const get = await c.request<{ webhook: Webhook; identifier: string; url: string }>('GET', `/supplier-webhook/${hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ webhook: { hashId, name: 'The Things Stack', createdAt: expect.any(String) }, identifier: IDENTIFIER, url });
    expect(Date.parse(get.body.webhook.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    const webhook = get.body.webhook;
    expect((await c.request('GET', '/supplier-webhook/')).body).toEqual({ nextPageOffset: null, rows: [{ webhook, url }] });

    // the secret is not stored in the clear
    const stored = await api.ctx.db.query<{ secret_sealed: Buffer }>('SELECT secret_sealed FROM supplier_webhook WHERE hash_id = $1', [hashId]);
    expect(stored.rows[0].secret_sealed.includes(Buffer.from(secret))).toBe(false);

    const newIdentifier = IDENTIFIER.replace("'dt1'", "'dt2'");
    expect((await c.request('POST', `/supplier-webhook/${hashId}`, { name: 'TTS EU1', identifier: newIdentifier })).status).toBe(204);
    expect((await c.request('GET', `/supplier-webhook/${hashId}`)).body).toEqual({ webhook: { ...webhook, name: 'TTS EU1' }, identifier: newIdentifier, url });
    expect((await c.request('POST', `/supplier-webhook/${hashId}`, { name: 'only the name' })).status).toBe(204);
    expect((await c.request<{ identifier: string }>('GET', `/supplier-webhook/${hashId}`)).body.identifier).toBe(newIdentifier);

    expect((await c.request('DELETE', `/supplier-webhook/${hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/supplier-webhook/${hashId}`)).status).toBe(404);
    expect((await c.request('POST', `/supplier-webhook/${hashId}`, { name: 'x' })).status).toBe(404);
    expect((await c.request('DELETE', `/supplier-webhook/${hashId}`)).status).toBe(404);
    expect((await c.request<{ rows: unknown[] }>('GET', '/supplier-webhook/')).body.rows).toEqual([]);
  });

  it('gives each webhook its own secret and finds page by page, by name', async () => {
    const c = await api.login('connectivity');
    const urls = new Set<string>();
    for (const name of ['bravo', 'alpha', 'charlie'])
      urls.add((await c.request<{ url: string }>('POST', '/supplier-webhook/', { name, identifier: IDENTIFIER })).body.url);
    const secrets = [...urls].map((u) => URL_FORM.exec(u)?.[2]);
    expect(new Set(secrets).size).toBe(3);
    const rows = await findAll<{ webhook: Webhook; url: string }>(c, '/supplier-webhook/?sortBy=name&descending=false');
    expect(rows.map((r) => r.webhook.name)).toEqual(['alpha', 'bravo', 'charlie']);
    expect(new Set(rows.map((r) => r.url))).toEqual(urls);
    const search = await c.request<{ rows: { webhook: Webhook }[] }>('GET', '/supplier-webhook/?search=RAV');
    expect(search.body.rows.map((r) => r.webhook.name)).toEqual(['bravo']);
  });

  it('compiles the identifier on save: a syntax error is a parameter_error with its position', async () => {
    const c = await api.login('connectivity');
    const broken = 'function handle(args) {\n  return {;\n}';
    const add = await c.request<ErrorBody>('POST', '/supplier-webhook/', { name: 'x', identifier: broken });
    expectParameterError(add, 'identifier', 'line 2');
    expect((await c.request<{ rows: unknown[] }>('GET', '/supplier-webhook/')).body.rows).toEqual([]);
    const ok = await c.request<{ hashId: string }>('POST', '/supplier-webhook/', { name: 'x', identifier: IDENTIFIER });
    expectParameterError(await c.request('POST', `/supplier-webhook/${ok.body.hashId}`, { identifier: broken }), 'identifier', 'line 2');
    expect((await c.request<{ identifier: string }>('GET', `/supplier-webhook/${ok.body.hashId}`)).body.identifier).toBe(IDENTIFIER);
  });

  it('enforces the limits, naming the field', async () => {
    const c = await api.login('connectivity');
    expectParameterError(await c.request('POST', '/supplier-webhook/', { name: 'x'.repeat(256), identifier: IDENTIFIER }), 'name', '255');
    expectParameterError(await c.request('POST', '/supplier-webhook/', { name: '', identifier: IDENTIFIER }), 'name');
    expectParameterError(await c.request('POST', '/supplier-webhook/', { name: 'x', identifier: 'x'.repeat(1_000_001) }), 'identifier', '1000000');
    expectParameterError(await c.request('POST', '/supplier-webhook/', { name: 'x' }), 'identifier');
    expectParameterError(await c.request('POST', '/supplier-webhook/', { name: 'x', identifier: IDENTIFIER, secret: 'mine' }), 'secret');
    const ok = await c.request<{ hashId: string }>('POST', '/supplier-webhook/', { name: 'x', identifier: IDENTIFIER });
    expectParameterError(await c.request('POST', `/supplier-webhook/${ok.body.hashId}`, { name: 'x'.repeat(256) }), 'name', '255');
  });

  it('keeps environments apart', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const add = await a.request<{ hashId: string }>('POST', '/supplier-webhook/', { name: 'of a', identifier: IDENTIFIER });
    const hashId = add.body.hashId;
    expect((await b.request('GET', `/supplier-webhook/${hashId}`)).status).toBe(404);
    expect((await b.request('POST', `/supplier-webhook/${hashId}`, { name: 'taken' })).status).toBe(404);
    expect((await b.request('DELETE', `/supplier-webhook/${hashId}`)).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', '/supplier-webhook/')).body.rows).toEqual([]);
    expect((await a.request<{ webhook: Webhook }>('GET', `/supplier-webhook/${hashId}`)).body.webhook.name).toBe('of a');
    // a monitoring account has no supplier webhooks
    const m = await api.login('monitoring');
    expect((await m.request('GET', '/supplier-webhook/')).status).toBe(403);
  });
});
