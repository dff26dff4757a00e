import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimDevices, unclaimDevices } from '../../src/connectivity/devices/claim.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, expectParameterError, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Tokens {
  claimTokens: { deviceHashId: string; claimToken: string }[];
}

async function devices(c: ApiClient, n: number): Promise<string[]> {
  const type = await addDeviceType(c);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = `claim-${randomBytes(6).toString('hex')}`;
    const r = await c.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: id,
      deviceTypeHashId: type,
      psk: 'abcd'.repeat(4),
      pskIdentity: id,
    });
    expect(r.status).toBe(200);
    out.push(r.body.hashId);
  }
  return out;
}

const envId = async (hashId: string) => (await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [hashId])).rows[0].id;
const getTokens = (c: ApiClient, deviceHashIds: unknown) => c.request<Tokens & ErrorBody>('POST', '/device/claim-tokens', { deviceHashIds });

describe('claim tokens', () => {
  it('gives one long random token per device, stores only its SHA-256, and a new token replaces the old', async () => {
    const c = await api.login('connectivity');
    const [d1, d2] = await devices(c, 2);
    const first = await getTokens(c, [d1, d2, d1]);
    expect(first.status).toBe(200);
    expect(first.body.claimTokens.map((t) => t.deviceHashId)).toEqual([d1, d2]);
    for (const t of first.body.claimTokens) {
      // ≥ 128 bits: 24 random bytes, base64url
      expect(t.claimToken).toMatch(/^[A-Za-z0-9_-]{32}$/);
    }
    expect(first.body.claimTokens[0].claimToken).not.toBe(first.body.claimTokens[1].claimToken);
    const stored = await api.ctx.db.query<{ token_sha256: Buffer }>(
      'SELECT t.token_sha256 FROM device_claim_token t JOIN device d ON d.id = t.device_id WHERE d.hash_id = $1',
      [d1],
    );
    expect(stored.rows).toHaveLength(1);
    expect(stored.rows[0].token_sha256.equals(createHash('sha256').update(first.body.claimTokens[0].claimToken).digest())).toBe(true);
    const everything = JSON.stringify((await api.ctx.db.query('SELECT * FROM device_claim_token')).rows);
    expect(everything).not.toContain(first.body.claimTokens[0].claimToken);

    const second = await getTokens(c, [d1]);
    expect(second.status).toBe(200);
    const monitoring = await api.login('monitoring');
    const mId = await envId(monitoring.environmentHashId);
    // the older token of d1 no longer works; nothing is claimed when one token of a batch is bad
    await expect(claimDevices(api.ctx.db, mId, [first.body.claimTokens[1].claimToken, first.body.claimTokens[0].claimToken])).rejects.toThrow('claimTokens[1]');
    expect((await c.request<{ environmentHashId: string | null }>('GET', `/device/${d2}`)).body.environmentHashId).toBeNull();
    expect(await claimDevices(api.ctx.db, mId, [second.body.claimTokens[0].claimToken, first.body.claimTokens[1].claimToken])).toEqual([d1, d2]);
    // a used token is spent
    await expect(claimDevices(api.ctx.db, mId, [second.body.claimTokens[0].claimToken])).rejects.toThrow('not a valid claim token');
  });

  it('refuses a token for a claimed device and refuses deleting a claimed device, all or nothing; after unclaim both work', async () => {
    const c = await api.login('connectivity');
    const [claimed, free] = await devices(c, 2);
    const token = (await getTokens(c, [claimed])).body.claimTokens[0].claimToken;
    const monitoring = await api.login('monitoring');
    const mId = await envId(monitoring.environmentHashId);
    await claimDevices(api.ctx.db, mId, [token]);

    const row = await c.request<{ environmentHashId: string | null; environmentName: string | null }>('GET', `/device/${claimed}`);
    expect(row.body).toMatchObject({ environmentHashId: monitoring.environmentHashId, environmentName: 'test monitoring' });

    const refused = await getTokens(c, [free, claimed]);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ key: 'conflict_error', message: expect.stringContaining(claimed) });
    expect(refused.body.message).toContain('claimed by a monitoring environment');
    expect((await api.ctx.db.query('SELECT 1 FROM device_claim_token t JOIN device d ON d.id = t.device_id WHERE d.hash_id = $1', [free])).rows).toHaveLength(
      0,
    );

    const del = await c.request<ErrorBody>('POST', '/device/delete', { hashIds: [free, claimed] });
    expect(del.status).toBe(409);
    expect(del.body.key).toBe('conflict_error');
    expect(del.body.message).toContain(claimed);
    expect(del.body.message).toContain('unclaimed');
    expect((await c.request('GET', `/device/${free}`)).status).toBe(200);
    expect((await c.request('GET', `/device/${claimed}`)).status).toBe(200);

    await unclaimDevices(api.ctx.db, mId, [claimed]);
    expect((await c.request<{ environmentHashId: string | null }>('GET', `/device/${claimed}`)).body.environmentHashId).toBeNull();
    expect((await getTokens(c, [claimed])).status).toBe(200);
    expect((await c.request('POST', '/device/delete', { hashIds: [free, claimed] })).status).toBe(204);
  });

  it('enforces 1 to 30 deviceHashIds, naming the field', async () => {
    const c = await api.login('connectivity');
    expectParameterError(await getTokens(c, []), 'deviceHashIds', '1');
    expectParameterError(
      await getTokens(
        c,
        Array.from({ length: 31 }, (_, i) => `d${i}`),
      ),
      'deviceHashIds',
      '30',
    );
    expectParameterError(await getTokens(c, { a: 1 }), 'deviceHashIds');
    expectParameterError(await getTokens(c, ['bad id!']), 'deviceHashIds');
    expectParameterError(await c.request('POST', '/device/claim-tokens', {}), 'deviceHashIds');
    const ids = await devices(c, 30);
    const r = await getTokens(c, ids);
    expect(r.status).toBe(200);
    expect(new Set(r.body.claimTokens.map((t) => t.claimToken)).size).toBe(30);
  });

  it("keeps environments apart: B gets no token for A's device, nor does a monitoring environment that has not claimed it", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const [d] = await devices(a, 1);
    const other = await getTokens(b, [d]);
    expect(other.status).toBe(404);
    expect(other.body.key).toBe('not_found_error');
    expect((await api.ctx.db.query('SELECT 1 FROM device_claim_token t JOIN device d ON d.id = t.device_id WHERE d.hash_id = $1', [d])).rows).toHaveLength(0);
    const m = await api.login('monitoring');
    expect((await getTokens(m, [d])).status).toBe(404);
    expect((await getTokens(await api.login('monitoring', ['READ', 'STATIC']), [d])).status).toBe(403);
  });
});
