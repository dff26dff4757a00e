// The people of an environment (the SDK's user routes). A user is a row of machine_account: a machine
// account the operator made (it logs in with its assertion), or a person added through the API (kind
// 'person': no secret; invited by mail to choose a password and sign in to the console, src/accounts/people/).
// Both have a name, an address, rights and their own
// userEnvironmentSettings, so issue notifications and supplier alerts treat them alike.
//
// Rights cannot grow through these routes: a caller grants only rights it holds itself, unless it holds
// ENVIRONMENT_ADMIN, and leaves alone users holding a right it lacks. Otherwise a USERS account, itself a
// user of its environment, could give itself ENVIRONMENT_ADMIN or strip it from the environment's admins.

import type { AppContext } from '../app/context.ts';
import type { Db, Queryable, Row } from '../app/db.ts';
import { checkEmail } from '../app/email.ts';
import { ConflictError, NotFoundError, ParameterError, RightError } from '../app/errors.ts';
import { findPage, type FindQuery } from '../app/find.ts';
import { newHashId } from '../app/hash-id.ts';
import { queueStored } from '../mail/queue.ts';
import { invitePerson } from './people/people.ts';
import { deleteAccountSessions } from './people/sessions.ts';
import { checkRights, uniqueEmail, type Account, type EnvironmentRecord } from './store.ts';
import { updateUserEnvironmentSettings, type SettingsUpdate, type UserEnvironmentSettings } from './user-environment-settings.ts';
import { userView, type Locale, type UserView } from './user-view.ts';

export { DEFAULT_TIMEZONE, environmentLocale, LOCALES, userView, type Locale, type UserView } from './user-view.ts';

export interface UserInput {
  name: string;
  email: string;
  rights: string[];
  locale?: Locale;
  timezone?: string;
  userEnvironmentSettings?: SettingsUpdate;
}

export interface UserPatch {
  rights?: string[];
  name?: string;
  /** null clears a machine account's address; a person always has one */
  email?: string | null;
  locale?: Locale;
  timezone?: string;
  userEnvironmentSettings?: SettingsUpdate;
}

/** Whether Intl knows the zone: mails are dated with Intl in the user's zone. */
export function checkTimezone(timezone: string): string {
  try {
    if (timezone.length <= 64) {
      new Intl.DateTimeFormat('en', { timeZone: timezone });
      return timezone;
    }
  } catch {
    // answered below
  }
  throw new ParameterError('timezone must be an IANA time zone such as Europe/Amsterdam or UTC (at most 64 characters)');
}

export function checkName(name: string): string {
  if (name.trim() === '' || name.length > 255) throw new ParameterError('name must be 1 to 255 characters');
  return name;
}

/** Rights the caller may hand out: its own, or all when it is an environment admin. */
function checkGrant(caller: Account, rights: string[]): void {
  if (caller.rights.includes('ENVIRONMENT_ADMIN')) return;
  const beyond = rights.filter((r) => !caller.rights.includes(r));
  if (beyond.length > 0) throw new RightError(`rights: this account cannot grant ${beyond.join(', ')}, a right it does not hold`);
}

const USER_SELECT = `a.id AS user_id, a.hash_id, a.kind, a.name, a.email, a.locale, a.timezone, a.phone, a.company, a.rights,
  s.account_id IS NOT NULL AS has_settings, s.notification_level, p.hash_id AS panel_hash_id,
  (SELECT tf.enabled_at FROM account_two_factor tf WHERE tf.account_id = a.id) AS two_factor_enabled_at`;
const USER_FROM = `machine_account a
  LEFT JOIN user_environment_settings s ON s.account_id = a.id AND s.environment_id = a.environment_id
  LEFT JOIN analytics_panel p ON p.id = s.default_analytics_panel_id`;

interface StoredUser {
  id: number;
  kind: 'machine' | 'person';
  user: UserView;
  userEnvironmentSettings: UserEnvironmentSettings;
}

function toStoredUser(r: Row, env: EnvironmentRecord): StoredUser {
  const user = userView(
    {
      hashId: r.hash_id as string,
      email: r.email as string | null,
      name: r.name as string,
      rights: r.rights as string[],
      locale: r.locale as string | null,
      timezone: r.timezone as string | null,
      phone: r.phone as string | null,
      company: r.company as string | null,
      twoFactorEnabledAt: r.two_factor_enabled_at as Date | null,
    },
    env,
  );
  // no settings row: the defaults every account starts with (src/accounts/user-environment-settings.ts)
  const settings: UserEnvironmentSettings = r.has_settings
    ? { notificationLevel: r.notification_level as 0 | 1 | 2 | null, defaultAnalyticsPanelHashId: r.panel_hash_id as string | null }
    : { notificationLevel: 0, defaultAnalyticsPanelHashId: null };
  return { id: r.user_id as number, kind: r.kind as StoredUser['kind'], user, userEnvironmentSettings: settings };
}

/** A live user of the caller's environment, or a not_found_error (also for another environment's). */
async function loadUser(db: Queryable, env: EnvironmentRecord, hashId: string, forUpdate = false): Promise<StoredUser> {
  const { rows } = await db.query(
    `SELECT ${USER_SELECT} FROM ${USER_FROM} WHERE a.environment_id = $1 AND a.hash_id = $2 AND a.revoked_at IS NULL${forUpdate ? ' FOR UPDATE OF a' : ''}`,
    [env.id, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('user', hashId);
  return toStoredUser(rows[0], env);
}

/** A caller without ENVIRONMENT_ADMIN may not change a user who holds a right the caller lacks. */
function checkTarget(caller: Account, target: StoredUser): void {
  if (caller.rights.includes('ENVIRONMENT_ADMIN')) return;
  const beyond = target.user.rights.filter((r) => !caller.rights.includes(r));
  if (beyond.length > 0) throw new RightError(`user ${target.user.hashId} holds ${beyond.join(', ')}, a right this account does not hold`);
}

/** Adds a person as a user; they are mailed an invitation to choose a password, or, with one, word of the new environment. */
export async function addUser(ctx: AppContext, caller: Account, input: UserInput): Promise<{ hashId: string }> {
  const env = caller.environment;
  const rights = checkRights(env.type, input.rights);
  checkGrant(caller, rights);
  const hashId = newHashId();
  const mails = await ctx.db.tx(async (client) => {
    let id: number;
    try {
      const { rows } = await client.query<{ id: number }>(
        `INSERT INTO machine_account (hash_id, environment_id, kind, name, email, rights, locale, timezone)
         VALUES ($1, $2, 'person', $3, $4, $5, $6, $7) RETURNING id`,
        [
          hashId,
          env.id,
          checkName(input.name),
          checkEmail(input.email),
          rights,
          input.locale ?? null,
          input.timezone === undefined ? null : checkTimezone(input.timezone),
        ],
      );
      id = rows[0].id;
    } catch (err) {
      throw uniqueEmail(err, input.email);
    }
    if (input.userEnvironmentSettings) await updateUserEnvironmentSettings(client, { id, environment: env }, input.userEnvironmentSettings);
    return invitePerson(ctx, client, { accountId: id, email: input.email, locale: input.locale ?? null, environment: env, inviter: caller.name });
  });
  await queueStored(ctx, mails);
  return { hashId };
}

export async function getUser(db: Queryable, caller: Account, hashId: string) {
  const { user, userEnvironmentSettings } = await loadUser(db, caller.environment, hashId);
  return { user, rights: user.rights, userEnvironmentSettings };
}

export async function findUsers(db: Queryable, caller: Account, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: USER_FROM,
      select: USER_SELECT,
      idColumn: 'a.id',
      where: ['a.environment_id = $1', 'a.revoked_at IS NULL'],
      params: [caller.environment.id],
      sortable: { hashId: 'a.hash_id', name: 'a.name', email: "coalesce(a.email, '')" },
      search: ['a.name', "coalesce(a.email, '')", 'a.hash_id'],
      updatedColumn: 'a.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'name' },
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => {
      const { user, userEnvironmentSettings } = toStoredUser(r, caller.environment);
      return { user, rights: user.rights, userEnvironmentSettings };
    }),
  };
}

export async function updateUser(db: Db, caller: Account, hashId: string, patch: UserPatch): Promise<void> {
  const env = caller.environment;
  await db.tx(async (client) => {
    const target = await loadUser(client, env, hashId, true);
    checkTarget(caller, target);
    const rights = patch.rights === undefined ? null : checkRights(env.type, patch.rights);
    if (rights) checkGrant(caller, rights);
    if (patch.email === null && target.kind === 'person')
      throw new ParameterError('email: a person added as a user needs an address (delete the user instead)');
    const sets: string[] = [];
    const params: unknown[] = [target.id];
    const set = (column: string, value: unknown) => {
      params.push(value);
      sets.push(`${column} = $${params.length}`);
    };
    if (rights) set('rights', rights);
    if (patch.name !== undefined) set('name', checkName(patch.name));
    if (patch.email !== undefined) set('email', patch.email === null ? null : checkEmail(patch.email));
    if (patch.locale !== undefined) set('locale', patch.locale);
    if (patch.timezone !== undefined) set('timezone', checkTimezone(patch.timezone));
    if (sets.length > 0) {
      try {
        await client.query(`UPDATE machine_account SET ${sets.join(', ')}, updated_at = now() WHERE id = $1`, params);
      } catch (err) {
        throw uniqueEmail(err, patch.email);
      }
    }
    // a console session belongs to an address: one acting as this row ends when the row's address changes
    if (patch.email != null && target.kind === 'person' && patch.email.toLowerCase() !== target.user.email?.toLowerCase())
      await deleteAccountSessions(client, target.id);
    if (patch.userEnvironmentSettings) await updateUserEnvironmentSettings(client, { id: target.id, environment: env }, patch.userEnvironmentSettings);
  });
}

/**
 * Removes a user from the environment: a machine account is revoked (its tokens stop working), and
 * nothing is sent to either any more (subscriptions and settings go with it).
 */
export async function deleteUser(db: Db, caller: Account, hashId: string): Promise<void> {
  // an account that removes itself would lock its caller out; the operator revokes machine accounts
  if (hashId === caller.hashId)
    throw new ConflictError('an account cannot delete itself; the operator revokes machine accounts (admin revoke-machine-account)');
  await db.tx(async (client) => {
    const target = await loadUser(client, caller.environment, hashId, true);
    checkTarget(caller, target);
    await client.query('UPDATE machine_account SET revoked_at = now(), updated_at = now() WHERE id = $1', [target.id]);
    await client.query('DELETE FROM supplier_subscription WHERE user_id = $1', [target.id]);
    await client.query('DELETE FROM issue_subscription WHERE account_id = $1', [target.id]);
    await client.query('DELETE FROM grid_notification WHERE account_id = $1', [target.id]);
    await client.query('DELETE FROM user_environment_settings WHERE account_id = $1', [target.id]);
    // a person's console sessions in this environment end with it
    await deleteAccountSessions(client, target.id);
  });
}
