import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { Fields, FindQuery, HashIdParams } from '../../http/schemas.ts';
import { FieldsUpdate, Point, readRights, staticRights } from '../graph-schemas.ts';
import { addNode, deleteNode, findNodes, getNode, updateNode } from './store.ts';

const AddBody = Type.Object({ geometry: Point, fields: Fields }, { additionalProperties: false });
const UpdateBody = Type.Object({ geometry: Type.Optional(Point), fields: Type.Optional(FieldsUpdate) }, { additionalProperties: false });
const FindNodeQuery = Type.Object({ ...FindQuery.properties, includeDeleted: Type.Optional(Type.Boolean()) });
const tags = ['node'];

/** Nodes: add / find / get / update / delete under /graph/node. */
export async function nodeRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post('/graph/node', { config: { rights: staticRights }, schema: { tags, summary: 'node add', body: AddBody } }, async (request) =>
    addNode(ctx.db, request.account.environment, request.body),
  );
  app.get('/graph/node', { config: { rights: readRights }, schema: { tags, summary: 'node find', querystring: FindNodeQuery } }, async (request) =>
    findNodes(ctx.db, request.account.environment.id, request.query),
  );
  app.get('/graph/node/:hashId', { config: { rights: readRights }, schema: { tags, summary: 'node get', params: HashIdParams } }, async (request) =>
    getNode(ctx.db, request.account.environment.id, request.params.hashId),
  );
  app.post(
    '/graph/node/:hashId',
    { config: { rights: staticRights }, schema: { tags, summary: 'node update', params: HashIdParams, body: UpdateBody } },
    async (request) => updateNode(ctx.db, request.account.environment, request.params.hashId, request.body),
  );
  app.delete(
    '/graph/node/:hashId',
    { config: { rights: staticRights }, schema: { tags, summary: 'node delete', params: HashIdParams } },
    async (request, reply) => {
      await deleteNode(ctx.db, request.account.environment.id, request.params.hashId);
      reply.status(204).send();
    },
  );
}
