// An account's TOTP key: made by get-keyuri (pending), switched on by enable with a code made from
// it, switched off by disable. Keys are sealed at rest with keys.totpEncryption (derived from
// SECRET_KEY) and the account's hashId as associated data, so a sealed key copied to another
// account's row does not open. Each accepted code's step is kept: a code is good once.

import { randomBytes } from 'node:crypto';
import type { AppContext } from '../../app/context.ts';
import { ParameterError } from '../../app/errors.ts';
import { decryptSecret, encryptSecret } from '../../app/keys.ts';
import type { Account } from '../store.ts';
import { matchTotp } from './totp.ts';

type Ctx = Pick<AppContext, 'db' | 'keys'>;

/** RFC 4226 recommends 160 bits, the size of an HMAC-SHA1 key */
const KEY_BYTES = 20;

const seal = (ctx: Ctx, account: Account, key: Buffer) => encryptSecret(ctx.keys.totpEncryption, key, account.hashId);
const open = (ctx: Ctx, account: Account, sealed: Buffer) => decryptSecret(ctx.keys.totpEncryption, sealed, account.hashId);
const now = () => Date.now() / 1000;

/** A new pending key for the account; null when two-factor authentication is on already. */
export async function newPendingKey(ctx: Ctx, account: Account): Promise<Buffer | null> {
  const key = randomBytes(KEY_BYTES);
  const { rowCount } = await ctx.db.query(
    `INSERT INTO account_two_factor (account_id, pending_secret) VALUES ($1, $2)
     ON CONFLICT (account_id) DO UPDATE SET pending_secret = EXCLUDED.pending_secret WHERE account_two_factor.secret IS NULL`,
    [account.id, seal(ctx, account, key)],
  );
  return rowCount === 1 ? key : null;
}

/**
 * Switches two-factor authentication on when `code` was made from the pending key; answers when it
 * was switched on (what the new token carries). parameter_error naming `code` otherwise.
 */
export async function enableTwoFactor(ctx: Ctx, account: Account, code: string): Promise<Date> {
  const { rows } = await ctx.db.query<{ pending_secret: Buffer | null; secret: Buffer | null }>(
    'SELECT pending_secret, secret FROM account_two_factor WHERE account_id = $1',
    [account.id],
  );
  if (rows[0]?.secret) throw new ParameterError('code: two-factor authentication is enabled already');
  const pending = rows[0]?.pending_secret;
  if (!pending) throw new ParameterError('code: there is no key to check it against; call two-factor-authentication/get-keyuri first');
  const step = matchTotp(open(ctx, account, pending), code, now());
  if (step === null) throw new ParameterError('code: not the code the authenticator app shows for this key now');
  // the pending key must still be the one checked: a get-keyuri in between made a new one
  const updated = await ctx.db.query<{ enabled_at: Date }>(
    `UPDATE account_two_factor SET secret = pending_secret, pending_secret = NULL, enabled_at = now(), last_step = $3
      WHERE account_id = $1 AND pending_secret = $2 AND secret IS NULL RETURNING enabled_at`,
    [account.id, pending, step.toString()],
  );
  if (updated.rows.length === 0) throw new ParameterError('code: the key changed while it was checked; call get-keyuri again');
  return updated.rows[0].enabled_at;
}

/** Whether `code` is good for the account's key now and was not used before (it is used up by this check). */
export async function acceptCode(ctx: Ctx, account: Account, code: string): Promise<boolean> {
  const { rows } = await ctx.db.query<{ secret: Buffer | null }>('SELECT secret FROM account_two_factor WHERE account_id = $1', [account.id]);
  const secret = rows[0]?.secret;
  if (!secret) return false;
  const step = matchTotp(open(ctx, account, secret), code, now());
  if (step === null) return false;
  // one statement: of two requests with the same code, one wins
  const { rowCount } = await ctx.db.query(
    'UPDATE account_two_factor SET last_step = $2 WHERE account_id = $1 AND secret IS NOT NULL AND (last_step IS NULL OR last_step < $2)',
    [account.id, step.toString()],
  );
  return rowCount === 1;
}

/** Switches two-factor authentication off and forgets the key. */
export async function disableTwoFactor(ctx: Ctx, account: Account): Promise<void> {
  await ctx.db.query('DELETE FROM account_two_factor WHERE account_id = $1', [account.id]);
}
