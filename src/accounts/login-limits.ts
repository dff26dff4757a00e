// Failed machine logins are counted in Redis per source address and per account (the hashId part
// of the assertion, whether or not such an account exists: the answer must not tell). A login
// takes one failure from both counters before its secret is checked, so parallel guesses cannot
// slip past the limit, and gives them back when it succeeds. Each counter lives for
// LOGIN_FAILURE_WINDOW_SECONDS from its first failure. The two-factor routes that check the secret
// or a code (get-keyuri, enable, disable) are attempts of the same kind on the same counters
// (src/accounts/two-factor/routes.ts): guesses there and at machine-login share one budget.

import type { AppContext } from '../app/context.ts';
import { RateLimitError } from '../app/errors.ts';
import { sha256Hex } from '../app/keys.ts';

type Ctx = Pick<AppContext, 'config' | 'redis'>;

const keysOf = (ctx: Ctx, address: string, accountHashId: string) => {
  const prefix = `${ctx.config.queueName}:login-failures`;
  // hashed: an assertion's account part is whatever the caller sent, up to 1 KiB
  return { address: `${prefix}:address:${address}`, account: `${prefix}:account:${sha256Hex(accountHashId).slice(0, 32)}` };
};

export interface LoginAttempt {
  /** the login succeeded: its failure is given back */
  succeeded(): Promise<void>;
}

/** Counts a login attempt as a failure up front; a 429 rate_limit_error when the address or the account is over its limit. */
export async function beginLogin(ctx: Ctx, address: string, accountHashId: string): Promise<LoginAttempt> {
  const keys = keysOf(ctx, address, accountHashId);
  const window = ctx.config.loginFailureWindowSeconds;
  // one transaction per counter: on a Redis Cluster the two keys live in different slots
  const take = async (key: string): Promise<[count: number, ttl: number]> => {
    const results = await ctx.redis.multi().incr(key).expire(key, window, 'NX').ttl(key).exec();
    if (!results) throw new Error('login failure counters: the Redis transaction was aborted');
    return [Number(results[0][1]), Number(results[2][1])];
  };
  const [[addressCount, addressTtl], [accountCount, accountTtl]] = await Promise.all([take(keys.address), take(keys.account)]);
  if (addressCount > ctx.config.loginFailuresPerAddress) {
    throw new RateLimitError(
      `Too many failed logins and two-factor checks from this address; try again in ${Math.max(addressTtl, 1)} s`,
      Math.max(addressTtl, 1),
    );
  }
  if (accountCount > ctx.config.loginFailuresPerAccount) {
    throw new RateLimitError(
      `Too many failed logins and two-factor checks for this account; try again in ${Math.max(accountTtl, 1)} s`,
      Math.max(accountTtl, 1),
    );
  }
  return {
    async succeeded() {
      await Promise.all([ctx.redis.decr(keys.address), ctx.redis.decr(keys.account)]);
    },
  };
}
