import { Counter } from 'prom-client';
import type { Queryable } from '../app/db.ts';
import { checkEmail } from '../app/email.ts';
import { ConflictError, ParameterError } from '../app/errors.ts';
import { newHashId, newSecret } from '../app/hash-id.ts';
import { hashSecret, verifySecret } from '../app/keys.ts';
import type { Account, EnvironmentRecord, EnvironmentType } from '../app/account.ts';

export type { Account, EnvironmentRecord, EnvironmentType } from '../app/account.ts';

export const MONITORING_RIGHTS = [
  'READ',
  'STATIC',
  'ISSUES',
  'AUDIT_TRAIL',
  'USERS',
  'EXPORT',
  'IMPORT',
  'SENSORS',
  'REPORTS',
  'THRESHOLDS',
  'ENVIRONMENT_ADMIN',
];
export const CONNECTIVITY_RIGHTS = ['ENVIRONMENT_ADMIN'];

/** The rights an environment type knows. */
export const rightsOf = (type: EnvironmentType): string[] => (type === 'monitoring' ? MONITORING_RIGHTS : CONNECTIVITY_RIGHTS);

/** A user's rights, checked against the environment type's list; parameter_error naming `rights`. */
export function checkRights(type: EnvironmentType, rights: string[]): string[] {
  const allowed = rightsOf(type);
  const bad = rights.filter((r) => !allowed.includes(r));
  if (bad.length > 0 || rights.length === 0) {
    throw new ParameterError(
      `rights must be a non-empty list of ${allowed.join(', ')} for a ${type} environment${bad.length ? `; unknown: ${bad.join(', ')}` : ''}`,
    );
  }
  return [...new Set(rights)];
}

const ENV_COLUMNS = `e.id AS env_id, e.hash_id AS env_hash_id, e.type AS env_type, e.name AS env_name, e.settings AS env_settings, e.created_at AS env_created_at`;

function toEnvironment(r: Record<string, unknown>): EnvironmentRecord {
  return {
    id: r.env_id as number,
    hashId: r.env_hash_id as string,
    type: r.env_type as EnvironmentType,
    name: r.env_name as string,
    settings: r.env_settings as Record<string, unknown>,
    createdAt: r.env_created_at as Date,
  };
}

export async function createEnvironment(db: Queryable, type: EnvironmentType, name: string): Promise<EnvironmentRecord> {
  if (type !== 'monitoring' && type !== 'connectivity') throw new ParameterError('type must be monitoring or connectivity');
  if (!name || name.length > 255) throw new ParameterError('name must be 1 to 255 characters');
  const { rows } = await db.query(
    `INSERT INTO environment (hash_id, type, name) VALUES ($1, $2, $3)
     RETURNING id AS env_id, hash_id AS env_hash_id, type AS env_type, name AS env_name, settings AS env_settings, created_at AS env_created_at`,
    [newHashId(), type, name],
  );
  return toEnvironment(rows[0]);
}

/** Sets the environment's name (when given) and merges `settings` into its settings; the stored record. */
export async function patchEnvironment(
  db: Queryable,
  env: EnvironmentRecord,
  name: string | undefined,
  settings: Record<string, unknown>,
): Promise<EnvironmentRecord> {
  const { rows } = await db.query<{ name: string; settings: Record<string, unknown> }>(
    `UPDATE environment SET name = COALESCE($2, name), settings = settings || $3::jsonb, updated_at = now()
      WHERE id = $1 AND deleted_at IS NULL RETURNING name, settings`,
    [env.id, name ?? null, JSON.stringify(settings)],
  );
  return { ...env, name: rows[0].name, settings: rows[0].settings };
}

/**
 * Creates a machine account; the returned assertion (`<hashId>:<secret>`) is shown once and stored only as a slow hash.
 * With `email` it is a user its environment's mail reaches (issue notifications, supplier alerts).
 */
export async function createMachineAccount(
  db: Queryable,
  environmentHashId: string,
  rights: string[],
  name = 'machine account',
  email?: string,
): Promise<{ hashId: string; assertion: string }> {
  const { rows } = await db.query<{ id: number; type: EnvironmentType }>('SELECT id, type FROM environment WHERE hash_id = $1 AND deleted_at IS NULL', [
    environmentHashId,
  ]);
  if (rows.length === 0) throw new ParameterError(`environment ${environmentHashId} does not exist`);
  const checked = checkRights(rows[0].type, rights);
  const address = email === undefined ? null : checkEmail(email);
  const hashId = newHashId();
  const secret = newSecret();
  try {
    await db.query('INSERT INTO machine_account (hash_id, environment_id, name, secret_hash, rights, email) VALUES ($1, $2, $3, $4, $5, $6)', [
      hashId,
      rows[0].id,
      name,
      await hashSecret(secret),
      checked,
      address,
    ]);
  } catch (err) {
    throw uniqueEmail(err, email);
  }
  return { hashId, assertion: `${hashId}:${secret}` };
}

/** A unique violation of the address index as the 409 a caller understands; any other error as it is. */
export function uniqueEmail(err: unknown, email: string | null | undefined): unknown {
  const e = err as { code?: string; constraint?: string };
  return e.code === '23505' && e.constraint === 'machine_account_email' ? new ConflictError(`email: ${email} is already a user of this environment`) : err;
}

/** The live accounts `where` selects (a, e: machine_account and its environment), with their environments. */
async function selectAccounts(db: Queryable, where: string, params: unknown[]): Promise<Account[]> {
  const { rows } = await db.query(
    `SELECT a.id, a.hash_id, a.kind, a.name, a.rights, a.email, a.locale, a.timezone, a.phone, a.company, tf.enabled_at AS two_factor_enabled_at, ${ENV_COLUMNS}
       FROM machine_account a JOIN environment e ON e.id = a.environment_id
       LEFT JOIN account_two_factor tf ON tf.account_id = a.id
      WHERE ${where} AND a.revoked_at IS NULL AND e.deleted_at IS NULL
      ORDER BY e.name, e.id`,
    params,
  );
  return rows.map((r) => ({
    id: r.id as number,
    hashId: r.hash_id as string,
    kind: r.kind as Account['kind'],
    name: r.name as string,
    rights: r.rights as string[],
    email: r.email as string | null,
    locale: r.locale as string | null,
    timezone: r.timezone as string | null,
    phone: r.phone as string | null,
    company: r.company as string | null,
    environment: toEnvironment(r),
    twoFactorEnabledAt: r.two_factor_enabled_at as Date | null,
  }));
}

/** A live machine account (people never reach the bearer-token and assertion paths). */
export async function loadAccount(db: Queryable, hashId: string): Promise<Account | null> {
  return (await selectAccounts(db, "a.hash_id = $1 AND a.kind = 'machine'", [hashId]))[0] ?? null;
}

/** A live person's row (one environment of theirs), by its id. */
export async function loadPersonAccount(db: Queryable, id: number): Promise<Account | null> {
  return (await selectAccounts(db, "a.id = $1 AND a.kind = 'person'", [id]))[0] ?? null;
}

/** Every live row of the person with this address (case-insensitive), one per environment, by environment name. */
export async function personAccounts(db: Queryable, email: string): Promise<Account[]> {
  return selectAccounts(db, "lower(a.email) = lower($1) AND a.kind = 'person'", [email]);
}

/** Slow-hash checks run by logins, known account or not (the same count for both is what keeps their timing alike). */
export const loginSecretChecks = new Counter({ name: 'gridgate_api_login_secret_checks_total', help: 'Slow hashes of login secrets computed' });

// a stored-hash stand-in for assertions that name no live account: checking against it costs what a real check costs
let dummyHash: Promise<string> | null = null;
const dummy = () => (dummyHash ??= hashSecret(newSecret()));

/** The account hashId an assertion (`<hashId>:<secret>`) names, '' when it has no such part. */
export const assertionAccount = (assertion: string): string => {
  const sep = assertion.indexOf(':');
  return sep <= 0 ? '' : assertion.slice(0, sep);
};

/**
 * Checks an assertion; null when it names no live account or the secret is wrong. The slow hash
 * runs in every case, so the answer takes as long whether or not the account exists.
 */
export async function verifyAssertion(db: Queryable, assertion: string): Promise<Account | null> {
  const hashId = assertionAccount(assertion);
  const { rows } =
    hashId === ''
      ? { rows: [] }
      : await db.query<{ secret_hash: string }>("SELECT secret_hash FROM machine_account WHERE hash_id = $1 AND kind = 'machine' AND revoked_at IS NULL", [
          hashId,
        ]);
  const stored = rows.length > 0 ? rows[0].secret_hash : await dummy();
  loginSecretChecks.inc();
  const matches = await verifySecret(assertion.slice(hashId.length + 1), stored);
  if (rows.length === 0 || !matches) return null;
  return loadAccount(db, hashId);
}

/** Whether `secret` is the account's (the part of its assertion after the colon). */
export async function verifyAccountSecret(db: Queryable, account: Account, secret: string): Promise<boolean> {
  const { rows } = await db.query<{ secret_hash: string }>('SELECT secret_hash FROM machine_account WHERE id = $1', [account.id]);
  return rows.length > 0 && verifySecret(secret, rows[0].secret_hash);
}

/** Computes the stand-in hash ahead of the first login that needs it. */
export function prepareLogins(): Promise<void> {
  return dummy().then(() => undefined);
}

export async function revokeMachineAccount(db: Queryable, hashId: string): Promise<boolean> {
  const { rowCount } = await db.query('UPDATE machine_account SET revoked_at = now() WHERE hash_id = $1 AND revoked_at IS NULL', [hashId]);
  return (rowCount ?? 0) > 0;
}
