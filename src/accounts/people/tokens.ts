// One-time tokens of invitation and password reset mails: 32 random bytes (base64url) in the mail's link, only
// their sha256 in person_token. A token is good once, until it expires (invitation 7 days, reset 1 hour); setting
// a password uses up every token of the address, and strikes the link out of the stored mails that carried them
// (the notification table keeps a mail's text; nobody should find a live link there).

import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from '../../app/db.ts';

export type TokenPurpose = 'invitation' | 'reset';

const LIFETIME: Record<TokenPurpose, string> = { invitation: '7 days', reset: '1 hour' };
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export const digestOf = (token: string): Buffer => createHash('sha256').update(token).digest();

/** A new token, not stored yet. */
export const newToken = (): string => randomBytes(32).toString('base64url');

/** Stores a token of `email` (lower case) for `purpose`, carried by the stored mail `notificationHashId`. */
export async function storeToken(db: Queryable, token: string, email: string, purpose: TokenPurpose, notificationHashId: string | null): Promise<void> {
  await db.query(`INSERT INTO person_token (token_sha256, email, purpose, notification_hash_id, expires_at) VALUES ($1, $2, $3, $4, now() + $5::interval)`, [
    digestOf(token),
    email,
    purpose,
    notificationHashId,
    LIFETIME[purpose],
  ]);
}

/** The address a token is good for now (unused, unexpired); null otherwise. */
export async function tokenEmail(db: Queryable, token: string): Promise<string | null> {
  if (!TOKEN.test(token)) return null;
  const { rows } = await db.query<{ email: string }>('SELECT email FROM person_token WHERE token_sha256 = $1 AND used_at IS NULL AND expires_at > now()', [
    digestOf(token),
  ]);
  return rows[0]?.email ?? null;
}

/**
 * Uses the token up, with every other token of its address; the address, or null when the token was not good
 * (used meanwhile: of two requests with one token, one wins).
 */
export async function useToken(db: Queryable, token: string): Promise<string | null> {
  if (!TOKEN.test(token)) return null;
  const { rows } = await db.query<{ email: string }>(
    'UPDATE person_token SET used_at = now() WHERE token_sha256 = $1 AND used_at IS NULL AND expires_at > now() RETURNING email',
    [digestOf(token)],
  );
  if (rows.length === 0) return null;
  const email = rows[0].email;
  const { rows: carriers } = await db.query<{ hash_id: string }>(
    `UPDATE person_token SET used_at = coalesce(used_at, now()) WHERE email = $1 AND notification_hash_id IS NOT NULL
     RETURNING notification_hash_id AS hash_id`,
    [email],
  );
  await db.query(`UPDATE notification SET body = regexp_replace(body, 'token=[A-Za-z0-9_-]{43}', 'token=(used)', 'g') WHERE hash_id = ANY($1::text[])`, [
    carriers.map((c) => c.hash_id),
  ]);
  return email;
}
