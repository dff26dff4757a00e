import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { AuthenticationError, ParameterError } from '../../app/errors.ts';
import { signToken } from '../authenticate.ts';
import { beginLogin } from '../login-limits.ts';
import { checkPersonPassword } from '../people/people.ts';
import { markSecondFactor } from '../people/sessions.ts';
import { verifyAccountSecret, type Account } from '../store.ts';
import { acceptCode, disableTwoFactor, enableTwoFactor, newPendingKey } from './store.ts';
import { base32Encode, TOTP_DIGITS, TOTP_STEP_SECONDS } from './totp.ts';

// The SDK's two-factor-authentication routes. An account's "password" is the secret of its
// assertion (`<hashId>:<secret>`; the whole assertion is taken too). Where a code must come with a
// credential the SDK's schema has no field for (machine-login's assertion, disable's password), it
// follows it after a colon: `<hashId>:<secret>:<code>`, `<secret>:<code>`.
//
// Every route here that checks the secret or a code does so under the login limits
// (src/accounts/login-limits.ts), drawing on the same per-account budget as machine-login: a token is
// not a licence to guess the secret or the codes faster than a login could.

const ISSUER = 'gridgate';

/** A credential and the six-digit TOTP code after its last colon, if it has one. */
export function splitCode(credential: string): { credential: string; code: string | null } {
  const match = /^(.*):(\d{6})$/s.exec(credential);
  return match ? { credential: match[1], code: match[2] } : { credential, code: null };
}

/** A login's second factor: nothing when the account has none, else its code, good and not used before. */
export async function checkSecondFactor(ctx: AppContext, account: Account, code: string | null): Promise<void> {
  if (!account.twoFactorEnabledAt) return;
  if (code === null) throw new AuthenticationError('This account has two-factor authentication: send the assertion as <hashId>:<secret>:<code>');
  if (!(await acceptCode(ctx, account, code))) throw new AuthenticationError('The two-factor authentication code is wrong or was used already');
}

/**
 * Checks the password field (the account's secret, or its whole assertion; a person's console password);
 * parameter_error naming `password`.
 */
async function checkPassword(ctx: AppContext, account: Account, password: string): Promise<void> {
  if (account.kind === 'person') {
    if (!(await checkPersonPassword(ctx.db, account, password))) throw new ParameterError('password: not the password of this person');
    return;
  }
  const secret = password.startsWith(`${account.hashId}:`) ? password.slice(account.hashId.length + 1) : password;
  if (!(await verifyAccountSecret(ctx.db, account, secret))) throw new ParameterError('password: not the secret of this account');
}

const keyuri = (account: Account, key: Buffer) => {
  const label = encodeURIComponent(`${ISSUER}:${account.email ?? account.name}`);
  return `otpauth://totp/${label}?secret=${base32Encode(key)}&issuer=${ISSUER}&algorithm=SHA1&digits=${TOTP_DIGITS}&period=${TOTP_STEP_SECONDS}`;
};

/**
 * Runs a route's checks of the secret or a code as a login attempt: 429 rate_limit_error while the
 * caller's address or account is over its limit (before anything is checked, so the right answer is
 * refused too); a check that throws leaves its failure counted, one that passes gives it back.
 */
async function asLoginAttempt<T>(ctx: AppContext, request: FastifyRequest, run: () => Promise<T>): Promise<T> {
  const attempt = await beginLogin(ctx, request.ip, request.account.hashId);
  const result = await run();
  await attempt.succeeded();
  return result;
}

const LIMITED = ' A wrong secret or code counts as a failed login: 429 rate_limit_error past the login limits.';

const Password = Type.Object({ password: Type.String({ minLength: 1, maxLength: 1024 }) });

export async function twoFactorRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const config = { auth: 'account' as const };
  // what an account needs to set a second factor up, open to it where its environment enforces one (./enforce.ts)
  const setup = { ...config, twoFactorSetup: true };

  app.post(
    '/two-factor-authentication/get-keyuri',
    {
      config: setup,
      schema: {
        tags: ['two-factor-authentication'],
        summary: 'getKeyuri',
        body: Password,
        description:
          "password: the account's secret or assertion; through a person's console session, their password. A new TOTP key (pending until enable); keyuri and secret are null when two-factor authentication is on already." +
          LIMITED,
      },
    },
    async (request) => {
      const account = request.account;
      await asLoginAttempt(ctx, request, () => checkPassword(ctx, account, request.body.password));
      const key = await newPendingKey(ctx, account);
      return key ? { keyuri: keyuri(account, key), secret: base32Encode(key) } : { keyuri: null, secret: null };
    },
  );

  app.post(
    '/two-factor-authentication/enable',
    {
      config: setup,
      schema: {
        tags: ['two-factor-authentication'],
        summary: 'enable',
        body: Type.Object({ code: Type.String({ minLength: 1, maxLength: 255 }) }),
        description:
          "The tokens issued before stop working; use the jwt answered. Through a person's console session: the session stays signed in and jwt is null." +
          LIMITED,
      },
    },
    async (request) => {
      const account = request.account;
      const enabledAt = await asLoginAttempt(ctx, request, () => enableTwoFactor(ctx, account, request.body.code));
      // a console session stays signed in, verified for the new second factor; people have no tokens
      if (request.personSession) {
        await markSecondFactor(ctx.db, request.personSession, enabledAt);
        return { jwt: null };
      }
      return { jwt: await signToken(ctx, { ...account, twoFactorEnabledAt: enabledAt }) };
    },
  );

  app.post(
    '/two-factor-authentication/disable',
    {
      config,
      schema: {
        tags: ['two-factor-authentication'],
        summary: 'disable',
        body: Password,
        description: 'password: the secret (a person: their password) followed by :<code> when two-factor authentication is on.' + LIMITED,
      },
    },
    async (request, reply) => {
      const account = request.account;
      const { credential, code } = splitCode(request.body.password);
      await asLoginAttempt(ctx, request, async () => {
        await checkPassword(ctx, account, credential);
        if (account.twoFactorEnabledAt) {
          if (code === null) throw new ParameterError('password: follow the secret with :<code>, the code the authenticator app shows');
          if (!(await acceptCode(ctx, account, code))) throw new ParameterError('password: the code is wrong or was used already');
        }
      });
      await disableTwoFactor(ctx, account);
      if (request.personSession) await markSecondFactor(ctx.db, request.personSession, null);
      reply.status(204);
    },
  );
}
