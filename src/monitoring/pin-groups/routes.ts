import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { Fields, FindQuery, HashId, HashIdParams, Timestamp } from '../../http/schemas.ts';
import { FieldsUpdate, MapLayerKey, Photo, Point, readRights, staticRights } from '../graph-schemas.ts';
import { pinGroupPerformance } from './performance.ts';
import { addPinGroup, deletePinGroup, findPinGroups, getPinGroup, updatePinGroup, updatePinGroups, MAX_BULK_PIN_GROUPS } from './store.ts';

const GridHashIds = Type.Array(HashId, { maxItems: 30 });
const AddBody = Type.Object(
  {
    symbolKey: Type.String({ minLength: 1, maxLength: 64 }),
    geometry: Type.Union([Point, Type.Null()]),
    fields: Fields,
    mapLayer: Type.Optional(MapLayerKey),
    photo: Type.Optional(Photo),
    gridHashIds: Type.Optional(GridHashIds),
    gridName: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    symbolKey: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    geometry: Type.Optional(Type.Union([Point, Type.Null()])),
    fields: Type.Optional(FieldsUpdate),
    mapLayer: Type.Optional(MapLayerKey),
    deviceFields: Type.Optional(FieldsUpdate),
    photo: Type.Optional(Type.Union([Photo, Type.Null()])),
    gridHashIds: Type.Optional(GridHashIds),
    gridName: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    deviceTypeDashboardIndex: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);
// the SDK's update-pin-groups: the map layer of many pin groups at once
const UpdateManyBody = Type.Object(
  {
    hashIds: Type.Array(HashId, { maxItems: MAX_BULK_PIN_GROUPS }),
    mapLayer: Type.Optional(Type.Object({ key: Type.Optional(MapLayerKey), includeEdges: Type.Optional(Type.Boolean()) }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
const FindPinGroupQuery = Type.Object({
  ...FindQuery.properties,
  includeDeleted: Type.Optional(Type.Boolean()),
  forCommandTypeHashId: Type.Optional(HashId),
  forEdge: Type.Optional(HashId),
  forGrid: Type.Optional(HashId),
});

const tags = ['pin-group'];

/** Pin groups (locations): add / find / get / update / delete under /graph/pin-group. */
export async function pinGroupRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post('/graph/pin-group', { config: { rights: staticRights }, schema: { tags, summary: 'pin-group add', body: AddBody } }, async (request) =>
    addPinGroup(ctx.db, request.account.environment, request.body),
  );
  app.get(
    '/graph/pin-group',
    { config: { rights: readRights }, schema: { tags, summary: 'pin-group find', querystring: FindPinGroupQuery } },
    async (request) => findPinGroups(ctx.db, request.account.environment.id, request.query),
  );
  app.get('/graph/pin-group/:hashId', { config: { rights: readRights }, schema: { tags, summary: 'pin-group get', params: HashIdParams } }, async (request) =>
    getPinGroup(ctx.db, request.account.environment.id, request.params.hashId),
  );
  app.get(
    '/graph/pin-group/:hashId/performance',
    {
      config: { rights: readRights },
      schema: {
        tags,
        summary: 'pin-group performance get',
        params: HashIdParams,
        querystring: Type.Object({
          asOf: Timestamp,
          interval: Type.Optional(Type.Union((['day', 'isoweek', 'month', 'year', 'years'] as const).map((i) => Type.Literal(i)))),
        }),
      },
    },
    async (request) => {
      const q = request.query;
      return pinGroupPerformance(ctx.db, request.account.environment.id, request.params.hashId, q.asOf, q.interval ?? 'month');
    },
  );
  app.post(
    '/graph/pin-group/:hashId',
    { config: { rights: staticRights }, schema: { tags, summary: 'pin-group update', params: HashIdParams, body: UpdateBody } },
    async (request) => updatePinGroup(ctx.db, request.account.environment, request.params.hashId, request.body),
  );
  app.post(
    '/graph/pin-groups',
    {
      config: { rights: staticRights },
      schema: {
        tags,
        summary: 'pin-groups update',
        description: `Moves up to ${MAX_BULK_PIN_GROUPS} pin groups (with includeEdges also their pins' edges) to a map layer.`,
        body: UpdateManyBody,
      },
    },
    async (request, reply) => {
      await updatePinGroups(ctx.db, request.account.environment, request.body);
      reply.status(204).send();
    },
  );
  app.delete(
    '/graph/pin-group/:hashId',
    {
      config: { rights: staticRights },
      schema: { tags, summary: 'pin-group delete', description: "A linked device is unlinked first; the pin group's pins go with it.", params: HashIdParams },
    },
    async (request, reply) => {
      await ctx.changes.publish('devices', { hashIds: await deletePinGroup(ctx.db, request.account.environment.id, request.params.hashId) });
      reply.status(204).send();
    },
  );
}
