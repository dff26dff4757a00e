import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { RightError } from '../../app/errors.ts';
import { crudRoutes } from '../../http/crud.ts';
import { FieldConfiguration, HashId, StringOrTranslations } from '../../http/schemas.ts';
import { MAX_SOURCE_CHARS_CEILING } from '../../sandbox/limits.ts';
import {
  addDeviceType,
  deleteDeviceType,
  findClaimedDeviceTypes,
  findDeviceTypes,
  getDeviceType,
  updateDeviceType,
  type DeviceTypeInput,
  type DeviceTypePatch,
} from './store.ts';

const FieldConfigurations = (maxItems: number) => Type.Array(FieldConfiguration, { maxItems });
// update also takes the SDK's `{existingKey, fieldConfiguration}` items
const UpdatableFieldConfigurations = (maxItems: number) =>
  Type.Array(
    Type.Union([
      FieldConfiguration,
      Type.Object({ existingKey: Type.Optional(Type.String()), fieldConfiguration: FieldConfiguration }, { additionalProperties: false }),
    ]),
    { maxItems },
  );
// null first: with coerceTypes a string branch tried first would turn null into ''
const Color = Type.Union([Type.Null(), Type.String({ maxLength: 64 })]);
const Title = Type.Union([Type.Null(), StringOrTranslations]);
const ChannelChart = Type.Object(
  {
    title: Title,
    series: Type.Array(Type.Object({ quantityHashId: HashId, color: Type.Optional(Color) }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
const Chart = Type.Object(
  {
    title: Title,
    series: Type.Array(
      Type.Object({ channelIndex: Type.Integer({ minimum: 0 }), quantityHashId: HashId, color: Type.Optional(Color) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);
const channel = <T extends ReturnType<typeof FieldConfigurations> | ReturnType<typeof UpdatableFieldConfigurations>>(pinFieldConfigurations: T) =>
  Type.Object(
    {
      name: StringOrTranslations,
      pinFieldConfigurations,
      defaultPinName: Type.Optional(StringOrTranslations),
      charts: Type.Optional(Type.Array(ChannelChart)),
    },
    { additionalProperties: false },
  );

const common = {
  name: StringOrTranslations,
  // the hard ceiling of SANDBOX_MAX_SOURCE_CHARS (src/sandbox/limits.ts); the configured limit is checked on save
  eventHandler: Type.String({ maxLength: MAX_SOURCE_CHARS_CEILING }),
  charts: Type.Optional(Type.Array(Chart, { maxItems: 5 })),
  commandTypeHashIds: Type.Array(HashId, { maxItems: 60 }),
  measurementCycleCommandTypeHashId: Type.Optional(Type.Union([Type.Null(), HashId])),
  identifierFieldKey: Type.Optional(Type.Union([Type.Null(), Type.String({ minLength: 1, maxLength: 64 })])),
};
const AddBody = Type.Object(
  {
    ...common,
    fieldConfigurations: FieldConfigurations(50),
    pinGroupFieldConfigurations: FieldConfigurations(50),
    channels: Type.Array(channel(FieldConfigurations(50)), { maxItems: 60 }),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Partial(
  Type.Object({
    ...common,
    fieldConfigurations: UpdatableFieldConfigurations(50),
    pinGroupFieldConfigurations: UpdatableFieldConfigurations(50),
    channels: Type.Array(channel(UpdatableFieldConfigurations(50)), { maxItems: 60 }),
    // sent by the SDK's update; no meaning here
    shimmable: Type.Boolean(),
  }),
  { additionalProperties: false },
);

export async function deviceTypeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<DeviceTypeInput, DeviceTypePatch>(app, {
    base: '/device-type/',
    noun: 'device-type',
    rights: { connectivity: 'ENVIRONMENT_ADMIN' },
    addBody: AddBody,
    updateBody: UpdateBody,
    // a monitoring environment finds the types of the devices it claimed (the interface's M-READ); get stays the supplier's (its code)
    readRights: { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'READ' },
    operations: {
      add: (env, body, account) => addDeviceType(ctx.db, env, body, account.id, ctx.config.supplierCode),
      find: (env, query, account) => (account.environment.type === 'monitoring' ? findClaimedDeviceTypes : findDeviceTypes)(ctx.db, env, query),
      get: (env, hashId, account) => {
        if (account.environment.type === 'monitoring')
          throw new RightError('device-type get is not available in a monitoring environment: device-type find answers the types of the claimed devices');
        return getDeviceType(ctx.db, env, hashId, account.id);
      },
      update: (env, hashId, patch) => updateDeviceType(ctx.db, env, hashId, patch, ctx.config.supplierCode),
      remove: (env, hashId) => deleteDeviceType(ctx, env, hashId),
    },
  });
}
