import { SignJWT, jwtVerify } from 'jose';
import type { FastifyRequest } from 'fastify';
import { AuthenticationError } from '../app/errors.ts';
import { loadAccount, type Account } from './store.ts';
import { refuseWithoutSecondFactor } from './two-factor/enforce.ts';
import { authenticateSession } from './people/session-auth.ts';
import { sessionCookie } from './people/sessions.ts';
import type { AppContext } from '../app/context.ts';

// Who is asking: a bearer token (machine accounts) or a person's console session cookie, resolved to a live
// account. What the account may then do is the route's business (src/http/rights.ts).

/** A token for the account; with two-factor authentication on, it carries when that was switched on (`tfa`). */
export async function signToken(ctx: AppContext, account: Account): Promise<string> {
  const tfa = account.twoFactorEnabledAt?.getTime();
  return new SignJWT({ env: account.environment.hashId, ...(tfa === undefined ? {} : { tfa }) })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(account.hashId)
    .setIssuedAt()
    .setExpirationTime(`${ctx.config.tokenLifetimeSeconds}s`)
    .sign(ctx.keys.jwt);
}

/**
 * Resolves the bearer token to a live account (revoked accounts' tokens stop working at once). Once
 * two-factor authentication is on, only tokens stamped with when it was switched on work: those of a
 * login with a code, or of enable itself. Where the environment enforces two-factor authentication, an
 * account without it reaches only the routes that set it up (src/accounts/two-factor/enforce.ts).
 * Without an Authorization header, a person's console session cookie authenticates as the row it acts as
 * (src/accounts/people/session-auth.ts); bearer tokens are machine accounts' only.
 */
export async function authenticate(ctx: AppContext, request: FastifyRequest): Promise<Account> {
  const header = request.headers.authorization;
  const cookie = header === undefined ? sessionCookie(request) : null;
  if (cookie !== null) {
    const account = await authenticateSession(ctx, request, cookie);
    refuseWithoutSecondFactor(account, request.routeOptions.config);
    return account;
  }
  if (!header || !header.startsWith('Bearer ')) throw new AuthenticationError();
  let subject: string | undefined;
  let tfa: unknown;
  try {
    const { payload } = await jwtVerify(header.slice(7), ctx.keys.jwt, { algorithms: ['HS256'] });
    subject = payload.sub;
    tfa = payload.tfa;
  } catch {
    throw new AuthenticationError('The token is invalid or has expired; log in again');
  }
  const account = subject ? await loadAccount(ctx.db, subject) : null;
  if (!account) throw new AuthenticationError('The account of this token no longer exists or was revoked');
  if (account.twoFactorEnabledAt && tfa !== account.twoFactorEnabledAt.getTime()) {
    throw new AuthenticationError('Two-factor authentication is on for this account: log in again with a code');
  }
  refuseWithoutSecondFactor(account, request.routeOptions.config);
  return account;
}
