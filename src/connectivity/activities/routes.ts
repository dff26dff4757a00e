import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { findActivities, getActivity } from './store.ts';

// the SDK's query: the table query plus filters
const ActivityQuery = Type.Composite([
  FindQuery,
  Type.Object({
    deviceHashId: Type.Optional(Type.Union([Type.Null(), HashId])),
    deviceTypeHashId: Type.Optional(Type.Union([Type.Null(), HashId])),
    triggerType: Type.Optional(Type.String({ maxLength: 64 })),
    failed: Type.Optional(Type.Boolean()),
  }),
]);

const rights = { connectivity: 'ENVIRONMENT_ADMIN' };
const tags = ['supplier-activity'];

export async function activityRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get('/supplier-activity/', { config: { rights }, schema: { tags, summary: 'supplier activity find', querystring: ActivityQuery } }, async (request) =>
    findActivities(ctx.db, request.account.environment.id, request.query),
  );
  app.get('/supplier-activity/:hashId', { config: { rights }, schema: { tags, summary: 'supplier activity get', params: HashIdParams } }, async (request) =>
    getActivity(ctx.db, request.account.environment.id, request.params.hashId),
  );
}
