// An environment's enforceTwoFactorAuthentication (environment update, supplier update): its accounts
// need a second factor to use it. An account of such an environment without one keeps exactly what it
// needs to set one up, get-keyuri and enable (routes marked `twoFactorSetup`), and nothing else:
//   - a token it holds, issued before or after the setting, is refused on every other route with a 403
//     right_error saying so (src/accounts/authenticate.ts asks `refuseWithoutSecondFactor` on each request);
//   - its login, once its secret is right, answers that 403 too, with a token in `details.jwt` for the
//     setup (limited by the rule above, not by the token itself). enable answers the token to use next,
//     and later logins send their code, as for any account with two-factor authentication.
// The rule is read from the account's environment on every request, so switching the setting on or off
// takes effect at once, for old and new tokens alike.

import { AppError } from '../../app/errors.ts';
import type { Account } from '../store.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** a route an account needs to set up two-factor authentication, open to it while its environment enforces that */
    twoFactorSetup?: boolean;
  }
}

const MESSAGE =
  'This environment enforces two-factor authentication and this account has not enabled it: ' +
  'set it up with POST /two-factor-authentication/get-keyuri and POST /two-factor-authentication/enable, the only routes open to it until then, ' +
  'and log in with <hashId>:<secret>:<code> from then on';

/** 403 right_error: the environment enforces two-factor authentication and the account has none. */
export class TwoFactorRequiredError extends AppError {
  constructor(details?: { jwt: string }) {
    super('right_error', 403, MESSAGE, details);
  }
}

/** Whether the account's environment enforces two-factor authentication and the account has not enabled it. */
export const lacksEnforcedSecondFactor = (account: Account): boolean =>
  account.environment.settings.enforceTwoFactorAuthentication === true && account.twoFactorEnabledAt === null;

/** Refuses a request of an account that lacks an enforced second factor, unless the route is one that sets it up. */
export function refuseWithoutSecondFactor(account: Account, route: { twoFactorSetup?: boolean }): void {
  if (route.twoFactorSetup !== true && lacksEnforcedSecondFactor(account)) throw new TwoFactorRequiredError();
}
