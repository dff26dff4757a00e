import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { StringOrTranslations, ValuePair } from '../../http/schemas.ts';
import { addQuantity, deleteQuantity, findQuantities, getQuantity, updateQuantity } from './store.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));
const QuantityBody = Type.Object({
  name: StringOrTranslations,
  color: Type.Optional(Type.String({ pattern: '^#[0-9a-fA-F]{6}$' })),
  unit: Type.String({ maxLength: 32 }),
  defaultOrderOfMagnitude: Type.Integer({ minimum: -128, maximum: 127 }),
  defaultCriticallyLowThreshold: Nullable(ValuePair),
  defaultLowThreshold: Nullable(ValuePair),
  defaultHighThreshold: Nullable(ValuePair),
  defaultCriticallyHighThreshold: Nullable(ValuePair),
  disableSiPrefixes: Type.Optional(Type.Boolean()),
}, { additionalProperties: false });

export async function quantityRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<Static<typeof QuantityBody>, Partial<Static<typeof QuantityBody>>>(app, {
    base: '/quantity/', findPath: '/quantity/quantities', noun: 'quantity', addBody: QuantityBody, updateBody: Type.Partial(QuantityBody),
    rights: { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'ENVIRONMENT_ADMIN' },
    readRights: { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'READ' },
    operations: {
      add: async (env, body) => ({ hashId: await addQuantity(ctx.db, env, body) }),
      find: (env, query) => findQuantities(ctx.db, env, query),
      get: async (env, hashId) => ({ quantity: await getQuantity(ctx.db, env, hashId) }),
      update: (env, hashId, patch) => updateQuantity(ctx.db, env, hashId, patch),
      remove: (env, hashId) => deleteQuantity(ctx.db, env, hashId),
    },
  });
}
