import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../http/typed.ts';
import type { AppContext } from '../app/context.ts';
import { FindQuery, HashIdParams } from '../http/schemas.ts';
import { SettingsUpdateBody } from './user-environment-settings.ts';
import { addUser, deleteUser, findUsers, getUser, LOCALES, updateUser } from './users.ts';

const Locale = Type.Union(LOCALES.map((l) => Type.Literal(l)));
const Rights = Type.Array(Type.String({ maxLength: 64 }), { maxItems: 20 });
const Email = Type.String({ minLength: 3, maxLength: 254 });
const Name = Type.String({ minLength: 1, maxLength: 255 });
const Timezone = Type.String({ minLength: 1, maxLength: 64 });

// the SDK's bodies, and beside them what a person who gets mail needs: their language, zone and notification level
const AddBody = Type.Object(
  {
    name: Name,
    email: Email,
    rights: Rights,
    locale: Type.Optional(Locale),
    timezone: Type.Optional(Timezone),
    userEnvironmentSettings: Type.Optional(SettingsUpdateBody),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    rights: Type.Optional(Rights),
    name: Type.Optional(Name),
    email: Type.Optional(Type.Union([Email, Type.Null()])),
    locale: Type.Optional(Locale),
    timezone: Type.Optional(Timezone),
    userEnvironmentSettings: Type.Optional(SettingsUpdateBody),
  },
  { additionalProperties: false },
);

const rights = { monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' };
const tags = ['user'];

/** The SDK's user routes: the people (and machine accounts) of the caller's environment. */
export async function userRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/user/',
    {
      config: { rights },
      schema: {
        tags,
        summary: 'user add',
        body: AddBody,
        description:
          'Adds a person to the environment: they get its mail (issue notifications, supplier alerts) at `email`, in `locale` and `timezone`, ' +
          'and sign in to the console with a password: they are mailed an invitation with a link to choose it (good for 7 days), or, when they have one already (a user of another environment), word that they were added. `userEnvironmentSettings` sets their notificationLevel. A caller grants only rights it holds, unless it holds ENVIRONMENT_ADMIN. ' +
          'An address already used by a user of the environment: 409 conflict_error.',
      },
    },
    async (request) => addUser(ctx, request.account, request.body),
  );

  app.get(
    '/user/',
    {
      config: { rights },
      schema: {
        tags,
        summary: 'user find',
        querystring: FindQuery,
        description:
          'sortBy hashId, name (default) or email; search matches name, email and hashId. Rows are {user, rights, userEnvironmentSettings}; machine accounts are users too (email null when they have none).',
      },
    },
    async (request) => findUsers(ctx.db, request.account, request.query),
  );

  app.get(
    '/user/:hashId',
    {
      config: { rights },
      schema: { tags, summary: 'user get', params: HashIdParams, description: 'Answers {user, rights, userEnvironmentSettings}.' },
    },
    async (request) => getUser(ctx.db, request.account, request.params.hashId),
  );

  app.post(
    '/user/:hashId',
    {
      config: { rights },
      schema: {
        tags,
        summary: 'user update',
        params: HashIdParams,
        body: UpdateBody,
        description:
          "Sets the members given (the SDK sends rights). A caller without ENVIRONMENT_ADMIN cannot change a user holding a right it lacks. email null clears a machine account's address.",
      },
    },
    async (request, reply) => {
      await updateUser(ctx.db, request.account, request.params.hashId, request.body);
      reply.status(204).send();
    },
  );

  app.delete(
    '/user/:hashId',
    {
      config: { rights },
      schema: {
        tags,
        summary: 'user delete',
        params: HashIdParams,
        description:
          "Removes the user: a machine account is revoked (its tokens stop working), a person's console sessions in this environment end; their subscriptions and settings go too. An account cannot delete itself (409).",
      },
    },
    async (request, reply) => {
      await deleteUser(ctx.db, request.account, request.params.hashId);
      reply.status(204).send();
    },
  );
}
