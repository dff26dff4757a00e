import type { AppContext } from '../../app/context.ts';
import type { Db } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';
import { newHashId } from '../../app/hash-id.ts';
import { queueStored, storeMails } from '../../mail/queue.ts';
import type { Account } from '../store.ts';
import { checkName, checkTimezone, type Locale } from '../users.ts';

export interface OwnSettingsUpdate {
  name?: string;
  password?: string;
  locale?: Locale;
  timezone?: string;
  phone?: string | null;
  company?: string | null;
}

/** settings update: the caller's own name, locale, time zone, phone and company (what `user` shows of it). */
export async function updateOwnSettings(db: Db, account: Account, update: OwnSettingsUpdate): Promise<void> {
  // an account logs in with its assertion; there is no password to change, and saying so beats ignoring it
  if (update.password !== undefined && account.kind === 'person')
    throw new ParameterError('password: a person sets a new password through the link of a reset mail (POST /authentication/person/password-reset)');
  if (update.password !== undefined)
    throw new ParameterError('password: a machine account has no password; it logs in with its machine assertion (the operator issues a new one)');
  const sets: string[] = [];
  const params: unknown[] = [account.id];
  const set = (column: string, value: unknown) => {
    params.push(value);
    sets.push(`${column} = $${params.length}`);
  };
  if (update.name !== undefined) set('name', checkName(update.name));
  if (update.locale !== undefined) set('locale', update.locale);
  if (update.timezone !== undefined) set('timezone', checkTimezone(update.timezone));
  if (update.phone !== undefined) set('phone', update.phone);
  if (update.company !== undefined) set('company', update.company);
  if (sets.length === 0) return;
  await db.query(`UPDATE machine_account SET ${sets.join(', ')}, updated_at = now() WHERE id = $1`, params);
}

export interface Feedback {
  theme?: string | null;
  feedback: string;
}

/**
 * settings feedback: stored in `feedback`, and with FEEDBACK_MAIL_TO set also mailed to the operator
 * through the mail queue (the mail row is written in the same transaction, so neither exists without the other).
 */
export async function addFeedback(ctx: AppContext, account: Account, input: Feedback): Promise<void> {
  const env = account.environment;
  const theme = input.theme ?? null;
  const mailHashIds = await ctx.db.tx(async (client) => {
    await client.query('INSERT INTO feedback (hash_id, environment_id, account_id, theme, feedback) VALUES ($1, $2, $3, $4, $5)', [
      newHashId(),
      env.id,
      account.id,
      theme,
      input.feedback,
    ]);
    const text = [
      input.feedback,
      '',
      `from: ${account.name} (account ${account.hashId}${account.email ? `, ${account.email}` : ''})`,
      `environment: ${env.name} (${env.type} ${env.hashId})`,
    ].join('\n');
    // environmentId null: the operator's mail, not one the environment's notification list shows
    return storeMails(ctx, client, [
      { environmentId: null, accountId: account.id, kind: 'feedback', to: ctx.config.feedbackMailTo, subject: `Feedback${theme ? `: ${theme}` : ''}`, text },
    ]);
  });
  await queueStored(ctx, mailHashIds);
}
