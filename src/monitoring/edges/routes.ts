import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { Fields, FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { EdgeGeometry, FieldsUpdate, MapLayerKey, Photo, readRights, staticRights } from '../graph-schemas.ts';
import { addEdge, deleteEdge, findEdges, getEdge, updateEdge } from './store.ts';

const AddBody = Type.Object(
  {
    geometry: EdgeGeometry,
    fields: Fields,
    nodeHashIds: Type.Optional(Type.Array(Type.Union([HashId, Type.Null()]), { minItems: 1, maxItems: 2 })),
    // deprecated, accepted and ignored
    properties: Type.Optional(Type.Unknown()),
    mapLayer: Type.Optional(MapLayerKey),
    photo: Type.Optional(Photo),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    geometry: Type.Optional(EdgeGeometry),
    nodeHashIds: Type.Optional(Type.Tuple([HashId, HashId])),
    fields: Type.Optional(FieldsUpdate),
    mapLayer: Type.Optional(MapLayerKey),
    photo: Type.Optional(Type.Union([Photo, Type.Null()])),
  },
  { additionalProperties: false },
);
const FindEdgeQuery = Type.Object({ ...FindQuery.properties, includeDeleted: Type.Optional(Type.Boolean()) });

const tags = ['edge'];

/** Edges (lines): add / find / get / update / delete under /graph/edge. */
export async function edgeRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/graph/edge',
    {
      config: { rights: staticRights },
      schema: {
        tags,
        summary: 'edge add',
        body: AddBody,
        description:
          'nodeHashIds: the nodes at the first and last point of a LineString; one given node is both ends; a null makes a node at that point, in the network ' +
          "(grid of typeKey node) of the other end's node, else in a new network. An edge between nodes of two networks merges them: the second end's nodes move into " +
          "the first end's network and the emptied grid is deleted. Deleting an edge or node splits no network.",
      },
    },
    async (request) => addEdge(ctx.db, request.account.environment, request.body),
  );
  app.get('/graph/edge', { config: { rights: readRights }, schema: { tags, summary: 'edge find', querystring: FindEdgeQuery } }, async (request) =>
    findEdges(ctx.db, request.account.environment.id, request.query),
  );
  app.get('/graph/edge/:hashId', { config: { rights: readRights }, schema: { tags, summary: 'edge get', params: HashIdParams } }, async (request) =>
    getEdge(ctx.db, request.account.environment.id, request.params.hashId),
  );
  app.post(
    '/graph/edge/:hashId',
    {
      config: { rights: staticRights },
      schema: {
        tags,
        summary: 'edge update',
        params: HashIdParams,
        body: UpdateBody,
        description:
          'nodeHashIds (a LineString edge only): the nodes at its first and last point; nodes of two networks merge, as on edge add. Without them a ' +
          'MultiLineString edge turned LineString gets two new nodes at its ends, in a new network; a LineString turned MultiLineString ends at no node.',
      },
    },
    async (request) => updateEdge(ctx.db, request.account.environment, request.params.hashId, request.body),
  );
  app.delete(
    '/graph/edge/:hashId',
    { config: { rights: staticRights }, schema: { tags, summary: 'edge delete', params: HashIdParams } },
    async (request, reply) => {
      await deleteEdge(ctx.db, request.account.environment.id, request.params.hashId);
      reply.status(204).send();
    },
  );
}
