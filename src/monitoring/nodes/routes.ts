import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import type { Fields as FieldsType } from '../../app/fields.ts';
import type { FindQuery as FindQueryType } from '../../app/find.ts';
import { Fields, FindQuery, HashIdParams } from '../../http/schemas.ts';
import { FieldsUpdate, Point, readRights, staticRights } from '../graph-schemas.ts';
import { addNode, deleteNode, findNodes, getNode, updateNode } from './store.ts';

type PointType = { type: 'Point'; coordinates: [number, number] };
const AddBody = Type.Object({ geometry: Point, fields: Fields }, { additionalProperties: false });
const UpdateBody = Type.Object({ geometry: Type.Optional(Point), fields: Type.Optional(FieldsUpdate) }, { additionalProperties: false });
const FindNodeQuery = Type.Object({ ...FindQuery.properties, includeDeleted: Type.Optional(Type.Boolean()) });
const tags = ['node'];
const hashIdOf = (params: unknown) => (params as { hashId: string }).hashId;

/** Nodes: add / find / get / update / delete under /graph/node. */
export async function nodeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post('/graph/node', { config: { rights: staticRights }, schema: { tags, summary: 'node add', body: AddBody } }, async (request) =>
    addNode(ctx.db, request.account.environment, request.body as { geometry: PointType; fields: FieldsType }));
  app.get('/graph/node', { config: { rights: readRights }, schema: { tags, summary: 'node find', querystring: FindNodeQuery } }, async (request) =>
    findNodes(ctx.db, request.account.environment.id, request.query as FindQueryType));
  app.get('/graph/node/:hashId', { config: { rights: readRights }, schema: { tags, summary: 'node get', params: HashIdParams } }, async (request) =>
    getNode(ctx.db, request.account.environment.id, hashIdOf(request.params)));
  app.post('/graph/node/:hashId', { config: { rights: staticRights }, schema: { tags, summary: 'node update', params: HashIdParams, body: UpdateBody } }, async (request) =>
    updateNode(ctx.db, request.account.environment, hashIdOf(request.params), request.body as { geometry?: PointType; fields?: FieldsType }));
  app.delete('/graph/node/:hashId', { config: { rights: staticRights }, schema: { tags, summary: 'node delete', params: HashIdParams } }, async (request, reply) => {
    await deleteNode(ctx.db, request.account.environment.id, hashIdOf(request.params));
    reply.status(204).send();
  });
}
