import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { AuthenticationError } from '../../app/errors.ts';
import { HashId } from '../../http/schemas.ts';
import { typed } from '../../http/typed.ts';
import { personAccounts, type Account } from '../store.ts';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, dummyPasswordHash } from './passwords.ts';
import { requestPasswordReset, setPassword, signIn, switchEnvironment } from './people.ts';
import { refuseCrossSite, sessionAccount } from './session-auth.ts';
import {
  clearSessionCookie,
  createSession,
  deletePersonSessions,
  deleteSession,
  resolveSession,
  sessionCookie,
  setSessionCookie,
  type PersonSession,
} from './sessions.ts';
import { sessionView } from './view.ts';

const tags = ['authentication'];
const Email = Type.String({ minLength: 1, maxLength: 254 });
const Code = Type.String({ minLength: 1, maxLength: 16 });
const SESSION =
  'Answers {session: {user, environment: {hashId, name, type, settings}, environmentRights, environments: [{hashId, name, type}], ' +
  'secondFactorSetupRequired, expiresAt}}: user is the SDK user model of the row (environment) the session acts as; settings are the ' +
  "environment's (theme, logo, locale, defaultLandingPage, enforceTwoFactorAuthentication, and for a monitoring environment the rest of " +
  "environment get's); secondFactorSetupRequired: the environment enforces two-factor authentication and this row has none, so only " +
  'the two-factor-authentication routes answer until it is enabled. ';
const COOKIE =
  'The session is the HttpOnly cookie gridgate_session (SameSite=Strict; Secure over TLS); it authenticates every other ' +
  'operation as the row it acts as, with Environment-Hash-Id as a bearer token does. A cookie-authenticated request other than ' +
  "GET/HEAD/OPTIONS needs the header X-Gridgate-Console: 1 and, with an Origin header, this origin (or PUBLIC_URL's): else 403 right_error. ";
const LIMITED = 'A wrong password or code counts as a failed login (per source address and per person): 429 rate_limit_error past the limits. ';
const TWO_FACTOR = 'When the row has two-factor authentication: without code 401 second_factor_required, with a wrong or used one 401 authentication_error. ';

/** The console session of a request's cookie, and its row; 401 when there is none. */
async function currentSession(ctx: AppContext, request: FastifyRequest): Promise<{ session: PersonSession; account: Account }> {
  const token = sessionCookie(request);
  if (token === null) throw new AuthenticationError('Not signed in: no session cookie');
  return sessionAccount(ctx, token);
}

/** People's sign-in to the console (src/accounts/people/README.md): passwords, sessions, environments. */
export async function personRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  fastify.decorateRequest('personSession', null);
  void dummyPasswordHash();
  // a session's answer is the person's own: no cache keeps it
  const answer = async (reply: FastifyReply, account: Account, session: PersonSession) => {
    reply.header('cache-control', 'no-store');
    return { session: sessionView(account, await personAccounts(ctx.db, session.email), session) };
  };

  app.post(
    '/authentication/person/set-password',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'person set password',
        security: [],
        body: Type.Object(
          { token: Type.String({ minLength: 1, maxLength: 128 }), password: Type.String({ minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH }) },
          { additionalProperties: false },
        ),
        description:
          `Sets the password of the person an invitation or password reset mail went to (token: from its link, PUBLIC_URL/#/set-password?token=...). ` +
          `password: ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters (400 parameter_error naming password). A token is good once: ` +
          'invitations for 7 days, resets for 1 hour; setting a password uses up every token of the address and ends every session of the person. ' +
          'A token used, expired or unknown: 401 authentication_error. Answers 204.',
      },
    },
    async (request, reply) => {
      await setPassword(ctx, request.body.token, request.body.password);
      reply.status(204).send();
    },
  );

  app.post(
    '/authentication/person/password-reset',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'person password reset',
        security: [],
        body: Type.Object({ email: Email }, { additionalProperties: false }),
        description:
          "Mails a link to choose a new password (good once, for 1 hour) when the address is a person's. Answers 204 whether or not it is, " +
          'in the same time. Requests count against the login limits of the source address and the address asked for (429 rate_limit_error beyond).',
      },
    },
    async (request, reply) => {
      const reset = await requestPasswordReset(ctx, request.body.email, request.ip);
      reply.status(204).send();
      // after the answer: its timing does not tell whether the address is a person's
      reset.send().catch((err: Error) => request.log.error({ err: err.message }, 'password reset mail could not be queued'));
    },
  );

  app.post(
    '/authentication/person/login',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'person login',
        security: [],
        body: Type.Object(
          {
            email: Email,
            password: Type.String({ minLength: 1, maxLength: 1024 }),
            code: Type.Optional(Code),
            environmentHashId: Type.Optional(HashId),
          },
          { additionalProperties: false },
        ),
        description:
          'Signs a person in with the address they were added as a user with and their password, and sets the session cookie. ' +
          'The session acts in environmentHashId when the person is a user there, else in the environment used last, else the first by name. ' +
          'A wrong address or password: 401 authentication_error (the same answer, in the same time, for an address nobody has). ' +
          TWO_FACTOR +
          LIMITED +
          SESSION +
          COOKIE,
      },
    },
    async (request, reply) => {
      const account = await signIn(ctx, request.body, request.ip);
      const previous = sessionCookie(request);
      if (previous !== null) {
        const old = await resolveSession(ctx, previous);
        if (old) await deleteSession(ctx.db, old.id);
      }
      const { token, session } = await createSession(ctx, account.email!.toLowerCase(), account.id, account.twoFactorEnabledAt, request.headers['user-agent']);
      setSessionCookie(ctx, request, reply, token);
      return answer(reply, account, session);
    },
  );

  app.get(
    '/authentication/person/session',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'person session',
        security: [],
        description: `The session of the cookie; 401 authentication_error when there is none or it ended. ${SESSION}`,
      },
    },
    async (request, reply) => {
      const { session, account } = await currentSession(ctx, request);
      return answer(reply, account, session);
    },
  );

  app.post(
    '/authentication/person/switch-environment',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'person switch environment',
        security: [],
        body: Type.Object({ environmentHashId: HashId, code: Type.Optional(Code) }, { additionalProperties: false }),
        description:
          "Moves the session to the person's row in another environment (404 not_found_error when they are no user there). " +
          TWO_FACTOR +
          LIMITED +
          SESSION +
          COOKIE,
      },
    },
    async (request, reply) => {
      refuseCrossSite(ctx, request);
      const current = await currentSession(ctx, request);
      const { session, account } = await switchEnvironment(ctx, current.session, request.body.environmentHashId, request.body.code, request.ip);
      return answer(reply, account, session);
    },
  );

  app.post(
    '/authentication/person/logout',
    {
      config: { auth: 'none' },
      schema: { tags, summary: 'person logout', security: [], description: `Ends the session of the cookie (if any) and clears the cookie; 204. ${COOKIE}` },
    },
    async (request, reply) => {
      const token = sessionCookie(request);
      if (token !== null) {
        refuseCrossSite(ctx, request);
        const session = await resolveSession(ctx, token);
        if (session) await deleteSession(ctx.db, session.id);
      }
      clearSessionCookie(ctx, request, reply);
      reply.status(204).send();
    },
  );

  app.post(
    '/authentication/person/logout-everywhere',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'person logout everywhere',
        security: [],
        description: `Ends every session of the person, in every browser, and clears the cookie; 204. 401 without a live session. ${COOKIE}`,
      },
    },
    async (request, reply) => {
      refuseCrossSite(ctx, request);
      const { session } = await currentSession(ctx, request);
      await deletePersonSessions(ctx.db, session.email);
      clearSessionCookie(ctx, request, reply);
      reply.status(204).send();
    },
  );
}
