// How a request that carries the gridgate_session cookie (and no Authorization header) is authenticated: as
// the person's row its session acts as, on every route a bearer token reaches, with the same rights, the same
// Environment-Hash-Id check and the same two-factor rules (src/accounts/authenticate.ts).
//
// Cross-site requests: the browser sends the cookie with any request to this origin, but SameSite=Strict keeps it
// off requests another site starts, and on top of that every cookie-authenticated request that changes something
// must carry X-Gridgate-Console: 1 (a header no form and no simple cross-site request can carry) and, when it
// has an Origin header, come from this origin (or PUBLIC_URL's). Bearer tokens are not affected: a browser never adds them itself.

import type { FastifyRequest } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { AuthenticationError, RightError } from '../../app/errors.ts';
import { loadPersonAccount, type Account } from '../store.ts';
import { deleteSession, resolveSession, type PersonSession } from './sessions.ts';

export const CONSOLE_HEADER = 'x-gridgate-console';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * 403 right_error unless a changing request carries X-Gridgate-Console: 1 and, if it names an Origin, this one: the
 * request's own (scheme://host as it arrived), or PUBLIC_URL's (the origin the browser sees when TLS ends in front).
 */
export function refuseCrossSite(ctx: Pick<AppContext, 'config'>, request: FastifyRequest): void {
  if (SAFE_METHODS.has(request.method)) return;
  const origin = request.headers.origin;
  const own = origin === `${request.protocol}://${request.host}` || origin === new URL(ctx.config.publicUrl).origin;
  if (request.headers[CONSOLE_HEADER] !== '1' || (origin !== undefined && !own)) {
    throw new RightError(
      'cross-site request refused: a request authenticated by the session cookie that changes something needs the header X-Gridgate-Console: 1 and, with an Origin header, this origin',
    );
  }
}

/** The live session of a cookie and the row it acts as; 401 authentication_error when either has ended. */
export async function sessionAccount(ctx: AppContext, token: string): Promise<{ session: PersonSession; account: Account }> {
  const session = await resolveSession(ctx, token);
  if (!session) throw new AuthenticationError('The session has ended; sign in again');
  const account = await loadPersonAccount(ctx.db, session.accountId);
  if (!account) {
    // the user was deleted from the environment the session acted in
    await deleteSession(ctx.db, session.id);
    throw new AuthenticationError("The session's user no longer exists; sign in again");
  }
  if (account.twoFactorEnabledAt && account.twoFactorEnabledAt.getTime() !== session.secondFactorAt?.getTime()) {
    throw new AuthenticationError('Two-factor authentication was switched on for this user: sign in again with a code');
  }
  return { session, account };
}

/** authenticate's cookie path: the cross-site rule, then the session's row. */
export async function authenticateSession(ctx: AppContext, request: FastifyRequest, token: string): Promise<Account> {
  refuseCrossSite(ctx, request);
  const { session, account } = await sessionAccount(ctx, token);
  request.personSession = session;
  return account;
}
