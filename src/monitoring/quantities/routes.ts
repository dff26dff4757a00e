import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { FindQuery, HashId, StringOrTranslations, ValuePair } from '../../http/schemas.ts';
import { reportTypesOfQuantity } from '../report-types/store.ts';
import { mergeQuantity } from './merge.ts';
import { addQuantity, deleteQuantity, findQuantities, getQuantity, updateQuantity } from './store.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Optional(Type.Union([Type.Null(), t]));
// unit and defaultOrderOfMagnitude are optional as in the SDK's quantity add (defaults: no unit, 0);
// a unit is at most 10 characters, as the SDK's quantity model answers it
const QuantityBody = Type.Object(
  {
    name: StringOrTranslations,
    color: Type.Optional(Type.String({ pattern: '^#[0-9a-fA-F]{6}$' })),
    unit: Nullable(Type.String({ minLength: 1, maxLength: 10 })),
    defaultOrderOfMagnitude: Type.Optional(Type.Integer({ minimum: -128, maximum: 127 })),
    defaultCriticallyLowThreshold: Nullable(ValuePair),
    defaultLowThreshold: Nullable(ValuePair),
    defaultHighThreshold: Nullable(ValuePair),
    defaultCriticallyHighThreshold: Nullable(ValuePair),
    disableSiPrefixes: Type.Optional(Type.Boolean()),
    // the SDK's link of device (supplier) quantities to a monitoring quantity; claimed devices arrive with the monitoring half
    deviceQuantityHashIds: Type.Optional(
      Type.Array(HashId, { maxItems: 0, description: 'linking device quantities is not available yet: only an empty list' }),
    ),
  },
  { additionalProperties: false },
);
const QuantityQuery = Type.Composite([
  FindQuery,
  Type.Object({
    includeDeleted: Type.Optional(Type.Boolean()),
    excludeHashIds: Type.Optional(Type.Array(HashId, { maxItems: 1000 })),
    environmentReportTypeHashIds: Type.Optional(Type.Array(HashId, { maxItems: 1000 })),
    // the SDK's filter for device quantities: no such links exist in this deployment yet
    deviceQuantityMode: Type.Optional(Type.Boolean()),
  }),
]);

export async function quantityRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  crudRoutes<Static<typeof QuantityBody>, Partial<Static<typeof QuantityBody>>>(app, {
    base: '/quantity/',
    findPath: '/quantity/quantities',
    findQuery: QuantityQuery,
    noun: 'quantity',
    addBody: QuantityBody,
    updateBody: Type.Partial(QuantityBody),
    rights: { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'ENVIRONMENT_ADMIN' },
    readRights: { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'READ' },
    operations: {
      add: async (env, body) => ({ hashId: await addQuantity(ctx.db, env, body) }),
      find: (env, query) => findQuantities(ctx.db, env, query),
      // the manual report types whose form offers it; supplier quantities linked to this one: none exist here yet
      get: async (env, hashId, account) => {
        const monitoring = account.environment.type === 'monitoring';
        const quantity = await getQuantity(ctx.db, env, hashId, monitoring);
        return { reportTypes: monitoring ? await reportTypesOfQuantity(ctx.db, env, hashId) : [], quantity, linkedSupplierQuantities: [] };
      },
      update: (env, hashId, patch) => updateQuantity(ctx.db, env, hashId, patch, ctx.changes),
      remove: (env, hashId) => deleteQuantity(ctx.db, env, hashId),
    },
  });
  app.post(
    '/quantity/:sourceQuantityHashId/merge',
    {
      config: { rights: { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'ENVIRONMENT_ADMIN' } },
      schema: {
        tags: ['quantity'],
        summary: 'quantity merge',
        description:
          'Moves every measurement, threshold, issue and chart of the source quantity to the target and deletes the source, in one transaction. This cannot be undone.',
        params: Type.Object({ sourceQuantityHashId: HashId }),
        body: Type.Object({ targetQuantityHashId: HashId }, { additionalProperties: false }),
      },
    },
    async (request) =>
      mergeQuantity(ctx.db, request.account.environment.id, request.params.sourceQuantityHashId, request.body.targetQuantityHashId, ctx.changes),
  );
}
