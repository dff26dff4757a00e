import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { supplierView } from '../../accounts/routes.ts';
import { FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { findSubscriptions, OBJECT_TYPES, subscribe, unsubscribe } from './store.ts';

const AddBody = Type.Object(
  {
    objectType: Type.Union(OBJECT_TYPES.map((t) => Type.Literal(t))),
    objectHashId: HashId,
    userHashId: Type.Optional(HashId),
  },
  { additionalProperties: false },
);

const SubscriptionFind = Type.Object({ ...FindQuery.properties, supplierHashId: Type.Optional(HashId), userHashId: Type.Optional(HashId) });

const tags = ['subscription'];
// the SDK's find and delete are open to every logged-in account of either type
const anyAccount = { connectivity: '', monitoring: '' };

/** The SDK's subscription routes: who is mailed when a supplier object's code fails (src/notifications/). */
export async function subscriptionRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/subscription/',
    {
      config: { rights: { connectivity: 'ENVIRONMENT_ADMIN' } },
      schema: {
        tags,
        summary: 'subscription add',
        body: AddBody,
        description:
          "Subscribes the caller (or userHashId, a user of the environment, e.g. a person added with user add) to alerts on failures of the object's code. " +
          'Subscribing again answers the existing subscription. An object that is not a live one of this environment: parameter_error naming objectHashId.',
      },
    },
    async (request) => subscribe(ctx.db, request.account, request.body),
  );

  app.get(
    '/subscription/',
    {
      config: { rights: anyAccount },
      schema: {
        tags,
        summary: 'subscription find',
        querystring: SubscriptionFind,
        description: "The caller's subscriptions (or userHashId's), each with objectName and the supplier. sortBy hashId (default) or objectType.",
      },
    },
    async (request) => {
      const page = await findSubscriptions(ctx.db, request.account, request.query);
      const supplier = supplierView(request.account.environment);
      return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((row) => ({ ...row, supplier })) };
    },
  );

  app.delete(
    '/subscription/:hashId',
    {
      config: { rights: anyAccount },
      schema: { tags, summary: 'subscription delete', params: HashIdParams },
    },
    async (request, reply) => {
      await unsubscribe(ctx.db, request.account.environment.id, request.params.hashId);
      reply.status(204).send();
    },
  );
}
