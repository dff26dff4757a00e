import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll } from '../connectivity/fixtures.ts';

// The address rule (src/app/email.ts, docs/decisions.md) as a tenant meets it: user add and user update.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface UserAnswer {
  user: { hashId: string; email: string | null };
}

const admin = () => api.login('monitoring', ['READ', 'USERS', 'ENVIRONMENT_ADMIN']);
const person = (email: string) => ({ name: 'Grace Hopper', email, rights: ['READ'] });
const label63 = 'd'.repeat(63);
/** An address of exactly `length` characters: three 63-character labels, a filler label and `.eu`. */
const longAddress = (length: number) => `a@${label63}.${label63}.${label63}.${'d'.repeat(length - 2 - 3 * 64 - 3)}.eu`;

const REFUSED: [why: string, address: string][] = [
  ['a display name and angle brackets', 'x,<y@evil.test>'],
  ['two dots in a row in the domain', 'a@b..c'],
  ['a bracket after the domain', 'a@b.c>'],
  ['a domain without a dot', 'root@localhost'],
  ['a label starting with a hyphen', 'a@-b.example'],
  ['a label ending with a hyphen', 'a@b-.example'],
  ['a label of 64 characters', `a@${'d'.repeat(64)}.example`],
  ['an empty local part', '@example.com'],
  ['two @', 'a@b@example.com'],
  ['a space', 'a b@example.com'],
  ['a line break after the address', 'a@example.com\nBcc: victim@example.com'],
  ['a quoted local part', '"a b"@example.com'],
  ['an address literal', 'a@[127.0.0.1]'],
  ['a local part starting with a dot', '.a@example.com'],
  ['a local part ending with a dot', 'a.@example.com'],
  ['two dots in a row in the local part', 'a..b@example.com'],
  ['a local part of 65 characters', `${'l'.repeat(65)}@example.com`],
  ['255 characters in all', longAddress(255)],
  ['a character outside ASCII', 'jos\u00e9@example.com'],
  ['a domain ending with a dot', 'a@example.com.'],
];

describe('e-mail addresses a tenant gives', () => {
  it.each(REFUSED)('user add refuses %s with 400 parameter_error naming email, and adds no one', async (_why, address) => {
    const c = await admin();
    expectParameterError(await c.request('POST', '/user/', person(address)), 'email');
    const users = await findAll<UserAnswer>(c, '/user/');
    expect(users.map((u) => u.user.email)).toEqual([null]);
  });

  it('takes addresses of the rule at their limits, and stores the domain in lower case (the local part as given)', async () => {
    const c = await admin();
    const localPart64 = `${'l'.repeat(64)}@example.com`;
    const length254 = longAddress(254);
    expect([length254.length, longAddress(255).length]).toEqual([254, 255]);
    const given = [
      'First.Last+tag@Mail.Example.COM',
      "o'brien@example.co.uk",
      'x_y-z!#$%&*/=?^`{|}~@xn--bcher-kva.example',
      localPart64,
      `a@${label63}.example`,
      length254,
    ];
    const added: string[] = [];
    for (const email of given) {
      const r = await c.request<{ hashId: string }>('POST', '/user/', person(email));
      expect(r.status, `${email}: ${JSON.stringify(r.body)}`).toBe(200);
      added.push((await c.request<UserAnswer>('GET', `/user/${r.body.hashId}`)).body.user.email ?? '');
    }
    expect(added).toEqual(['First.Last+tag@mail.example.com', ...given.slice(1)]);
  });

  it('an address that differs only in the case of its domain is the same user (409)', async () => {
    const c = await admin();
    expect((await c.request('POST', '/user/', person('ada@example.com'))).status).toBe(200);
    const again = await c.request<{ key: string }>('POST', '/user/', person('ada@EXAMPLE.com'));
    expect([again.status, again.body.key]).toEqual([409, 'conflict_error']);
  });

  it('user update refuses what user add refuses, and keeps the address it had', async () => {
    const c: ApiClient = await admin();
    const { hashId } = (await c.request<{ hashId: string }>('POST', '/user/', person('kept@example.com'))).body;
    for (const [, address] of REFUSED.slice(0, 3)) expectParameterError(await c.request('POST', `/user/${hashId}`, { email: address }), 'email');
    expect((await c.request<UserAnswer>('GET', `/user/${hashId}`)).body.user.email).toBe('kept@example.com');
    expect((await c.request('POST', `/user/${hashId}`, { email: 'moved@Example.ORG' })).status).toBe(204);
    expect((await c.request<UserAnswer>('GET', `/user/${hashId}`)).body.user.email).toBe('moved@example.org');
  });
});
