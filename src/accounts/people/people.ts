// What a person does to get in: accept an invitation or a reset (set a password with the mail's token), sign in
// with address and password (and a code where the chosen row has two-factor authentication), switch between the
// environments they are a user of. A person is the set of live 'person' rows with one address; the environment a
// session starts in is the one asked for, else the one used last, else the first by name.
//
// Guessing is limited as machine logins are (src/accounts/login-limits.ts): per source address and per person
// (`person:<address>`). An unknown address costs the same scrypt as a known one, and gets the same answer.

import type { AppContext } from '../../app/context.ts';
import type { Queryable } from '../../app/db.ts';
import { AppError, AuthenticationError, NotFoundError } from '../../app/errors.ts';
import { queueStored, storeMails } from '../../mail/queue.ts';
import { beginLogin, type LoginAttempt } from '../login-limits.ts';
import { personAccounts, type Account, type EnvironmentRecord } from '../store.ts';
import { acceptCode } from '../two-factor/store.ts';
import { environmentLocale, userView, type Locale } from '../user-view.ts';
import { environmentAddedMail, invitationMail, passwordResetMail, setPasswordLink } from './mails.ts';
import { dummyPasswordHash, hashPassword, verifyPassword } from './passwords.ts';
import { deletePersonSessions, switchSession, type PersonSession } from './sessions.ts';
import { newToken, storeToken, tokenEmail, useToken } from './tokens.ts';

/** 401 second_factor_required: the row has two-factor authentication and no code came. */
export class SecondFactorRequiredError extends AppError {
  constructor() {
    super('second_factor_required', 401, 'This user has two-factor authentication in this environment: send the code the authenticator app shows as `code`');
  }
}

const limitKey = (email: string) => `person:${email}`;
const localeOf = (account: Account) => userView(account, account.environment).locale as Locale;

/** The row a session starts in: the environment asked for, else the one used last, else the first by name. */
function chooseRow(accounts: Account[], environmentHashId: string | undefined, lastEnvironmentId: number | null): Account {
  return accounts.find((a) => a.environment.hashId === environmentHashId) ?? accounts.find((a) => a.environment.id === lastEnvironmentId) ?? accounts[0];
}

/**
 * The row's second factor, as a login attempt: nothing to do without one; without a code 401
 * second_factor_required (the password was right: that failure is given back); a wrong or used code stays counted.
 */
async function checkCode(ctx: AppContext, attempt: LoginAttempt, account: Account, code: string | undefined): Promise<void> {
  if (!account.twoFactorEnabledAt) return;
  if (code === undefined || code === '') {
    await attempt.succeeded();
    throw new SecondFactorRequiredError();
  }
  if (!(await acceptCode(ctx, account, code))) throw new AuthenticationError('The two-factor authentication code is wrong or was used already');
}

async function rememberEnvironment(db: Queryable, email: string, environmentId: number): Promise<void> {
  await db.query('UPDATE person_login SET last_environment_id = $2 WHERE email = $1', [email, environmentId]);
}

export interface SignIn {
  email: string;
  password: string;
  code?: string;
  environmentHashId?: string;
}

/** Checks address, password and code; the row the session is to act as. 401 (or 429 past the limits) otherwise. */
export async function signIn(ctx: AppContext, input: SignIn, address: string): Promise<Account> {
  const email = input.email.toLowerCase();
  const attempt = await beginLogin(ctx, address, limitKey(email));
  const { rows } = await ctx.db.query<{ password_hash: string; last_environment_id: number | null }>(
    'SELECT password_hash, last_environment_id FROM person_login WHERE email = $1',
    [email],
  );
  const matches = await verifyPassword(input.password, rows[0]?.password_hash ?? (await dummyPasswordHash()));
  const accounts = matches && rows.length > 0 ? await personAccounts(ctx.db, email) : [];
  if (accounts.length === 0) throw new AuthenticationError('The email address or the password is wrong');
  const account = chooseRow(accounts, input.environmentHashId, rows[0].last_environment_id);
  await checkCode(ctx, attempt, account, input.code);
  await attempt.succeeded();
  await rememberEnvironment(ctx.db, email, account.environment.id);
  return account;
}

/** Moves the session to the person's row in another environment (its code, when it has two-factor authentication). */
export async function switchEnvironment(
  ctx: AppContext,
  session: PersonSession,
  environmentHashId: string,
  code: string | undefined,
  address: string,
): Promise<{ session: PersonSession; account: Account }> {
  const target = (await personAccounts(ctx.db, session.email)).find((a) => a.environment.hashId === environmentHashId);
  if (!target) throw new NotFoundError('environment', environmentHashId);
  if (target.twoFactorEnabledAt) {
    const attempt = await beginLogin(ctx, address, limitKey(session.email));
    await checkCode(ctx, attempt, target, code);
    await attempt.succeeded();
  }
  const switched = await switchSession(ctx.db, session, target.id, target.twoFactorEnabledAt);
  await rememberEnvironment(ctx.db, session.email, target.environment.id);
  return { session: switched, account: target };
}

const BAD_TOKEN = 'The link is not valid: it was used already or has expired. Ask for a new one (password reset)';

/** Sets the password of the token's address; the token and every other of the address are used up, its sessions end. */
export async function setPassword(ctx: AppContext, token: string, password: string): Promise<void> {
  // the token first: an invalid one costs no scrypt
  if (!(await tokenEmail(ctx.db, token))) throw new AuthenticationError(BAD_TOKEN);
  const hash = await hashPassword(password);
  await ctx.db.tx(async (client) => {
    const email = await useToken(client, token);
    if (!email) throw new AuthenticationError(BAD_TOKEN);
    await client.query(
      `INSERT INTO person_login (email, password_hash) VALUES ($1, $2)
       ON CONFLICT (email) DO UPDATE SET password_hash = EXCLUDED.password_hash, password_set_at = now()`,
      [email, hash],
    );
    await deletePersonSessions(client, email);
  });
}

/** Does the password check of a person's row (the two-factor routes' `password`). */
export async function checkPersonPassword(db: Queryable, account: Account, password: string): Promise<boolean> {
  const { rows } = await db.query<{ password_hash: string }>('SELECT password_hash FROM person_login WHERE email = lower($1)', [account.email ?? '']);
  return verifyPassword(password, rows[0]?.password_hash ?? (await dummyPasswordHash()));
}

/**
 * password-reset: counted against the address's and the person's login limits (so nobody floods a mailbox), then,
 * when the address is a person's, the mail is stored and queued by `send`, which the route runs after answering:
 * the answer takes as long either way.
 */
export async function requestPasswordReset(ctx: AppContext, email: string, address: string): Promise<{ send(): Promise<void> }> {
  const lower = email.toLowerCase();
  await beginLogin(ctx, address, `reset:${lower}`);
  return {
    async send() {
      const accounts = await personAccounts(ctx.db, lower);
      if (accounts.length === 0) return;
      const { rows } = await ctx.db.query<{ last_environment_id: number | null }>('SELECT last_environment_id FROM person_login WHERE email = $1', [lower]);
      const account = chooseRow(accounts, undefined, rows[0]?.last_environment_id ?? null);
      const token = newToken();
      const mail = passwordResetMail(localeOf(account), { email: account.email ?? lower, link: setPasswordLink(ctx.config.publicUrl, token) });
      const hashIds = await ctx.db.tx(async (client) => {
        // environment null: a mail with a live link is nobody's notification to read (GET /notification)
        const ids = await storeMails(ctx, client, [
          { environmentId: null, accountId: account.id, kind: 'passwordReset', to: [account.email ?? lower], ...mail },
        ]);
        await storeToken(client, token, lower, 'reset', ids[0] ?? null);
        return ids;
      });
      await queueStored(ctx, hashIds);
    },
  };
}

export interface Invitee {
  accountId: number;
  email: string;
  locale: Locale | null;
  environment: EnvironmentRecord;
  inviter: string;
}

/**
 * The mail of a person just added as a user (in `db`, the transaction that adds them): an invitation with a link to
 * choose a password, or, for a person who has one, word that they were added to the environment. Their hashIds,
 * to queue once that transaction is committed.
 */
export async function invitePerson(ctx: AppContext, db: Queryable, p: Invitee): Promise<string[]> {
  const lower = p.email.toLowerCase();
  const locale = p.locale ?? environmentLocale(p.environment);
  const { rows } = await db.query('SELECT 1 FROM person_login WHERE email = $1', [lower]);
  if (rows.length > 0) {
    const mail = environmentAddedMail(locale, { environment: p.environment.name, inviter: p.inviter, url: ctx.config.publicUrl });
    return storeMails(ctx, db, [{ environmentId: p.environment.id, accountId: p.accountId, kind: 'environmentAdded', to: [p.email], ...mail }]);
  }
  const token = newToken();
  const mail = invitationMail(locale, { environment: p.environment.name, inviter: p.inviter, link: setPasswordLink(ctx.config.publicUrl, token) });
  // environment null: a mail with a live link is nobody's notification to read (GET /notification)
  const ids = await storeMails(ctx, db, [{ environmentId: null, accountId: p.accountId, kind: 'invitation', to: [p.email], ...mail }]);
  await storeToken(db, token, lower, 'invitation', ids[0] ?? null);
  return ids;
}
