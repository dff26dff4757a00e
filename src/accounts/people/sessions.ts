// A person's console sessions, server-side rows in person_session: the cookie gridgate_session carries 32 random
// bytes (base64url), the row only their sha256. A session acts as one of the person's rows (environments) at a time
// and ends SESSION_IDLE_MINUTES after its last request, SESSION_ABSOLUTE_HOURS after the login at the latest, at
// logout, at logout-everywhere, when a new password is set, and when its row is deleted (user delete). Expiry is
// computed by PostgreSQL's clock, so a test moves a session's last_seen_at back instead of waiting.
//
// Two-factor authentication: a session records the enabled_at of its row's second factor it was verified for (a
// login or switch with a code, or enable through the session itself). When the row turns two-factor on elsewhere,
// or off and on again, the stamps differ and the session stops working, as a bearer token's `tfa` does.

import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import type { Queryable } from '../../app/db.ts';
import { digestOf } from './tokens.ts';

export const SESSION_COOKIE = 'gridgate_session';

type Ctx = Pick<AppContext, 'config' | 'db'>;

/** A live session as a request found it. */
export interface PersonSession {
  id: number;
  email: string;
  accountId: number;
  /** the row's two-factor enabled_at this session was verified for */
  secondFactorAt: Date | null;
  /** when it ends unless used again (idle), or its absolute end, whichever is sooner */
  expiresAt: Date;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** the console session a request was authenticated by; null for bearer tokens and public routes */
    personSession: PersonSession | null;
  }
}

const limits = (ctx: Ctx) => [`${ctx.config.sessionIdleMinutes} minutes`, `${ctx.config.sessionAbsoluteHours} hours`];
const EXPIRES = 'least(last_seen_at + $2::interval, created_at + $3::interval)';

/** Starts a session of `email` acting as the row `accountId`; the cookie's token. */
export async function createSession(
  ctx: Ctx,
  email: string,
  accountId: number,
  secondFactorAt: Date | null,
  userAgent: string | undefined,
): Promise<{ token: string; session: PersonSession }> {
  const token = randomBytes(32).toString('base64url');
  const { rows } = await ctx.db.query<{ id: number; expires_at: Date }>(
    `INSERT INTO person_session (token_sha256, email, account_id, second_factor_at, user_agent) VALUES ($1, $4, $5, $6, $7)
     RETURNING id, ${EXPIRES} AS expires_at`,
    [digestOf(token), ...limits(ctx), email, accountId, secondFactorAt, userAgent?.slice(0, 512) ?? null],
  );
  return { token, session: { id: rows[0].id, email, accountId, secondFactorAt, expiresAt: rows[0].expires_at } };
}

/** The live session of a cookie's token; an expired one is deleted. Its last_seen_at moves on at most once a minute. */
export async function resolveSession(ctx: Ctx, token: string): Promise<PersonSession | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return null;
  const { rows } = await ctx.db.query<{
    id: number;
    email: string;
    account_id: number;
    second_factor_at: Date | null;
    expires_at: Date;
    expired: boolean;
    idle_seconds: number;
  }>(
    `SELECT id, email, account_id, second_factor_at, ${EXPIRES} AS expires_at, ${EXPIRES} <= now() AS expired,
            extract(epoch FROM now() - last_seen_at)::float8 AS idle_seconds
       FROM person_session WHERE token_sha256 = $1`,
    [digestOf(token), ...limits(ctx)],
  );
  const r = rows[0];
  if (!r) return null;
  if (r.expired) {
    await ctx.db.query('DELETE FROM person_session WHERE id = $1', [r.id]);
    return null;
  }
  let expiresAt = r.expires_at;
  // a request a minute is enough to know the session is in use, without a write per request
  if (r.idle_seconds >= 60) {
    const { rows: touched } = await ctx.db.query<{ expires_at: Date }>(
      `UPDATE person_session SET last_seen_at = now() WHERE id = $1 RETURNING ${EXPIRES} AS expires_at`,
      [r.id, ...limits(ctx)],
    );
    if (touched.length === 0) return null;
    expiresAt = touched[0].expires_at;
  }
  return { id: r.id, email: r.email, accountId: r.account_id, secondFactorAt: r.second_factor_at, expiresAt };
}

/** Moves the session to another row of its person, verified for that row's second factor. */
export async function switchSession(db: Queryable, session: PersonSession, accountId: number, secondFactorAt: Date | null): Promise<PersonSession> {
  await db.query('UPDATE person_session SET account_id = $2, second_factor_at = $3, last_seen_at = now() WHERE id = $1', [
    session.id,
    accountId,
    secondFactorAt,
  ]);
  return { ...session, accountId, secondFactorAt };
}

/** Marks the session verified for its row's second factor (enable through the session: it stays signed in). */
export async function markSecondFactor(db: Queryable, session: PersonSession, enabledAt: Date | null): Promise<void> {
  await db.query('UPDATE person_session SET second_factor_at = $2 WHERE id = $1', [session.id, enabledAt]);
}

export async function deleteSession(db: Queryable, id: number): Promise<void> {
  await db.query('DELETE FROM person_session WHERE id = $1', [id]);
}

/** Ends every session of the person (logout-everywhere, a new password). */
export async function deletePersonSessions(db: Queryable, email: string): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM person_session WHERE email = $1', [email.toLowerCase()]);
  return rowCount ?? 0;
}

/** Ends the sessions acting as a row (its user was deleted). */
export async function deleteAccountSessions(db: Queryable, accountId: number): Promise<void> {
  await db.query('DELETE FROM person_session WHERE account_id = $1', [accountId]);
}

/** The gridgate_session cookie of a request, if it sent one. */
export function sessionCookie(request: FastifyRequest): string | null {
  const header = request.headers.cookie;
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return null;
}

// Secure over TLS: the request's own, or TLS ended in front of the API (PUBLIC_URL https)
const attributes = (ctx: Ctx, request: FastifyRequest) =>
  `Path=/; HttpOnly; SameSite=Strict${request.protocol === 'https' || ctx.config.publicUrl.startsWith('https:') ? '; Secure' : ''}`;

export function setSessionCookie(ctx: Ctx, request: FastifyRequest, reply: FastifyReply, token: string): void {
  // the browser may drop it at the absolute end; the server ends it sooner when idle
  reply.header('set-cookie', `${SESSION_COOKIE}=${token}; ${attributes(ctx, request)}; Max-Age=${ctx.config.sessionAbsoluteHours * 3600}`);
}

export function clearSessionCookie(ctx: Ctx, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('set-cookie', `${SESSION_COOKIE}=; ${attributes(ctx, request)}; Max-Age=0`);
}
