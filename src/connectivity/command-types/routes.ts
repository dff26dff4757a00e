import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { FieldConfiguration, StringOrTranslations } from '../../http/schemas.ts';
import {
  addCommandType,
  deleteCommandType,
  findClaimedCommandTypes,
  findCommandTypes,
  getClaimedCommandType,
  getCommandType,
  updateCommandType,
  type ChannelSelect,
  type CommandTypeInput,
  type CommandTypePatch,
  type EnvironmentAccess,
  type StartEnd,
} from './store.ts';

// a plain `enum` keyword: the validation error then lists the allowed values
const OneOf = <T extends string>(values: T[]) => Type.Unsafe<T>({ type: 'string', enum: values });
const StartEndSchema = OneOf<StartEnd>(['required', 'optional', 'disabled']);
const ChannelSelectSchema = OneOf<ChannelSelect>(['single', 'multiple', 'off']);
const EnvironmentAccessSchema = OneOf<EnvironmentAccess>(['full', 'read', 'none']);
// update also takes the SDK's `{existingKey, fieldConfiguration}` items
const UpdatableConfigurations = Type.Array(
  Type.Union([
    FieldConfiguration,
    Type.Object({ existingKey: Type.Optional(Type.String()), fieldConfiguration: FieldConfiguration }, { additionalProperties: false }),
  ]),
  { maxItems: 50 },
);

const AddBody = Type.Object(
  {
    name: StringOrTranslations,
    start: Type.Optional(StartEndSchema),
    end: Type.Optional(StartEndSchema),
    channelSelect: Type.Optional(ChannelSelectSchema),
    environmentAccess: Type.Optional(EnvironmentAccessSchema),
    fieldConfigurations: Type.Array(FieldConfiguration, { maxItems: 50 }),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    name: Type.Optional(StringOrTranslations),
    start: Type.Optional(StartEndSchema),
    end: Type.Optional(StartEndSchema),
    channelSelect: Type.Optional(ChannelSelectSchema),
    environmentAccess: Type.Optional(EnvironmentAccessSchema),
    fieldConfigurations: Type.Optional(UpdatableConfigurations),
  },
  { additionalProperties: false },
);

export async function commandTypeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<CommandTypeInput, CommandTypePatch>(app, {
    base: '/command-type/',
    noun: 'command-type',
    rights: { connectivity: 'ENVIRONMENT_ADMIN' },
    addBody: AddBody,
    updateBody: UpdateBody,
    // a monitoring environment reads the command types of the devices it claimed (the interface's M-READ)
    readRights: { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'READ' },
    operations: {
      add: async (env, body) => ({ hashId: await addCommandType(ctx.db, env, body) }),
      find: (env, query, account) => (account.environment.type === 'monitoring' ? findClaimedCommandTypes : findCommandTypes)(ctx.db, env, query),
      get: (env, hashId, account) => (account.environment.type === 'monitoring' ? getClaimedCommandType : getCommandType)(ctx.db, env, hashId),
      update: (env, hashId, patch) => updateCommandType(ctx.db, env, hashId, patch),
      remove: (env, hashId) => deleteCommandType(ctx.db, env, hashId),
    },
  });
}
