import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { FieldConfiguration, FindQuery, HashId, HashIdParams, StringOrTranslations } from '../../http/schemas.ts';
import { addDeviceType, deleteDeviceType, findDeviceTypes, getDeviceType, updateDeviceType, type DeviceTypeInput, type DeviceTypePatch } from './store.ts';

const FieldConfigurations = (maxItems: number) => Type.Array(FieldConfiguration, { maxItems });
// update also takes the SDK's `{existingKey, fieldConfiguration}` items
const UpdatableFieldConfigurations = (maxItems: number) => Type.Array(Type.Union([
  FieldConfiguration,
  Type.Object({ existingKey: Type.Optional(Type.String()), fieldConfiguration: FieldConfiguration }, { additionalProperties: false }),
]), { maxItems });
// null first: with coerceTypes a string branch tried first would turn null into ''
const Color = Type.Union([Type.Null(), Type.String({ maxLength: 64 })]);
const Title = Type.Union([Type.Null(), StringOrTranslations]);
const ChannelChart = Type.Object({
  title: Title,
  series: Type.Array(Type.Object({ quantityHashId: HashId, color: Type.Optional(Color) }, { additionalProperties: false })),
}, { additionalProperties: false });
const Chart = Type.Object({
  title: Title,
  series: Type.Array(Type.Object({ channelIndex: Type.Integer({ minimum: 0 }), quantityHashId: HashId, color: Type.Optional(Color) }, { additionalProperties: false })),
}, { additionalProperties: false });
const channel = <T extends ReturnType<typeof FieldConfigurations> | ReturnType<typeof UpdatableFieldConfigurations>>(pinFieldConfigurations: T) => Type.Object({
  name: StringOrTranslations,
  pinFieldConfigurations,
  defaultPinName: Type.Optional(StringOrTranslations),
  charts: Type.Optional(Type.Array(ChannelChart)),
}, { additionalProperties: false });

const common = {
  name: StringOrTranslations,
  eventHandler: Type.String({ maxLength: 1_000_000 }),
  charts: Type.Optional(Type.Array(Chart, { maxItems: 5 })),
  commandTypeHashIds: Type.Array(HashId, { maxItems: 60 }),
  measurementCycleCommandTypeHashId: Type.Optional(Type.Union([Type.Null(), HashId])),
  identifierFieldKey: Type.Optional(Type.Union([Type.Null(), Type.String({ minLength: 1, maxLength: 64 })])),
};
const AddBody = Type.Object({
  ...common,
  fieldConfigurations: FieldConfigurations(50),
  pinGroupFieldConfigurations: FieldConfigurations(50),
  channels: Type.Array(channel(FieldConfigurations(50)), { maxItems: 60 }),
}, { additionalProperties: false });
const UpdateBody = Type.Partial(Type.Object({
  ...common,
  fieldConfigurations: UpdatableFieldConfigurations(50),
  pinGroupFieldConfigurations: UpdatableFieldConfigurations(50),
  channels: Type.Array(channel(UpdatableFieldConfigurations(50)), { maxItems: 60 }),
  // sent by the SDK's update; no meaning here
  shimmable: Type.Boolean(),
}), { additionalProperties: false });

const rights = { connectivity: 'ENVIRONMENT_ADMIN' };
const tags = ['device-type'];
const hashIdOf = (params: unknown) => (params as { hashId: string }).hashId;

export async function deviceTypeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post('/device-type/', { config: { rights }, schema: { tags, summary: 'device-type add', body: AddBody } }, async (request) =>
    addDeviceType(ctx.db, request.account.environment.id, request.body as Static<typeof AddBody> as DeviceTypeInput));
  app.get('/device-type/', { config: { rights }, schema: { tags, summary: 'device-type find', querystring: FindQuery } }, async (request) =>
    findDeviceTypes(ctx.db, request.account.environment.id, request.query as Static<typeof FindQuery>));
  app.get('/device-type/:hashId', { config: { rights }, schema: { tags, summary: 'device-type get', params: HashIdParams } }, async (request) =>
    getDeviceType(ctx.db, request.account.environment.id, hashIdOf(request.params)));
  app.post('/device-type/:hashId', { config: { rights }, schema: { tags, summary: 'device-type update', params: HashIdParams, body: UpdateBody } }, async (request, reply) => {
    await updateDeviceType(ctx.db, request.account.environment.id, hashIdOf(request.params), request.body as Static<typeof UpdateBody> as DeviceTypePatch);
    reply.status(204).send();
  });
  app.delete('/device-type/:hashId', { config: { rights }, schema: { tags, summary: 'device-type delete', params: HashIdParams } }, async (request, reply) => {
    await deleteDeviceType(ctx.db, ctx.redis, request.account.environment.id, hashIdOf(request.params));
    reply.status(204).send();
  });
}
