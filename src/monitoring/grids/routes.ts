import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import type { Fields } from '../../app/fields.ts';
import { Fields as FieldsSchema, FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { FieldsUpdate, Photo, readRights, staticRights } from '../graph-schemas.ts';
import { addGrid, deleteGrid, findGrids, getPinGrid, getPinGroupGrid, updateGrid, type GridKind } from './store.ts';

const members = (maxItems: number) => Type.Optional(Type.Array(HashId, { maxItems }));
const addBody = (key: string) => Type.Object({ fields: FieldsSchema, photo: Type.Optional(Photo), [key]: members(90) }, { additionalProperties: false });
const updateBody = (key: string, maxItems: number) =>
  Type.Object(
    { fields: Type.Optional(FieldsUpdate), photo: Type.Optional(Type.Union([Photo, Type.Null()])), [key]: members(maxItems) },
    { additionalProperties: false },
  );
const FindGridQuery = Type.Object({
  ...FindQuery.properties,
  includeDeleted: Type.Optional(Type.Boolean()),
  type: Type.Optional(Type.Union([Type.Literal('pin'), Type.Literal('pinGroup'), Type.Literal('node')])),
});

const tags = ['grid'];
const hashIdOf = (params: unknown) => (params as { hashId: string }).hashId;
// the SDK's generic grid add / get / update (/graph/grid) are its older names of the pin group grid ones
const KINDS: { kind: GridKind; path: string; noun: string; key: string; updateMax: number }[] = [
  { kind: 'pin', path: '/graph/pin-grid', noun: 'pin-grid', key: 'pinHashIds', updateMax: 90 },
  { kind: 'pinGroup', path: '/graph/pin-group-grid', noun: 'pin-group-grid', key: 'pinGroupHashIds', updateMax: 10_000 },
  { kind: 'pinGroup', path: '/graph/grid', noun: 'grid', key: 'pinGroupHashIds', updateMax: 10_000 },
];

/** Pin grids and pin group grids: add / get / update per kind (pin group grids also as /graph/grid), find and delete for both under /graph/grid. */
export async function gridRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  for (const { kind, path, noun, key, updateMax } of KINDS) {
    app.post(path, { config: { rights: staticRights }, schema: { tags, summary: `${noun} add`, body: addBody(key) } }, async (request) => {
      const body = request.body as { fields: Fields; photo?: string } & Record<string, string[] | undefined>;
      return addGrid(ctx.db, request.account.environment, kind, { fields: body.fields, photo: body.photo, members: body[key] }, key);
    });
    app.get(`${path}/:hashId`, { config: { rights: readRights }, schema: { tags, summary: `${noun} get`, params: HashIdParams } }, async (request) =>
      (kind === 'pin' ? getPinGrid : getPinGroupGrid)(ctx.db, request.account.environment.id, hashIdOf(request.params), request.account.id),
    );
    app.post(
      `${path}/:hashId`,
      { config: { rights: staticRights }, schema: { tags, summary: `${noun} update`, params: HashIdParams, body: updateBody(key, updateMax) } },
      async (request) => {
        const body = request.body as { fields?: Fields; photo?: string | null } & Record<string, string[] | undefined>;
        return updateGrid(
          ctx.db,
          request.account.environment,
          kind,
          hashIdOf(request.params),
          { fields: body.fields, photo: body.photo, members: body[key] },
          key,
        );
      },
    );
  }
  app.get('/graph/grid', { config: { rights: readRights }, schema: { tags, summary: 'grid find', querystring: FindGridQuery } }, async (request) =>
    findGrids(ctx.db, request.account.environment.id, request.query as Parameters<typeof findGrids>[2]),
  );
  app.delete(
    '/graph/grid/:hashId',
    { config: { rights: staticRights }, schema: { tags, summary: 'grid delete', params: HashIdParams } },
    async (request, reply) => {
      await deleteGrid(ctx.db, request.account.environment.id, hashIdOf(request.params));
      reply.status(204).send();
    },
  );
}
