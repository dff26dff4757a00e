import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashId } from '../../http/schemas.ts';
import { EdgeGeometry, Point, readRights, staticRights } from '../graph-schemas.ts';
import { findGraph, updateLocations } from './store.ts';

const LocationsBody = Type.Array(
  Type.Union([
    Type.Object({ type: Type.Literal('pinGroup'), hashId: HashId, geometry: Type.Union([Point, Type.Null()]) }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('node'), hashId: HashId, geometry: Point }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('edge'), hashId: HashId, geometry: EdgeGeometry }, { additionalProperties: false }),
  ]),
  { maxItems: 30 },
);

/** graph find (GET /graph/) and locations update (POST /graph/). */
export async function graphRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get('/graph/', { config: { rights: readRights }, schema: { tags: ['graph'], summary: 'graph find', querystring: FindQuery } }, async (request) =>
    findGraph(ctx.db, request.account.environment.id, request.query),
  );
  app.post(
    '/graph/',
    {
      config: { rights: staticRights },
      schema: { tags: ['graph'], summary: 'locations update', description: 'Up to 30 geometries, all or none.', body: LocationsBody },
    },
    async (request, reply) => {
      await updateLocations(ctx.db, request.account.environment.id, request.body);
      reply.status(204).send();
    },
  );
}
