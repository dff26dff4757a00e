import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { Fields, FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { FieldsUpdate, readRights, staticRights } from '../graph-schemas.ts';
import { addPin, deletePin, findPins, getPin, updatePin } from './store.ts';

const AddBody = Type.Object(
  {
    fields: Fields,
    typeKey: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Null()])),
    edgeHashId: Type.Optional(Type.Union([HashId, Type.Null()])),
    pinGridsHashIds: Type.Optional(Type.Union([Type.Array(HashId, { maxItems: 30 }), Type.Null()])),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    fields: Type.Optional(FieldsUpdate),
    edgeHashId: Type.Optional(Type.Union([HashId, Type.Null()])),
    pinGridsHashIds: Type.Optional(Type.Array(HashId, { maxItems: 30 })),
  },
  { additionalProperties: false },
);
const FindPinQuery = Type.Object({ ...FindQuery.properties, includeDeleted: Type.Optional(Type.Boolean()) });

const tags = ['pin'];

/** Pins (ports): added under their pin group, then find / get / update / delete under /graph/pin. */
export async function pinRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/graph/pin-group/:pinGroupHashId/pin',
    {
      config: { rights: staticRights },
      schema: { tags, summary: 'pin add', params: Type.Object({ pinGroupHashId: HashId }), body: AddBody },
    },
    async (request) => addPin(ctx.db, request.account.environment, request.params.pinGroupHashId, request.body),
  );
  app.get('/graph/pin', { config: { rights: readRights }, schema: { tags, summary: 'pin find', querystring: FindPinQuery } }, async (request) =>
    findPins(ctx.db, request.account.environment.id, request.query),
  );
  app.get('/graph/pin/:hashId', { config: { rights: readRights }, schema: { tags, summary: 'pin get', params: HashIdParams } }, async (request) =>
    getPin(ctx.db, request.account.environment.id, request.params.hashId),
  );
  app.post(
    '/graph/pin/:hashId',
    { config: { rights: staticRights }, schema: { tags, summary: 'pin update', params: HashIdParams, body: UpdateBody } },
    async (request) => updatePin(ctx.db, request.account.environment, request.params.hashId, request.body),
  );
  app.delete(
    '/graph/pin/:hashId',
    { config: { rights: staticRights }, schema: { tags, summary: 'pin delete', params: HashIdParams } },
    async (request, reply) => {
      await ctx.changes.publish('devices', { hashIds: await deletePin(ctx.db, request.account.environment.id, request.params.hashId) });
      reply.status(204).send();
    },
  );
}
